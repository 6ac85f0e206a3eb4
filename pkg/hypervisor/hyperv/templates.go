package hyperv

import (
	"context"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Templates. A template is a VM whose Notes carry a ```hyperfleet-template block naming it (its
// first disk is the parent of the clones' differencing disks), or a VHDX file named <name>.vhdx in
// the template folder. Either way the parent disk is never written: Hyper-V needs it unchanged
// for its children, and HyperFleet never deletes a disk that is not a differencing disk.

// ResolveTemplate finds exactly one template matching the selector.
func (p *Provider) ResolveTemplate(ctx context.Context, sel hypervisor.TemplateSelector) (hypervisor.Template, error) {
	ts, err := p.ResolveTemplates(ctx, sel)
	if err != nil {
		return hypervisor.Template{}, err
	}
	// Copies of one template on several hosts: the first host's, as ResolveTemplates orders them.
	return ts[0], nil
}

// ResolveTemplates finds the templates matching the selector, at most one per host, in host
// order. A selector names a template (Name) and may require tags from its template block; an ID
// selects a template VM by GUID or a template VHDX by path.
func (p *Provider) ResolveTemplates(ctx context.Context, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	op := "resolve template " + sel.String()
	if sel.Name == "" && sel.ID == "" {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "a Hyper-V template is selected by name or ID")
	}
	if sel.Node != "" && p.hosts[sel.Node] == nil {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "host %q is not one of this cluster's hosts %v", sel.Node, p.names)
	}
	name := sel.Name
	if name == "" && !guidRe.MatchString(sel.ID) {
		// A VHDX path: its file name is the template's name.
		name = strings.TrimSuffix(sel.ID[strings.LastIndex(sel.ID, `\`)+1:], ".vhdx")
	}
	if name == "" {
		name = "*"
	}
	found, errs := eachHost(p, sel.Node, func(h *host) ([]wireTemplate, error) {
		var out wireTemplates
		err := h.call(ctx, op, fnFindTemplate, struct{ Name, TemplateDirectory string }{name, p.cfg.TemplateDirectory}, &out)
		return out.Templates, err
	})
	names := p.names
	if sel.Node != "" {
		names = []string{sel.Node}
	}
	var out []hypervisor.Template
	for i, n := range names {
		if errs[i] != nil {
			return nil, errs[i]
		}
		var match []wireTemplate
		for _, t := range found[i] {
			if templateMatches(t, sel) {
				match = append(match, t)
			}
		}
		switch len(match) {
		case 0:
		case 1:
			out = append(out, toTemplate(n, match[0]))
		default:
			return nil, hypervisor.Errorf(hypervisor.ErrAmbiguous, op, "%d templates match on host %s", len(match), n)
		}
	}
	if len(out) == 0 {
		return nil, hypervisor.Errorf(hypervisor.ErrNotFound, op, "no template matches on hosts %v", names)
	}
	return out, nil
}

func templateMatches(t wireTemplate, sel hypervisor.TemplateSelector) bool {
	if sel.ID != "" && !strings.EqualFold(t.ID, sel.ID) && !strings.EqualFold(t.VHDPath, sel.ID) {
		return false
	}
	have := map[string]bool{}
	for _, tag := range strings.Split(t.Tags, ",") {
		have[strings.TrimSpace(tag)] = true
	}
	for _, want := range sel.Tags {
		if !have[want] {
			return false
		}
	}
	return true
}

// toTemplate: a template VM's reference is its GUID, a template file's its path; either way
// BootDisk is the parent disk the clones' differencing disks point at.
func toTemplate(node string, t wireTemplate) hypervisor.Template {
	id := lowerGUID(t.ID)
	if t.Kind != "VM" {
		id = t.VHDPath
	}
	var tags []string
	for _, tag := range strings.Split(t.Tags, ",") {
		if tag = strings.TrimSpace(tag); tag != "" {
			tags = append(tags, tag)
		}
	}
	return hypervisor.Template{
		Ref: hypervisor.VMRef{Node: node, ID: id}, Name: t.Name, Tags: tags,
		Cores: t.ProcessorCount, MemoryMiB: int(t.MemoryStartupBytes >> 20),
		DiskGiB: int(t.SizeBytes >> 30), BootDisk: t.VHDPath,
	}
}

// parentDisk finds the disk a clone of source gets as parent: a template VM's first disk, or a
// template file in the template folder.
func (p *Provider) parentDisk(ctx context.Context, op string, h *host, source hypervisor.VMRef) (path string, memoryMiB int, err error) {
	if guidRe.MatchString(source.ID) {
		w, err := h.getVM(ctx, op, source.ID)
		if err != nil {
			return "", 0, err
		}
		if !isTemplateNotes(w.Notes) || len(w.HardDiskPaths) == 0 {
			return "", 0, hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM %s (%q) is not a HyperFleet template with a disk", source, w.Name)
		}
		return w.HardDiskPaths[0], int(w.MemoryStartupBytes >> 20), nil
	}
	dir := strings.ToLower(p.cfg.TemplateDirectory + `\`)
	if !strings.HasPrefix(strings.ToLower(source.ID), dir) || !strings.HasSuffix(strings.ToLower(source.ID), ".vhdx") ||
		strings.Contains(source.ID[len(dir):], `\`) || strings.Contains(source.ID, "..") {
		return "", 0, hypervisor.Errorf(hypervisor.ErrInvalid, op, "template %q is neither a VM GUID nor a .vhdx file in %s", source.ID, p.cfg.TemplateDirectory)
	}
	return source.ID, 0, nil
}
