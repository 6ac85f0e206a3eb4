package condition

import (
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// HypervisorReason is the reason a realisation (a VMNetwork's or VMStorage's, on one
// HypervisorCluster) gives for a hypervisor's error.
func HypervisorReason(err error) string {
	switch {
	case errors.Is(err, hypervisor.ErrNotOwned):
		return fleetv1.NotOwnedReason
	case errors.Is(err, hypervisor.ErrUnsupported), errors.Is(err, hypervisor.ErrInvalid):
		return fleetv1.UnsupportedReason
	case errors.Is(err, hypervisor.ErrBusy):
		return fleetv1.VMsAttachedReason
	default:
		return fleetv1.HypervisorUnavailableReason
	}
}

// Realization is one HypervisorCluster's outcome, as Summarize weighs it.
type Realization struct {
	Cluster string
	Ready   bool
	Reason  string
	Message string
}

// Realized is how an object defined on several HypervisorClusters stands.
type Realized int

const (
	// RealizedNowhere: no cluster holds it.
	RealizedNowhere Realized = iota
	// RealizedPartly: some clusters hold it, others do not.
	RealizedPartly
	// RealizedEverywhere: every cluster holds it.
	RealizedEverywhere
)

// Summarize sets obj's Ready condition from its realisations: True when every cluster holds it,
// False otherwise with the one cluster's reason or PartiallyRealized, and the clusters' messages.
func Summarize(obj Object, rs []Realization) Realized {
	var ready, notReady []string
	for _, r := range rs {
		if r.Ready {
			ready = append(ready, r.Cluster)
		} else {
			notReady = append(notReady, r.Cluster+": "+r.Message)
		}
	}
	switch {
	case len(notReady) == 0:
		conditions.Set(obj, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: fleetv1.RealizedReason,
			Message: "on " + strings.Join(ready, ", ")})
		return RealizedEverywhere
	case len(ready) == 0:
		reason := fleetv1.PartiallyRealizedReason
		if len(rs) == 1 {
			reason = rs[0].Reason
		}
		conditions.Set(obj, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: strings.Join(notReady, "; ")})
		return RealizedNowhere
	default:
		conditions.Set(obj, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.PartiallyRealizedReason,
			Message: "on " + strings.Join(ready, ", ") + "; not on " + strings.Join(notReady, "; ")})
		return RealizedPartly
	}
}
