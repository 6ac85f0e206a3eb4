package hypervisor

import "context"

// Provider is everything HyperFleet needs from a hypervisor cluster. Mutating calls refuse VMs that do
// not carry HyperFleet's ownership metadata with ErrNotOwned. Long operations of a provider with
// Capabilities.AsyncTasks return a TaskID that the caller keeps (in status) and polls with
// TaskStatus, so no second task is started while one runs; a synchronous provider (Hyper-V over
// WS-Man) finishes the work before returning and returns the empty TaskID, which callers treat as
// done without polling.
//
// VM IDs are opaque strings (VMRef.ID). A provider with Capabilities.PreallocatedIDs lets the
// caller pick the ID first (NextID, then Clone with CloneSpec.Target.ID); any other provider
// assigns it while cloning, and Clone returns it.
type Provider interface {
	// Capabilities says which optional behaviours the provider has. It does not change over the
	// provider's life and costs no call to the hypervisor.
	Capabilities() Capabilities
	// Verify checks that the endpoint is reachable, the credentials are accepted and they carry the
	// privileges HyperFleet needs. It returns the hypervisor's version.
	Verify(ctx context.Context) (version string, err error)
	// Nodes lists the cluster's hosts with their capacity.
	Nodes(ctx context.Context) ([]Node, error)
	// ResolveTemplate finds exactly one template matching the selector.
	ResolveTemplate(ctx context.Context, sel TemplateSelector) (Template, error)
	// ResolveTemplates finds the templates matching the selector, at most one per node and sorted by
	// node: copies of one template kept on several nodes so linked clones can be made on each. It
	// fails with ErrNotFound when none matches and ErrAmbiguous when two match on one node.
	ResolveTemplates(ctx context.Context, sel TemplateSelector) ([]Template, error)
	// NextID proposes a free numeric VM ID at or above min, for a provider with
	// Capabilities.PreallocatedIDs; the caller puts it in decimal in CloneSpec.Target.ID. The
	// proposal is not a reservation: Clone fails with ErrAlreadyExists if another client took it
	// first. Other providers return ErrUnsupported.
	NextID(ctx context.Context, min int) (int, error)

	// Clone creates a VM from a template, stamped with spec.Owner, and returns the new VM's ref.
	// With PreallocatedIDs that is spec.Target and the TaskID tracks the copy; without, the ref
	// carries the ID the hypervisor assigned. A provider with AsyncTasks may return the ref before
	// the VM is usable: poll the TaskID before configuring it. A failed Clone may still have
	// created the VM; it carries spec.Owner, so OwnedVMs finds it.
	Clone(ctx context.Context, spec CloneSpec) (VMRef, TaskID, error)
	// Configure applies hardware, network, tags, description and cloud-init data to an owned VM and
	// grows its disk. It returns a TaskID when part of the work (a disk resize) is still running;
	// the VM must not be started before that task is done.
	Configure(ctx context.Context, ref VMRef, spec ConfigSpec) (TaskID, error)
	// Start powers an owned VM on.
	Start(ctx context.Context, ref VMRef) (TaskID, error)
	// Stop powers an owned VM off immediately.
	Stop(ctx context.Context, ref VMRef) (TaskID, error)
	// Shutdown asks an owned VM's guest to power off.
	Shutdown(ctx context.Context, ref VMRef) (TaskID, error)
	// EjectCloudInit removes an owned VM's cloud-init seed once it is spent (its join token
	// redeemed or expired): the ISO is ejected from the VM's CD-ROM and deleted from storage. The
	// VM keeps running. A VM without a seed is left as it is.
	EjectCloudInit(ctx context.Context, ref VMRef) error
	// Delete destroys a stopped, owned VM with its disks and cloud-init image. Stop it first:
	// deleting a running VM fails with ErrBusy.
	Delete(ctx context.Context, ref VMRef) (TaskID, error)
	// StopSeen and DeleteSeen are Stop and Delete for a VM that the caller has just read with VM
	// in the same operation: that read proved the VM ours and showed its power state, so they do
	// not read it again. A VM from OwnedVMs (a listing shared between VMs) or from an earlier
	// operation is no such proof; pass its VMRef to Stop or Delete instead. A VM whose Owner is
	// nil or Legacy gets ErrNotOwned.
	StopSeen(ctx context.Context, vm VM) (TaskID, error)
	DeleteSeen(ctx context.Context, vm VM) (TaskID, error)

	// VM returns a VM's current state; ErrNotFound when it does not exist.
	VM(ctx context.Context, ref VMRef) (VM, error)
	// Addresses returns the addresses the guest reports; empty until the guest agent answers.
	Addresses(ctx context.Context, ref VMRef) ([]Address, error)
	// OwnedVMs lists every VM owned by this HypervisorCluster in one call, and the VMs marked by
	// an older release for a HypervisorCluster of the same namespace/name (Owner.Legacy): those
	// may be another installation's and must only be adopted, never swept.
	OwnedVMs(ctx context.Context) ([]VM, error)
	// Adopt re-marks a Legacy VM with owner once it proves to be the VM of the claim whose
	// metadata.uid is legacyClaimUID. A VM already marked for owner is left as it is; any other
	// VM gets ErrNotOwned.
	Adopt(ctx context.Context, ref VMRef, owner Ownership, legacyClaimUID string) error
	// TaskStatus polls a task started by this or an earlier process. The empty TaskID is always
	// done; a provider without AsyncTasks reports every task done.
	TaskStatus(ctx context.Context, node string, id TaskID) (TaskState, error)
}

// Unwrapper is a provider that wraps another (the instrumentation does): Unwrap returns the
// provider it wraps.
type Unwrapper interface {
	Unwrap() Provider
}

// As returns p as the optional interface T (Snapshotter, Migrator, ...) when the provider behind
// any wrappers implements it. A wrapper offers every optional interface, so that callers keep one
// value and every call is instrumented; only the provider it wraps says which it really has, and
// asserting the wrapper itself would always say yes.
func As[T any](p Provider) (T, bool) {
	var zero T
	inner := p
	for {
		u, ok := inner.(Unwrapper)
		if !ok {
			break
		}
		inner = u.Unwrap()
	}
	if _, ok := inner.(T); !ok {
		return zero, false
	}
	t, ok := p.(T)
	return t, ok
}
