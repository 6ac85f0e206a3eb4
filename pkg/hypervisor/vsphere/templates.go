package vsphere

import (
	"context"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// ResolveTemplates implements hypervisor.Provider. A vSphere template lives on a datastore the
// compute cluster's hosts share, so the one template that matches is returned once per host
// (sel.Node: that host only), each a Template whose Ref.Node is the host a clone of it may go to.
// Two templates that match are ErrAmbiguous.
func (p *Provider) ResolveTemplates(ctx context.Context, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	var out []hypervisor.Template
	err := p.do(ctx, "ResolveTemplates", func(ctx context.Context, cn *conn) error {
		t, err := p.resolve(ctx, cn, sel)
		if err != nil {
			return err
		}
		var cluster mo.ClusterComputeResource
		if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
			return err
		}
		names, err := hostNames(ctx, cn, cluster.Host...)
		if err != nil {
			return err
		}
		for _, h := range cluster.Host {
			if sel.Node != "" && names[h] != sel.Node {
				continue
			}
			c := t
			c.Ref.Node = names[h]
			out = append(out, c)
		}
		if len(out) == 0 {
			return refused(hypervisor.ErrNotFound, "ResolveTemplates", "template %s: no host %q in the compute cluster", sel, sel.Node)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Ref.Node < out[j].Ref.Node })
		return nil
	})
	return out, err
}

// ResolveTemplate implements hypervisor.Provider.
func (p *Provider) ResolveTemplate(ctx context.Context, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	all, err := p.ResolveTemplates(ctx, sel)
	if err != nil {
		return hypervisor.Template{}, err
	}
	return all[0], nil
}

// resolve finds the one template of the datacenter sel names: by instance UUID, or by name and
// the tags of its hyperfleet.tags setting.
func (p *Provider) resolve(ctx context.Context, cn *conn, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	vms, err := listVMs(ctx, cn)
	if err != nil {
		return hypervisor.Template{}, err
	}
	var candidates []mo.VirtualMachine
	for _, vm := range vms {
		if vm.Config == nil || !vm.Config.Template {
			continue
		}
		switch {
		case sel.ID != "":
			if !equalFold(vm.Config.InstanceUuid, sel.ID) {
				continue
			}
		case sel.Name != "" && vm.Name != sel.Name:
			continue
		}
		candidates = append(candidates, vm)
	}
	// vSphere's own tags are read only when the selector names tags: one vAPI call for every
	// candidate at once.
	vsphereTags := map[types.ManagedObjectReference][]string{}
	if len(sel.Tags) > 0 && len(candidates) > 0 {
		var err error
		if vsphereTags, err = p.attachedTags(ctx, cn, candidates); err != nil {
			return hypervisor.Template{}, err
		}
	}
	var found []mo.VirtualMachine
	for _, vm := range candidates {
		tags := append(splitTags(marksOf(vm)[keyTags]), vsphereTags[vm.Reference()]...)
		if containsAll(tags, sel.Tags) {
			found = append(found, vm)
		}
	}
	switch len(found) {
	case 0:
		return hypervisor.Template{}, refused(hypervisor.ErrNotFound, "ResolveTemplate", "no vSphere template with %s", sel)
	case 1:
	default:
		return hypervisor.Template{}, refused(hypervisor.ErrAmbiguous, "ResolveTemplate", "%d vSphere templates match %s", len(found), sel)
	}
	vm := found[0]
	var devices mo.VirtualMachine
	if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, vm.Reference(), []string{"config.hardware.device", "config.changeVersion"}, &devices); err != nil {
		return hypervisor.Template{}, err
	}
	t := hypervisor.Template{Ref: hypervisor.VMRef{ID: lower(vm.Config.InstanceUuid)}, Name: vm.Name,
		Tags: append(splitTags(marksOf(vm)[keyTags]), vsphereTags[vm.Reference()]...), Cores: int(vm.Config.Hardware.NumCPU), MemoryMiB: int(vm.Config.Hardware.MemoryMB)}
	if d := bootDisk(devices); d != nil {
		t.BootDisk = d.DeviceInfo.GetDescription().Label
		t.DiskGiB = int(d.CapacityInKB >> 20)
	}
	if devices.Config != nil && devices.Config.ChangeVersion != "" {
		t.Digest = "changeVersion:" + devices.Config.ChangeVersion
	}
	return t, nil
}

// attachedTags reads the vSphere tags attached to vms through the vAPI: each tag by its name, and
// by category:name.
func (p *Provider) attachedTags(ctx context.Context, cn *conn, vms []mo.VirtualMachine) (map[types.ManagedObjectReference][]string, error) {
	rc, err := p.restClient(ctx, cn)
	if err != nil {
		return nil, err
	}
	m := tags.NewManager(rc)
	refs := make([]mo.Reference, 0, len(vms))
	for _, vm := range vms {
		refs = append(refs, vm.Reference())
	}
	attached, err := m.GetAttachedTagsOnObjects(ctx, refs)
	if err != nil {
		// The vAPI session may have ended on its own: the next read logs in again.
		cn.mu.Lock()
		cn.rest = nil
		cn.mu.Unlock()
		return nil, refused(hypervisor.ErrTransient, "ResolveTemplates", "reading vSphere tags: %v", err)
	}
	categories := map[string]string{}
	out := map[types.ManagedObjectReference][]string{}
	for _, a := range attached {
		for _, t := range a.Tags {
			name, ok := categories[t.CategoryID]
			if !ok {
				if c, err := m.GetCategory(ctx, t.CategoryID); err == nil {
					name = c.Name
				}
				categories[t.CategoryID] = name
			}
			ref := a.ObjectID.Reference()
			out[ref] = append(out[ref], t.Name)
			if name != "" {
				out[ref] = append(out[ref], name+":"+t.Name)
			}
		}
	}
	return out, nil
}

// restClient is the session's vAPI client, logged in with the provider's credentials on first use.
func (p *Provider) restClient(ctx context.Context, cn *conn) (*rest.Client, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.rest != nil {
		return cn.rest, nil
	}
	rc := rest.NewClient(cn.c)
	if err := rc.Login(ctx, url.UserPassword(p.cfg.Username, p.cfg.Password)); err != nil {
		return nil, classify("vAPI login", err)
	}
	cn.rest = rc
	return rc, nil
}

// NextID implements hypervisor.Provider: vSphere VMs are known by the instance UUID the provider
// chooses at each clone, not by a number the caller picks.
func (p *Provider) NextID(context.Context, int) (int, error) {
	return 0, refused(hypervisor.ErrUnsupported, "NextID", "vSphere has no numeric VM IDs")
}

// bootDisk is the VM's first virtual disk, nil when it has none.
func bootDisk(vm mo.VirtualMachine) *types.VirtualDisk {
	if vm.Config == nil {
		return nil
	}
	for _, d := range vm.Config.Hardware.Device {
		if disk, ok := d.(*types.VirtualDisk); ok {
			return disk
		}
	}
	return nil
}

func equalFold(a, b string) bool { return strings.EqualFold(a, b) }

func lower(s string) string { return strings.ToLower(s) }

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
