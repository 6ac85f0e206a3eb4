package console

import (
	"regexp"
	"strconv"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	fleetplatform "github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// The console reads VM identity and a pool's CI platform only through these accessors, so a change
// of the API's shape (provider-neutral VM IDs, platform-neutral pools) is adapted here alone.

// claimVMID is the hypervisor's ID of a claim's VM, empty before it is chosen.
func claimVMID(c *infrav1.MachineClaim) string { return c.Status.VMID }

// claimHost is the host the claim's VM runs on.
func claimHost(c *infrav1.MachineClaim) string { return c.Status.Node }

// vmID is the ID of a VM as the hypervisor reports it.
func vmID(vm hypervisor.VM) string { return vm.Ref.ID }

// vmHost is the host of a VM as the hypervisor reports it.
func vmHost(vm hypervisor.VM) string { return vm.Ref.Node }

// claimTemplate describes the template a claim clones, for people.
func claimTemplate(c *infrav1.MachineClaim) string {
	t := c.Spec.Template
	if t.ID != "" {
		return t.ID
	}
	return t.Name
}

// templateSource turns what a person typed (a template name, a numeric ID or a GUID) into the
// API's form.
func templateSource(template string) infrav1.TemplateSource {
	if _, err := strconv.Atoi(template); err == nil || guid.MatchString(template) {
		return infrav1.TemplateSource{ID: template}
	}
	return infrav1.TemplateSource{Name: template}
}

// guid is a VM ID as Hyper-V writes it.
var guid = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// poolPlatform names a pool's CI platform and scope for people.
func poolPlatform(p *fleetv1.RunnerPool) (kind, scope string) {
	pool, _ := fleetplatform.PoolOf(p)
	return string(pool.Kind), pool.Scope.String()
}

// poolLabels are the job labels a pool serves.
func poolLabels(p *fleetv1.RunnerPool) []string {
	pool, _ := fleetplatform.PoolOf(p)
	return pool.Labels
}
