package hyperv

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Provider is a hypervisor.Provider for a set of Hyper-V hosts (standalone hosts or a failover
// cluster's nodes), each reached over its own WinRM listener. Operations are synchronous: every
// call returns once the host has done the work, with an empty TaskID. It is safe for concurrent use.
type Provider struct {
	cfg      Config
	ownerTag string
	hosts    map[string]*host
	names    []string
}

var _ hypervisor.Provider = (*Provider)(nil)

// New builds a Provider reaching each host with newShell (WinRMShell when nil). It does not
// contact the hosts; call Verify for that.
func New(cfg Config, newShell func(Host, Config) (Shell, error)) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("hyperv config: %w", err)
	}
	if newShell == nil {
		newShell = WinRMShell
	}
	p := &Provider{cfg: cfg, ownerTag: OwnerTag(cfg.InstallationID, cfg.Cluster), hosts: map[string]*host{}}
	for _, hc := range cfg.Hosts {
		sh, err := newShell(hc, cfg)
		if err != nil {
			return nil, fmt.Errorf("hyperv host %s: %w", hc.Name, err)
		}
		p.hosts[hc.Name] = &host{name: hc.Name, shell: sh, p: p}
		p.names = append(p.names, hc.Name)
	}
	sort.Strings(p.names)
	return p, nil
}

// Capabilities: differencing disks are linked clones; Hyper-V assigns the VM ID (a GUID) when it
// creates the VM; every VM operation is synchronous (a checkpoint's merge is followed as a task);
// ownership lives in the VM's Notes; Configure adds extra disks (dynamic VHDX files on SCSI) and
// gives the VM its network adapters; a full copy and extra disks go to a directory storage's
// folder when they name one. PCI devices are not passed through.
func (p *Provider) Capabilities() hypervisor.Capabilities {
	return hypervisor.Capabilities{LinkedClones: true, PreallocatedIDs: false, AsyncTasks: false, Tags: false,
		ExtraDisks: true, NICs: true, Storages: true}
}

var guidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// hostOf returns the host of a VM reference, refusing a reference that is not a known host and a
// VM GUID.
func (p *Provider) hostOf(op string, ref hypervisor.VMRef) (*host, error) {
	if !guidRe.MatchString(ref.ID) {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM reference %q: the ID is not a Hyper-V VM GUID", ref)
	}
	h := p.hosts[ref.Node]
	if h == nil {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "host %q is not one of this cluster's hosts %v", ref.Node, p.names)
	}
	return h, nil
}

func opName(verb string, ref hypervisor.VMRef) string { return verb + " VM " + ref.String() }

// eachHost runs fn on every host (or the one named) at once and returns the results in host order.
func eachHost[T any](p *Provider, only string, fn func(*host) (T, error)) ([]T, []error) {
	names := p.names
	if only != "" {
		names = []string{only}
	}
	out := make([]T, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := p.hosts[n]
			if h == nil {
				errs[i] = hypervisor.Errorf(hypervisor.ErrNotFound, "hyperv", "host %q is not one of this cluster's hosts %v", n, p.names)
				return
			}
			out[i], errs[i] = fn(h)
		}()
	}
	wg.Wait()
	return out, errs
}

// Verify checks every host: reachable, credentials accepted, module deployed and answering. Bad
// credentials or missing rights on any host fail it; it succeeds when at least one host answers,
// so one host down (in maintenance) leaves the cluster usable, and Nodes shows that host offline.
func (p *Provider) Verify(ctx context.Context) (string, error) {
	invs, errs := eachHost(p, "", func(h *host) (wireInventory, error) { return h.inventory(ctx, "verify") })
	var version string
	var firstErr error
	up := 0
	for i, err := range errs {
		if err != nil {
			if hypervisor.Reason(err) == "Unauthorized" || hypervisor.Reason(err) == "Forbidden" {
				return "", err
			}
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		up++
		if version == "" {
			version = invs[i].Host.Version
		}
	}
	if up == 0 {
		return "", firstErr
	}
	return fmt.Sprintf("Hyper-V on Windows %s (%d of %d hosts answering)", version, up, len(p.names)), nil
}

func (h *host) inventory(ctx context.Context, op string) (wireInventory, error) {
	var inv wireInventory
	err := h.call(ctx, op, fnInventory, struct{}{}, &inv)
	return inv, err
}

// Nodes lists the hosts with their capacity; a host that does not answer is listed offline.
func (p *Provider) Nodes(ctx context.Context) ([]hypervisor.Node, error) {
	invs, errs := eachHost(p, "", func(h *host) (wireInventory, error) { return h.inventory(ctx, "list nodes") })
	nodes := make([]hypervisor.Node, len(p.names))
	for i, n := range p.names {
		nodes[i] = hypervisor.Node{Name: n}
		if errs[i] != nil {
			continue
		}
		hw := invs[i].Host
		nodes[i] = hypervisor.Node{Name: n, Online: true, CPUs: hw.LogicalProcessors,
			MemoryTotal: uint64(max(hw.MemoryBytes, 0)), MemoryFree: uint64(max(hw.FreeMemoryBytes, 0))}
	}
	return nodes, nil
}

// NextID is not offered: Hyper-V assigns a VM's ID when it creates the VM (PreallocatedIDs false).
func (p *Provider) NextID(context.Context, int) (int, error) {
	return 0, hypervisor.Errorf(hypervisor.ErrUnsupported, "next VM ID", "Hyper-V assigns VM IDs itself; find a VM again by its name and ownership")
}

// lowerGUID normalises a VM ID: Hyper-V prints GUIDs in lower case, users may not.
func lowerGUID(id string) string { return strings.ToLower(id) }
