package v1alpha1

// Labels on the MachineMigrations HyperFleet creates to drain a host in maintenance, so that
// `kubectl get machinemigrations -l hyperfleet.io/drain-host=pve1` shows a host's drain.
const (
	// DrainHostLabel names the host in maintenance the migration empties.
	DrainHostLabel = "hyperfleet.io/drain-host"
	// DrainHypervisorClusterLabel names the HypervisorCluster of that host.
	DrainHypervisorClusterLabel = "hyperfleet.io/drain-hypervisor-cluster"
)

// DrainAttemptAnnotation numbers a drain's MachineMigrations of one VM from 1: a failed one is
// replaced by the next attempt after a backoff, until the HypervisorCluster's drain gives up.
const DrainAttemptAnnotation = "hyperfleet.io/drain-attempt"
