package runnerpool

import (
	"context"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// poolListing is a pool's Machines, MachineClaims and BootstrapConfigs as the cache holds them,
// read once per reconcile. A burst of a thousand runners wakes its pool for each of their status
// changes, and every step of the reconcile used to list all three again, each List deep-copying
// every object: most of the manager's CPU in a 1,000-job burst. The items share their maps and
// slices with the cache (client.UnsafeDisableDeepCopy): read them, delete them, but change a
// fresh copy (DeepCopy, or a Get) before writing.
type poolListing struct {
	machines []clusterv1.Machine
	claims   []infrav1.MachineClaim
	configs  []bootstrapv1.BootstrapConfig
}

// listing returns the pool's listing, reading it on first use in this reconcile.
func (r *Reconciler) listing(ctx context.Context, s *poolScope) (*poolListing, error) {
	if s.listed != nil {
		return s.listed, nil
	}
	opts := []client.ListOption{client.InNamespace(s.pool.Namespace),
		client.MatchingLabels{fleetv1.RunnerPoolNameLabel: s.pool.Name}, client.UnsafeDisableDeepCopy}
	machines := &clusterv1.MachineList{}
	if err := r.Client.List(ctx, machines, opts...); err != nil {
		return nil, err
	}
	claims := &infrav1.MachineClaimList{}
	if err := r.Client.List(ctx, claims, opts...); err != nil {
		return nil, err
	}
	configs := &bootstrapv1.BootstrapConfigList{}
	if err := r.Client.List(ctx, configs, opts...); err != nil {
		return nil, err
	}
	s.listed = &poolListing{machines: machines.Items, claims: claims.Items, configs: configs.Items}
	return s.listed, nil
}
