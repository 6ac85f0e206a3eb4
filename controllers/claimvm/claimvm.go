// Package claimvm finds the VM that a request on a MachineClaim acts on (a snapshot, a restore, a
// snapshot schedule, a migration): the claim in the request's own namespace, its HypervisorCluster
// and the connected provider, or why it cannot be acted on yet.
package claimvm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// VM is a MachineClaim whose VM a snapshot, restore, schedule or migration acts on.
type VM struct {
	Claim *infrav1.MachineClaim
	// HCGone is set when the claim's HypervisorCluster no longer exists.
	HCGone   bool
	HC       *infrav1.HypervisorCluster
	Provider hypervisor.Provider
	// Snapshotter is the provider's snapshots, set by Resolve.
	Snapshotter hypervisor.Snapshotter
}

// Ref is where the claim's VM is.
func (v *VM) Ref() hypervisor.VMRef { return Ref(v.Claim) }

// ID is the claim's VM ID as snapshots record it: the hypervisor's ID as text.
func (v *VM) ID() string { return v.Claim.Status.VMID }

// Ref is where a claim's VM is: its node and VM ID as its status records them.
func Ref(c *infrav1.MachineClaim) hypervisor.VMRef {
	return hypervisor.VMRef{Node: c.Status.Node, ID: c.Status.VMID}
}

// NotReady says why a claim's VM cannot be acted on yet: a reason from api/hyperfleet and a message.
type NotReady struct{ Reason, Message string }

func (n *NotReady) Error() string { return n.Message }

// Resolve finds the claim named in namespace, its VM and its provider. It returns a
// *NotReady error for conditions worth waiting on, and the claim with HCGone for a claim whose
// HypervisorCluster is gone. Only the claim's own namespace is looked at: a snapshot never reaches
// another tenant's VM.
func Resolve(ctx context.Context, c client.Client, registry *connection.Registry, namespace, name string) (*VM, error) {
	v, err := ResolveProvider(ctx, c, registry, namespace, name)
	if err != nil {
		return v, err
	}
	s, ok := hypervisor.As[hypervisor.Snapshotter](v.Provider)
	if !ok {
		return v, &NotReady{fleetv1.SnapshotsUnsupportedReason, fmt.Sprintf("HypervisorCluster %s's provider cannot take snapshots", v.HC.Name)}
	}
	v.Snapshotter = s
	return v, nil
}

// ResolveProvider is Resolve without asking for snapshots: the claim, its
// HypervisorCluster and its provider.
func ResolveProvider(ctx context.Context, c client.Client, registry *connection.Registry, namespace, name string) (*VM, error) {
	claim := &infrav1.MachineClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &NotReady{fleetv1.SourceNotFoundReason, fmt.Sprintf("MachineClaim %s not found in namespace %s", name, namespace)}
		}
		return nil, err
	}
	v := &VM{Claim: claim}
	if conditions.IsTrue(claim, infrav1.PausedCondition) {
		// The claim's Cluster is paused (clusterctl move pauses it): its VM is not ours to act on
		// until it resumes, here or in the cluster it moves to.
		return v, &NotReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("MachineClaim %s is paused", name)}
	}
	if claim.Status.VMID == "" || claim.Status.CompletedStep != infrav1.StepStarted || claim.Status.Node == "" {
		return v, &NotReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("MachineClaim %s has no provisioned VM yet", name)}
	}
	hcName := claim.Labels[infrav1.HypervisorClusterNameLabel]
	hc := &infrav1.HypervisorCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: hcName}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			v.HCGone = true
			return v, &NotReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %q of MachineClaim %s not found", hcName, name)}
		}
		return nil, err
	}
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		return v, &NotReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %s is not available: %s", hc.Name,
			conditions.GetMessage(hc, infrav1.HypervisorClusterAvailableCondition))}
	}
	p, err := registry.Get(ctx, hc)
	if err != nil {
		return v, &NotReady{fleetv1.SourceNotReadyReason, fmt.Sprintf("HypervisorCluster %s: %v", hc.Name, err)}
	}
	v.Provider, v.HC = p, hc
	return v, nil
}

// SetOwner adds claim as a (non-controller) owner of obj unless it is one already, so
// clusterctl move takes obj with its claim and deleting the claim deletes obj.
func SetOwner(c client.Client, obj client.Object, claim *infrav1.MachineClaim) error {
	return controllerutil.SetOwnerReference(claim, obj, c.Scheme())
}

// OwnedBy reports whether vm carries c's identity: its claim ID with its namespace and name.
func OwnedBy(vm hypervisor.VM, c *infrav1.MachineClaim) bool {
	o := vm.Owner
	return o != nil && !o.Legacy && c.Spec.ClaimID != "" && o.ClaimID == c.Spec.ClaimID &&
		o.ClaimNamespace == c.Namespace && o.ClaimName == c.Name
}

// LegacyOf reports whether vm is c's VM as a release before claim IDs marked it.
func LegacyOf(vm hypervisor.VM, c *infrav1.MachineClaim) bool {
	o := vm.Owner
	return o != nil && o.Legacy && o.LegacyClaimUID == string(c.UID) && o.ClaimNamespace == c.Namespace && o.ClaimName == c.Name
}

// Ownership is the ownership stamped on c's VM.
func Ownership(c *infrav1.MachineClaim) hypervisor.Ownership {
	return hypervisor.Ownership{ClaimNamespace: c.Namespace, ClaimName: c.Name, ClaimID: c.Spec.ClaimID}
}

// NewRandomID returns 16 random lower-case hex digits: installation and claim IDs.
func NewRandomID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Audit hears of the changes a controller makes to a claim's VM that exists, with their reason:
// the audit log (pkg/history/recorder.Claims). Nil records nothing.
type Audit interface {
	// VMChanged: action is what was done (migrate-vm, snapshot-vm, restore-vm, …), why the
	// request that asked for it.
	VMChanged(c *infrav1.MachineClaim, action, why string)
}

// Changed tells a of a change to vm's VM, when there is an audit log.
func Changed(a Audit, vm *VM, action, why string) {
	if a != nil && vm != nil && vm.Claim != nil {
		a.VMChanged(vm.Claim, action, why)
	}
}
