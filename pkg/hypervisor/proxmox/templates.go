package proxmox

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// ResolveTemplate finds exactly one template by VMID, or by name and tags: one resource listing,
// then one config read for the boot disk.
func (p *Provider) ResolveTemplate(ctx context.Context, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	op := "resolve template " + sel.String()
	matches, err := p.matchTemplates(ctx, op, sel)
	if err != nil {
		return hypervisor.Template{}, err
	}
	if len(matches) > 1 {
		return hypervisor.Template{}, hypervisor.Errorf(hypervisor.ErrAmbiguous, op, "%d templates match: %s", len(matches), refList(matches))
	}
	return p.template(ctx, op, matches[0])
}

// ResolveTemplates finds the templates a selector matches, at most one per node, sorted by node:
// copies of one template kept on several nodes so that linked clones can be made on each. Two
// matches on the same node are ambiguous. It costs one resource listing and one config read per
// match.
func (p *Provider) ResolveTemplates(ctx context.Context, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	op := "resolve templates " + sel.String()
	matches, err := p.matchTemplates(ctx, op, sel)
	if err != nil {
		return nil, err
	}
	sort.Slice(matches, func(i, j int) bool {
		if matches[i].Node != matches[j].Node {
			return matches[i].Node < matches[j].Node
		}
		return matches[i].VMID < matches[j].VMID
	})
	for i := 1; i < len(matches); i++ {
		if node := matches[i].Node; node == matches[i-1].Node {
			same := slices.DeleteFunc(slices.Clone(matches), func(r vmResource) bool { return r.Node != node })
			return nil, hypervisor.Errorf(hypervisor.ErrAmbiguous, op, "%d templates match on node %s: %s; keep one copy per node or select by vmid", len(same), node, refList(same))
		}
	}
	templates := make([]hypervisor.Template, 0, len(matches))
	for _, m := range matches {
		t, err := p.template(ctx, op, m)
		if err != nil {
			return nil, err
		}
		templates = append(templates, t)
	}
	return templates, nil
}

// matchTemplates lists the templates a selector matches with one resource listing; ErrNotFound
// when there are none.
func (p *Provider) matchTemplates(ctx context.Context, op string, sel hypervisor.TemplateSelector) ([]vmResource, error) {
	rows, err := p.listVMs(ctx, op)
	if err != nil {
		return nil, err
	}
	var matches []vmResource
	for _, r := range rows {
		if (r.Type != "" && r.Type != "qemu") || (sel.Node != "" && r.Node != sel.Node) {
			continue
		}
		if sel.ID != "" {
			if strconv.Itoa(int(r.VMID)) == sel.ID {
				if r.Template == 0 {
					return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "VM %s exists but is not a template", sel.ID)
				}
				matches = append(matches, r)
			}
			continue
		}
		if r.Template == 0 || (sel.Name != "" && r.Name != sel.Name) {
			continue
		}
		tags := splitTags(r.Tags)
		if slices.ContainsFunc(sel.Tags, func(t string) bool { return !slices.Contains(tags, sanitizeTag(t)) }) {
			continue
		}
		matches = append(matches, r)
	}
	if len(matches) == 0 {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "no template matches")
	}
	return matches, nil
}

// template completes a listed template with its configuration: exact cores and memory, and the
// boot disk with its size.
func (p *Provider) template(ctx context.Context, op string, m vmResource) (hypervisor.Template, error) {
	t := hypervisor.Template{Ref: vmRef(m.Node, int(m.VMID)), Name: m.Name, Tags: splitTags(m.Tags),
		Cores: int(m.MaxCPU), MemoryMiB: int(m.MaxMem / (1 << 20)), DiskGiB: int(m.MaxDisk / (1 << 30))}
	cfg, err := p.config(ctx, op, t.Ref)
	if err != nil {
		return hypervisor.Template{}, err
	}
	if c, err := strconv.Atoi(cfg["cores"]); err == nil {
		t.Cores = c * max(1, atoiOr(cfg["sockets"], 1))
	}
	if mem, err := strconv.Atoi(cfg["memory"]); err == nil {
		t.MemoryMiB = mem
	}
	t.BootDisk = bootDisk(cfg)
	if d := cfg["digest"]; d != "" {
		t.Digest = "sha1:" + d
	}
	if size, ok := driveSizeGiB(cfg[t.BootDisk]); ok {
		t.DiskGiB = size
	}
	return t, nil
}

func refList(rows []vmResource) string {
	refs := make([]string, 0, len(rows))
	for _, r := range rows {
		refs = append(refs, fmt.Sprintf("%s/%d", r.Node, int(r.VMID)))
	}
	return strings.Join(refs, ", ")
}
