package console

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// CreatedByLabel marks the objects the console created for a person.
const CreatedByLabel = "app.kubernetes.io/created-by"

// VM is one VM of the inventory.
type VM struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	Host      string `json:"host,omitempty"`
	ID        string `json:"id,omitempty"`
	Template  string `json:"template,omitempty"`
	Pool      string `json:"pool,omitempty"`
	// PoolKind is the kind of Pool: RunnerPool (a runner) or VMPool.
	PoolKind   string    `json:"poolKind,omitempty"`
	Phase      string    `json:"phase,omitempty"`
	PowerState string    `json:"powerState"`
	Addresses  []string  `json:"addresses,omitempty"`
	CPUs       int32     `json:"cpus,omitempty"`
	MemoryMiB  int32     `json:"memoryMiB,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	Deleting   bool      `json:"deleting,omitempty"`
	Created    time.Time `json:"created"`
	// Machine names the Cluster API Machine owning the VM (a pool's runner); such VMs are
	// replaced by their pool, not deleted here.
	Machine string `json:"machine,omitempty"`
	// Job is the VM's current job, if one runs.
	Job string `json:"job,omitempty"`
	// Persistent is a long-lived VM (spec.lifecycle Persistent) with power control.
	Persistent bool `json:"persistent,omitempty"`
	// RunStrategy is a persistent VM's run strategy.
	RunStrategy string `json:"runStrategy,omitempty"`
	// DiskGiB, Bridge and VLAN are what the VM was asked for, when set.
	DiskGiB int32  `json:"diskGiB,omitempty"`
	Bridge  string `json:"bridge,omitempty"`
	VLAN    int32  `json:"vlan,omitempty"`
	// Foreign is a VM on the hypervisor that HyperFleet did not create (or another installation
	// did): shown, never changed. Its namespace is its HypervisorCluster's.
	Foreign bool `json:"foreign,omitempty"`
}

// VMFilter narrows a VM listing.
type VMFilter struct {
	Cluster, Host, Namespace, Pool, State string
	// PoolKind narrows Pool to one kind of pool, RunnerPool or VMPool: the two may share a name.
	PoolKind string
}

// vmFilterOf reads a filter from query parameters; a poolKind that names no kind is an error.
func vmFilterOf(q url.Values) (VMFilter, error) {
	kind, err := parsePoolKind(q.Get("poolKind"), "")
	return VMFilter{Cluster: q.Get("cluster"), Host: q.Get("host"), Namespace: q.Get("namespace"), Pool: q.Get("pool"),
		PoolKind: kind, State: q.Get("state")}, err
}

func (f VMFilter) matches(v VM) bool {
	return (f.Cluster == "" || f.Cluster == v.Cluster) && (f.Host == "" || f.Host == v.Host) &&
		(f.Namespace == "" || f.Namespace == v.Namespace) && (f.Pool == "" || f.Pool == v.Pool) &&
		(f.PoolKind == "" || f.PoolKind == v.PoolKind) &&
		(f.State == "" || strings.EqualFold(f.State, v.PowerState) || strings.EqualFold(f.State, v.Phase))
}

// listVMs is the VMs c may see, joined with the inventory's live power states.
func (s *Server) listVMs(ctx context.Context, c client.Client, f VMFilter) ([]VM, error) {
	var vms []VM
	err := listVisible(ctx, c, s.inventory.Namespaces(), f.Namespace, func() *infrav1.MachineClaimList { return &infrav1.MachineClaimList{} },
		func(l *infrav1.MachineClaimList) {
			for i := range l.Items {
				if v := s.vmOf(&l.Items[i]); f.matches(v) {
					vms = append(vms, v)
				}
			}
		})
	if err != nil {
		return nil, err
	}
	// Foreign VMs of the clusters the person may read.
	err = listVisible(ctx, c, s.inventory.Namespaces(), f.Namespace, func() *infrav1.HypervisorClusterList { return &infrav1.HypervisorClusterList{} },
		func(l *infrav1.HypervisorClusterList) {
			for i := range l.Items {
				ci, ok := s.inventory.Cluster(l.Items[i].Namespace, l.Items[i].Name)
				if !ok {
					continue
				}
				for _, vm := range ci.Foreign {
					if v := foreignVM(&l.Items[i], vm); f.matches(v) {
						vms = append(vms, v)
					}
				}
			}
		})
	sort.SliceStable(vms, func(i, j int) bool {
		a, b := vms[i], vms[j]
		if a.Foreign != b.Foreign {
			return !a.Foreign
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return vms, err
}

// foreignVM describes a VM HyperFleet does not own.
func foreignVM(hc *infrav1.HypervisorCluster, vm hypervisor.VM) VM {
	name := vm.Name
	if name == "" {
		name = "vm-" + vmID(vm)
	}
	return VM{Namespace: hc.Namespace, Name: name, Cluster: hc.Name, Host: vmHost(vm), ID: vmID(vm),
		PowerState: string(vm.State), CPUs: int32(vm.Cores), MemoryMiB: int32(vm.MemoryMiB), Foreign: true}
}

// vmOf describes a claim's VM, with the power state the hypervisor last reported.
func (s *Server) vmOf(c *infrav1.MachineClaim) VM {
	v := VM{Namespace: c.Namespace, Name: c.Name, Cluster: claimCluster(c), Host: claimHost(c), ID: claimVMID(c),
		Template: claimTemplate(c), Phase: string(c.Status.Phase),
		PowerState: c.Status.PowerState, CPUs: c.Spec.Cores, MemoryMiB: c.Spec.MemoryMiB,
		Deleting: !c.DeletionTimestamp.IsZero(), Created: c.CreationTimestamp.Time,
		Persistent: c.Spec.Lifecycle == infrav1.LifecyclePersistent, RunStrategy: string(c.Spec.RunStrategy), DiskGiB: c.Spec.DiskSizeGiB}
	if n := c.Spec.Network; n != nil {
		v.Bridge = n.Name
		if n.VLAN != nil {
			v.VLAN = *n.VLAN
		}
	}
	switch {
	case c.Labels[fleetv1.RunnerPoolNameLabel] != "":
		v.Pool, v.PoolKind = c.Labels[fleetv1.RunnerPoolNameLabel], KindRunnerPool
	case c.Labels[fleetv1.VMPoolNameLabel] != "":
		v.Pool, v.PoolKind = c.Labels[fleetv1.VMPoolNameLabel], KindVMPool
	}
	for _, a := range c.Status.Addresses {
		v.Addresses = append(v.Addresses, a.Address)
	}
	if ready := conditions.Get(c, infrav1.ReadyCondition); ready != nil {
		v.Reason, v.Message = ready.Reason, ready.Message
	}
	for _, o := range c.OwnerReferences {
		if o.Kind == "Machine" {
			v.Machine = o.Name
		}
	}
	if ci, ok := s.inventory.Cluster(c.Namespace, v.Cluster); ok && v.ID != "" {
		if vm, ok := ci.VMs[v.Host+"/"+v.ID]; ok {
			v.PowerState = string(vm.State)
		}
	}
	if v.PowerState == "" {
		v.PowerState = "Unknown"
	}
	switch {
	case v.Deleting:
		v.Job = jobID(opDelete, c.Namespace, c.Name)
	case c.Status.Phase != infrav1.MachineClaimPhaseReady && c.Status.Phase != infrav1.MachineClaimPhaseFailed:
		v.Job = jobID(opCreate, c.Namespace, c.Name)
	}
	return v
}

// claimCluster is the HypervisorCluster of a claim: its label, set by HyperFleet, else its spec.
func claimCluster(c *infrav1.MachineClaim) string {
	if n := c.Labels[infrav1.HypervisorClusterNameLabel]; n != "" {
		return n
	}
	return c.Spec.HypervisorClusterName
}

// CreateVMRequest asks for one VM.
type CreateVMRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	// Host pins the VM to a host; empty lets HyperFleet choose.
	Host string `json:"host,omitempty"`
	// Template is a template name or ID (a Proxmox VMID, a Hyper-V GUID).
	Template  string `json:"template"`
	CPUs      int32  `json:"cpus,omitempty"`
	MemoryMiB int32  `json:"memoryMiB,omitempty"`
	DiskGiB   int32  `json:"diskGiB,omitempty"`
	Bridge    string `json:"bridge,omitempty"`
	VLAN      int32  `json:"vlan,omitempty"`
	// UserData is #cloud-config YAML; empty gives the VM just its hostname.
	UserData string `json:"userData,omitempty"`
	// RunStrategy, when set, makes the VM long-lived (spec.lifecycle Persistent) with that run
	// strategy: Always, RerunOnFailure, Halted, Manual or Once; its power is then controlled with
	// power-on and power-off. Empty makes a VM that is removed once it powers off.
	RunStrategy string `json:"runStrategy,omitempty"`
}

var (
	bridgePattern   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.\-]{0,14}$`)
	hostPattern     = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`)
	templatePattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,126}[a-zA-Z0-9])?$`)
)

// Validate checks a request the way the API server would, naming each bad field, so a person
// learns every mistake at once.
func (req CreateVMRequest) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	for field, v := range map[string]string{"namespace": req.Namespace, "cluster": req.Cluster} {
		if v == "" {
			add(field, "is required")
		} else if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 && field == "namespace" {
			add(field, "%s", strings.Join(msgs, "; "))
		} else if msgs := validation.IsDNS1123Subdomain(v); len(msgs) > 0 {
			add(field, "%s", strings.Join(msgs, "; "))
		}
	}
	switch {
	case req.Name == "":
		add("name", "is required")
	case len(validation.IsDNS1123Label(req.Name)) > 0:
		add("name", "must be lower-case letters, digits and '-', start and end with a letter or digit, at most 63 characters")
	}
	if req.Host != "" && !hostPattern.MatchString(req.Host) {
		add("host", "must be a host name such as pve1")
	}
	switch {
	case req.Template == "":
		add("template", "is required: a template name or its ID")
	case !templatePattern.MatchString(req.Template):
		add("template", "must be a template name or ID")
	}
	if req.CPUs != 0 && (req.CPUs < 1 || req.CPUs > 512) {
		add("cpus", "must be between 1 and 512")
	}
	if req.MemoryMiB != 0 && (req.MemoryMiB < 256 || req.MemoryMiB > 4194304) {
		add("memoryMiB", "must be between 256 and 4194304 MiB")
	}
	if req.DiskGiB != 0 && (req.DiskGiB < 1 || req.DiskGiB > 65536) {
		add("diskGiB", "must be between 1 and 65536 GiB")
	}
	if req.Bridge != "" && !bridgePattern.MatchString(req.Bridge) {
		add("bridge", "must be a bridge name such as vmbr0")
	}
	if req.VLAN != 0 && (req.VLAN < 1 || req.VLAN > 4094) {
		add("vlan", "must be between 1 and 4094")
	}
	switch infrav1.RunStrategy(req.RunStrategy) {
	case "", infrav1.RunStrategyAlways, infrav1.RunStrategyRerunOnFailure, infrav1.RunStrategyHalted, infrav1.RunStrategyManual, infrav1.RunStrategyOnce:
	default:
		add("runStrategy", "must be Always, RerunOnFailure, Halted, Manual or Once")
	}
	if len(req.UserData) > 65536 {
		add("userData", "must be at most 64 KiB")
	} else if req.UserData != "" && !strings.HasPrefix(strings.TrimSpace(req.UserData), "#cloud-config") {
		add("userData", "must be cloud-config YAML starting with #cloud-config")
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

// userDataSecretName names the Secret holding a console-made VM's user-data.
func userDataSecretName(vm string) string { return vm + "-user-data" }

// createVM creates the MachineClaim and its user-data Secret as the caller.
func createVM(ctx context.Context, c client.Client, req CreateVMRequest) (*infrav1.MachineClaim, error) {
	claim := &infrav1.MachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace, Labels: map[string]string{CreatedByLabel: "hyperfleet-console"}},
		Spec: infrav1.MachineClaimSpec{
			HypervisorClusterName: req.Cluster, FailureDomain: req.Host, Template: templateSource(req.Template),
			Cores: req.CPUs, MemoryMiB: req.MemoryMiB, DiskSizeGiB: req.DiskGiB,
			Bootstrap: &infrav1.BootstrapSpec{DataSecretName: ptr.To(userDataSecretName(req.Name))},
		},
	}
	if req.RunStrategy != "" {
		claim.Spec.Lifecycle, claim.Spec.RunStrategy = infrav1.LifecyclePersistent, infrav1.RunStrategy(req.RunStrategy)
	}
	if req.Bridge != "" || req.VLAN != 0 {
		claim.Spec.Network = &infrav1.NetworkSpec{Name: req.Bridge}
		if req.VLAN != 0 {
			claim.Spec.Network.VLAN = ptr.To(req.VLAN)
		}
	}
	if err := c.Create(ctx, claim); err != nil {
		return nil, err
	}
	userData := req.UserData
	if userData == "" {
		userData = fmt.Sprintf("#cloud-config\nhostname: %s\n", req.Name)
	}
	// The claim owns its user-data, so deleting the VM removes it too.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: userDataSecretName(req.Name), Namespace: req.Namespace,
			Labels: map[string]string{CreatedByLabel: "hyperfleet-console"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "MachineClaim",
				Name: claim.Name, UID: claim.UID}}},
		StringData: map[string]string{"value": userData},
	}
	err := c.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		// Left by an earlier VM of the same name, whose claim is gone but whose Secret the
		// garbage collector has not removed yet: the console's own Secret of a claim that no
		// longer exists is taken over. Any other Secret of that name is not the console's to
		// overwrite.
		err = adoptUserData(ctx, c, secret)
	}
	if err != nil {
		_ = c.Delete(ctx, claim)
		return nil, err
	}
	return claim, nil
}

// adoptUserData takes over a stale user-data Secret: one the console made (CreatedByLabel) for a
// claim of this name that no longer exists.
func adoptUserData(ctx context.Context, c client.Client, want *corev1.Secret) error {
	old := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), old); err != nil {
		return err
	}
	stale := old.Labels[CreatedByLabel] == "hyperfleet-console"
	for _, ref := range old.OwnerReferences {
		if ref.Kind == "MachineClaim" && ref.UID == want.OwnerReferences[0].UID {
			stale = false // this very claim's: nothing to take over
		}
	}
	if !stale {
		return apierrors.NewAlreadyExists(corev1.Resource("secrets"), want.Name)
	}
	old.OwnerReferences, old.Data, old.StringData = want.OwnerReferences, nil, want.StringData
	return c.Update(ctx, old)
}
