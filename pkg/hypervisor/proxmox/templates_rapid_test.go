package proxmox

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestTemplateResolutionPicksOnlyMatchingTemplates loads generated inventories into the
// simulator: templates and ordinary VMs of a few names and tag sets on three nodes, copies of a
// template on several nodes, duplicates on one. Generated selectors (by VMID, present or not, a
// template or not; by name and tags in any case; pinned to a node or not) are resolved through
// the API as a manager would. ResolveTemplate answers the one template that matches, ErrNotFound
// when none does and ErrAmbiguous when several do; ResolveTemplates answers one match per node,
// sorted by node, ErrAmbiguous when two match on one node. Whatever is answered is a template
// the selector matches, and asking again answers the same.
func TestTemplateResolutionPicksOnlyMatchingTemplates(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("30") // each check starts a simulator: keep the run bounded
		defer func() { _ = f.Value.Set(f.DefValue) }()
	}
	names := []string{"ubuntu-2404-runner", "debian-12", "windows-2025"}
	tagSet := []string{"runner", "ubuntu", "gpu", "v2"}
	nodes := []string{"pve1", "pve2", "pve3"}
	rapid.Check(t, func(rt *rapid.T) {
		inv := pvesim.DefaultInventory()
		inv.VMs = nil
		var specs []pvesim.VMSpec
		for i, vmid := range rapid.SliceOfNDistinct(rapid.IntRange(9000, 9029), 0, 9, rapid.ID[int]).Draw(rt, "vmids") {
			label := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
			var tags []string
			for _, tag := range tagSet {
				if rapid.Bool().Draw(rt, label(tag)) {
					tags = append(tags, tag)
				}
			}
			spec := pvesim.RunnerTemplate(vmid, rapid.SampledFrom(nodes).Draw(rt, label("node")),
				rapid.SampledFrom(names).Draw(rt, label("name")), "32G", tags...)
			spec.Template = rapid.IntRange(0, 3).Draw(rt, label("template")) > 0
			specs = append(specs, spec)
		}
		inv.VMs = specs
		sim := startSim(t, pvesim.Config{Inventory: inv})
		p := newTestProvider(t, sim, clusterA)
		defer p.Close()
		ctx := testCtx(t)

		for k := range rapid.IntRange(1, 6).Draw(rt, "selectors") {
			label := func(s string) string { return fmt.Sprintf("%s%d", s, k) }
			var sel hypervisor.TemplateSelector
			if rapid.IntRange(0, 3).Draw(rt, label("byID")) == 0 {
				sel.ID = strconv.Itoa(rapid.IntRange(9000, 9029).Draw(rt, label("id")))
			} else {
				sel.Name = rapid.SampledFrom(append([]string{""}, names...)).Draw(rt, label("name"))
				for _, tag := range tagSet {
					if rapid.IntRange(0, 3).Draw(rt, label(tag)) == 0 {
						if rapid.Bool().Draw(rt, label(tag+"Upper")) {
							tag = strings.ToUpper(tag) // PVE stores tags in lower case
						}
						sel.Tags = append(sel.Tags, tag)
					}
				}
			}
			if rapid.Bool().Draw(rt, label("pinned")) {
				sel.Node = rapid.SampledFrom(nodes).Draw(rt, label("node"))
			}

			// What the selector should match, read off the generated inventory.
			var want []hypervisor.VMRef
			notTemplate := false
			for _, s := range specs {
				if sel.Node != "" && s.Node != sel.Node {
					continue
				}
				if sel.ID != "" {
					if strconv.Itoa(s.VMID) == sel.ID {
						notTemplate = !s.Template
						if s.Template {
							want = append(want, hypervisor.VMRef{Node: s.Node, ID: sel.ID})
						}
					}
					continue
				}
				if !s.Template || (sel.Name != "" && s.Name != sel.Name) {
					continue
				}
				if slices.ContainsFunc(sel.Tags, func(tag string) bool { return !slices.Contains(s.Tags, strings.ToLower(tag)) }) {
					continue
				}
				want = append(want, hypervisor.VMRef{Node: s.Node, ID: strconv.Itoa(s.VMID)})
			}
			sort.Slice(want, func(i, j int) bool {
				if want[i].Node != want[j].Node {
					return want[i].Node < want[j].Node
				}
				return want[i].ID < want[j].ID
			})
			twoOnANode := false
			for i := 1; i < len(want); i++ {
				twoOnANode = twoOnANode || want[i].Node == want[i-1].Node
			}

			one, err := p.ResolveTemplate(ctx, sel)
			switch {
			case len(want) == 0 && !errors.Is(err, hypervisor.ErrNotFound):
				rt.Fatalf("%s matches nothing (not a template: %v), ResolveTemplate said %+v, %v", sel, notTemplate, one.Ref, err)
			case len(want) > 1 && !errors.Is(err, hypervisor.ErrAmbiguous):
				rt.Fatalf("%s matches %v, ResolveTemplate said %+v, %v", sel, want, one.Ref, err)
			case len(want) == 1 && (err != nil || one.Ref != want[0]):
				rt.Fatalf("%s matches %v, ResolveTemplate said %+v, %v", sel, want, one.Ref, err)
			case len(want) == 1 && one.BootDisk != "scsi0":
				rt.Fatalf("%s: resolved template %+v without its boot disk", sel, one)
			}
			if again, err2 := p.ResolveTemplate(ctx, sel); again.Ref != one.Ref || (err == nil) != (err2 == nil) {
				rt.Fatalf("%s resolved to %+v, then to %+v", sel, one.Ref, again.Ref)
			}

			many, err := p.ResolveTemplates(ctx, sel)
			var got []hypervisor.VMRef
			for _, tmpl := range many {
				got = append(got, tmpl.Ref)
			}
			switch {
			case len(want) == 0 && !errors.Is(err, hypervisor.ErrNotFound):
				rt.Fatalf("%s matches nothing, ResolveTemplates said %v, %v", sel, got, err)
			case twoOnANode && !errors.Is(err, hypervisor.ErrAmbiguous):
				rt.Fatalf("%s matches two templates on one node (%v), ResolveTemplates said %v, %v", sel, want, got, err)
			case len(want) > 0 && !twoOnANode && (err != nil || !slices.Equal(got, want)):
				rt.Fatalf("%s matches %v, ResolveTemplates said %v, %v", sel, want, got, err)
			}
		}
	})
}
