package clusterruntime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/sharedcall"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// TemplateTTL is how long a template resolution is shared by the claims of one HypervisorCluster
// before it is read again.
const TemplateTTL = 30 * time.Second

// templateCache shares template resolutions among the claims of a HypervisorCluster: without it
// each claim resolved its template three times (the placement, the clone, the configure step), each
// a listing of every VM of the cluster plus a config read per match. Entries are keyed by the
// provider instance, so a HypervisorCluster whose settings or credentials change (a new provider)
// reads its templates afresh; a failed clone drops the cluster's entries (ForgetTemplates), so a
// template that was removed or replaced is read again before the next attempt. The clone itself
// names the template, and the hypervisor refuses a linked clone of a VM that is no template.
type templateCache struct {
	mu      sync.Mutex
	entries map[templateKey]templateEntry
	// reads shares a resolution under way among the claims that missed the cache meanwhile.
	reads sharedcall.Group[templateKey, []hypervisor.Template]
}

type templateKey struct {
	provider hypervisor.Provider
	selector string
}

type templateEntry struct {
	templates []hypervisor.Template
	at        time.Time
}

// ResolveTemplates returns the templates sel matches, from a fresh enough resolution when there
// is one.
func (rt *Runtime) ResolveTemplates(ctx context.Context, p hypervisor.Provider, sel hypervisor.TemplateSelector) ([]hypervisor.Template, error) {
	tc := &rt.templates
	key := templateKey{provider: p, selector: fmt.Sprintf("all:%+v", sel)}
	if t, ok := tc.get(key); ok {
		return t, nil
	}
	return tc.reads.Do(ctx, key, func() ([]hypervisor.Template, error) {
		t, err := p.ResolveTemplates(ctx, sel)
		if err != nil {
			return nil, err
		}
		tc.put(key, t)
		return t, nil
	})
}

// ResolveTemplate returns the one template sel names: taken from a fresh resolution of among (an
// earlier claim's placement usually made one) when it holds exactly that template, otherwise read.
func (rt *Runtime) ResolveTemplate(ctx context.Context, p hypervisor.Provider, sel, among hypervisor.TemplateSelector) (hypervisor.Template, error) {
	tc := &rt.templates
	if all, ok := tc.get(templateKey{provider: p, selector: fmt.Sprintf("all:%+v", among)}); ok {
		for _, t := range all {
			if t.Ref.ID == sel.ID && t.Ref.Node == sel.Node {
				return t, nil
			}
		}
	}
	key := templateKey{provider: p, selector: fmt.Sprintf("one:%+v", sel)}
	if t, ok := tc.get(key); ok && len(t) == 1 {
		return t[0], nil
	}
	t, err := tc.reads.Do(ctx, key, func() ([]hypervisor.Template, error) {
		t, err := p.ResolveTemplate(ctx, sel)
		if err != nil {
			return nil, err
		}
		tc.put(key, []hypervisor.Template{t})
		return []hypervisor.Template{t}, nil
	})
	if err != nil {
		return hypervisor.Template{}, err
	}
	return t[0], nil
}

// ForgetTemplates drops every template resolution of the cluster.
func (rt *Runtime) ForgetTemplates() {
	rt.templates.mu.Lock()
	defer rt.templates.mu.Unlock()
	rt.templates.entries = nil
}

func (tc *templateCache) get(key templateKey) ([]hypervisor.Template, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	e, ok := tc.entries[key]
	if !ok || time.Since(e.at) >= TemplateTTL {
		return nil, false
	}
	return e.templates, true
}

func (tc *templateCache) put(key templateKey, t []hypervisor.Template) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.entries == nil {
		tc.entries = map[templateKey]templateEntry{}
	}
	for k, e := range tc.entries { // drop what has expired, so replaced providers do not linger
		if time.Since(e.at) >= TemplateTTL {
			delete(tc.entries, k)
		}
	}
	tc.entries[key] = templateEntry{templates: t, at: time.Now()}
}
