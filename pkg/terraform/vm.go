package terraform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// waitTimeout bounds how long create, power changes and delete wait for the VM, unless the
// resource's wait_timeout says otherwise.
const waitTimeout = 15 * time.Minute

// timeoutOf is m's wait_timeout, waitTimeout when unset (validated at plan time).
func timeoutOf(m vmModel) time.Duration {
	if d, err := time.ParseDuration(m.WaitTimeout.ValueString()); err == nil && d > 0 {
		return d
	}
	return waitTimeout
}

// durationValidator refuses a wait_timeout that is not a positive Go duration.
type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return "a positive duration such as 10m or 1h"
}
func (v durationValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}
func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid wait_timeout",
			fmt.Sprintf("wait_timeout %q is not a positive duration such as 10m or 1h", req.ConfigValue.ValueString()))
	}
}

type vmResource struct{ c *client }

func newVMResource() resource.Resource { return &vmResource{} }

type vmModel struct {
	ID          types.String `tfsdk:"id"`
	Namespace   types.String `tfsdk:"namespace"`
	Name        types.String `tfsdk:"name"`
	Cluster     types.String `tfsdk:"cluster"`
	Template    types.String `tfsdk:"template"`
	Host        types.String `tfsdk:"host"`
	CPUs        types.Int64  `tfsdk:"cpus"`
	MemoryMiB   types.Int64  `tfsdk:"memory_mib"`
	DiskGiB     types.Int64  `tfsdk:"disk_gib"`
	Bridge      types.String `tfsdk:"bridge"`
	VLAN        types.Int64  `tfsdk:"vlan"`
	UserData    types.String `tfsdk:"user_data"`
	RunStrategy types.String `tfsdk:"run_strategy"`
	Node        types.String `tfsdk:"node"`
	VMID        types.String `tfsdk:"vm_id"`
	Phase       types.String `tfsdk:"phase"`
	PowerState  types.String `tfsdk:"power_state"`
	Addresses   types.List   `tfsdk:"addresses"`
	WaitTimeout types.String `tfsdk:"wait_timeout"`
}

func (r *vmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vm"
}

func (r *vmResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceS := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	replaceI := []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	computedS := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A long-lived VM (a persistent MachineClaim) on one of HyperFleet's HypervisorClusters. Changing its " +
			"hardware, template or place replaces it; run_strategy between Always and Halted powers it on or off in place.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: computedS, Description: "namespace/name"},
			"namespace": schema.StringAttribute{Required: true, PlanModifiers: replaceS,
				Description: "The namespace of the VM and of its HypervisorCluster."},
			"name":     schema.StringAttribute{Required: true, PlanModifiers: replaceS},
			"cluster":  schema.StringAttribute{Required: true, PlanModifiers: replaceS, Description: "The HypervisorCluster."},
			"template": schema.StringAttribute{Required: true, PlanModifiers: replaceS, Description: "A template's name or ID."},
			"host": schema.StringAttribute{Optional: true, PlanModifiers: replaceS,
				Description: "Pins the VM to a host; unset lets HyperFleet choose (see node)."},
			"cpus":       schema.Int64Attribute{Optional: true, PlanModifiers: replaceI},
			"memory_mib": schema.Int64Attribute{Optional: true, PlanModifiers: replaceI},
			"disk_gib":   schema.Int64Attribute{Optional: true, PlanModifiers: replaceI},
			"bridge": schema.StringAttribute{Optional: true, PlanModifiers: replaceS,
				Description: "What the VM's NIC attaches to: a Proxmox bridge, a Hyper-V switch, a vSphere port group."},
			"vlan":      schema.Int64Attribute{Optional: true, PlanModifiers: replaceI},
			"user_data": schema.StringAttribute{Optional: true, Sensitive: true, PlanModifiers: replaceS, Description: "#cloud-config YAML."},
			"run_strategy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("Always"),
				PlanModifiers: []planmodifier.String{runStrategyModifier{}},
				Description:   "Always, RerunOnFailure, Halted, Manual or Once. Always and Halted change into each other in place (power on, power off)."},
			"node":        schema.StringAttribute{Computed: true, Description: "The host the VM runs on."},
			"vm_id":       schema.StringAttribute{Computed: true, PlanModifiers: computedS, Description: "The hypervisor's ID of the VM."},
			"phase":       schema.StringAttribute{Computed: true},
			"power_state": schema.StringAttribute{Computed: true},
			"addresses":   schema.ListAttribute{Computed: true, ElementType: types.StringType},
			"wait_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(waitTimeout.String()),
				Validators:  []validator.String{durationValidator{}},
				Description: "How long create, power changes and delete wait for the VM (a Go duration). Default 15m."},
		},
	}
}

// runStrategyModifier replaces the VM for a run-strategy change the API cannot make in place.
type runStrategyModifier struct{}

func (runStrategyModifier) Description(context.Context) string {
	return "replaces the VM unless the change is between Always and Halted"
}
func (m runStrategyModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}
func (runStrategyModifier) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.StateValue.IsNull() || req.PlanValue.IsUnknown() || req.StateValue.Equal(req.PlanValue) {
		return
	}
	inPlace := map[string]bool{"Always": true, "Halted": true}
	if !inPlace[req.StateValue.ValueString()] || !inPlace[req.PlanValue.ValueString()] {
		resp.RequiresReplace = true
	}
}

func (r *vmResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

// apiFields maps the console's field names to the resource's attributes.
var apiFields = map[string]string{"namespace": "namespace", "name": "name", "cluster": "cluster", "template": "template",
	"host": "host", "cpus": "cpus", "memoryMiB": "memory_mib", "diskGiB": "disk_gib", "bridge": "bridge", "vlan": "vlan",
	"userData": "user_data", "runStrategy": "run_strategy", "withMemory": "with_memory", "description": "description"}

// report turns an API error into diagnostics, each field error on its attribute.
func report(diags *diag.Diagnostics, what string, err error) {
	var ae *apiError
	if errors.As(err, &ae) && len(ae.Problem.Errors) > 0 {
		for _, f := range ae.Problem.Errors {
			if attrName, ok := apiFields[f.Field]; ok {
				diags.AddAttributeError(path.Root(attrName), what, fmt.Sprintf("%s %s", attrName, f.Message))
			} else {
				diags.AddError(what, fmt.Sprintf("%s %s", f.Field, f.Message))
			}
		}
		return
	}
	diags.AddError(what, err.Error())
}

func (r *vmResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m vmModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	body := createVM{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString(), Cluster: m.Cluster.ValueString(),
		Template: m.Template.ValueString(), Host: m.Host.ValueString(), CPUs: int32(m.CPUs.ValueInt64()),
		MemoryMiB: int32(m.MemoryMiB.ValueInt64()), DiskGiB: int32(m.DiskGiB.ValueInt64()), Bridge: m.Bridge.ValueString(),
		VLAN: int32(m.VLAN.ValueInt64()), UserData: m.UserData.ValueString(), RunStrategy: m.RunStrategy.ValueString()}
	if err := r.c.do(ctx, http.MethodPost, "/api/v1/vms", body, nil); err != nil {
		report(&resp.Diagnostics, "Creating the VM", err)
		return
	}
	// Saved at once: a VM that fails to come up is still tracked, and destroyed on the next apply.
	m.ID = types.StringValue(m.Namespace.ValueString() + "/" + m.Name.ValueString())
	got, err := r.wait(ctx, m, settled(m.RunStrategy.ValueString()))
	if got != nil {
		apply(&m, got)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	if err != nil {
		resp.Diagnostics.AddError("Waiting for the VM", err.Error())
	}
}

// settled says when a VM with strategy has come up: running with an address, or stopped when halted.
func settled(strategy string) func(*vm) bool {
	return func(v *vm) bool {
		if strategy == "Halted" {
			return v.ID != "" && v.PowerState == "Stopped"
		}
		return v.PowerState == "Running" && (v.Phase == "Running" || v.Phase == "Ready")
	}
}

// wait polls the VM until done says it is there; it fails on a Failed phase or after waitTimeout.
func (r *vmResource) wait(ctx context.Context, m vmModel, done func(*vm) bool) (*vm, error) {
	limit := timeoutOf(m)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last *vm
	for {
		var v vm
		err := r.c.do(ctx, http.MethodGet, vmPath(m.Namespace.ValueString(), m.Name.ValueString()), nil, &v)
		switch {
		case err == nil:
			last = &v
			if done(&v) {
				return &v, nil
			}
			if v.Phase == "Failed" {
				return &v, fmt.Errorf("the VM failed: %s %s", v.Reason, v.Message)
			}
		case !isNotFound(err):
			return last, err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return last, fmt.Errorf("the VM is %s (%s): %s %s after wait_timeout %s", last.Phase, last.PowerState, last.Reason, last.Message, limit)
			}
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// apply copies what the API reports into m; what the API does not report keeps the configuration's value.
func apply(m *vmModel, v *vm) {
	m.ID = types.StringValue(v.Namespace + "/" + v.Name)
	m.Namespace, m.Name, m.Cluster = types.StringValue(v.Namespace), types.StringValue(v.Name), types.StringValue(v.Cluster)
	if v.Template != "" && m.Template.IsNull() {
		m.Template = types.StringValue(v.Template)
	}
	optInt := func(n int32) types.Int64 {
		if n == 0 {
			return types.Int64Null()
		}
		return types.Int64Value(int64(n))
	}
	optStr := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	m.CPUs, m.MemoryMiB, m.DiskGiB, m.VLAN = optInt(v.CPUs), optInt(v.MemoryMiB), optInt(v.DiskGiB), optInt(v.VLAN)
	m.Bridge = optStr(v.Bridge)
	if v.RunStrategy != "" {
		m.RunStrategy = types.StringValue(v.RunStrategy)
	}
	m.Node, m.VMID, m.Phase, m.PowerState = types.StringValue(v.Host), types.StringValue(v.ID), types.StringValue(v.Phase), types.StringValue(v.PowerState)
	addrs := make([]attr.Value, 0, len(v.Addresses))
	for _, a := range v.Addresses {
		addrs = append(addrs, types.StringValue(a))
	}
	m.Addresses = types.ListValueMust(types.StringType, addrs)
}

func (r *vmResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m vmModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var v vm
	err := r.c.do(ctx, http.MethodGet, vmPath(m.Namespace.ValueString(), m.Name.ValueString()), nil, &v)
	switch {
	case isNotFound(err), err == nil && v.Deleting:
		// Gone outside Terraform: the next plan creates it again.
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		report(&resp.Diagnostics, "Reading the VM", err)
		return
	case !v.Persistent:
		resp.Diagnostics.AddError("Reading the VM", fmt.Sprintf("%s/%s is not a long-lived VM (a runner or a one-job VM); hyperfleet_vm manages persistent VMs only", v.Namespace, v.Name))
		return
	}
	apply(&m, &v)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *vmResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state vmModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if want := plan.RunStrategy.ValueString(); want != state.RunStrategy.ValueString() {
		op := "power-on"
		if want == "Halted" {
			op = "power-off"
		}
		if err := r.c.do(ctx, http.MethodPost, vmPath(plan.Namespace.ValueString(), plan.Name.ValueString())+"/"+op, nil, nil); err != nil {
			report(&resp.Diagnostics, "Changing the VM's power", err)
			return
		}
	}
	got, err := r.wait(ctx, plan, settled(plan.RunStrategy.ValueString()))
	if got != nil {
		apply(&plan, got)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err != nil {
		resp.Diagnostics.AddError("Waiting for the VM", err.Error())
	}
}

func (r *vmResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m vmModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := vmPath(m.Namespace.ValueString(), m.Name.ValueString())
	if err := r.c.do(ctx, http.MethodDelete, p, nil, nil); err != nil && !isNotFound(err) {
		report(&resp.Diagnostics, "Deleting the VM", err)
		return
	}
	limit := timeoutOf(m)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := r.c.do(ctx, http.MethodGet, p, nil, &vm{})
		if isNotFound(err) {
			return
		}
		if err != nil && ctx.Err() == nil {
			report(&resp.Diagnostics, "Waiting for the VM to go", err)
			return
		}
		select {
		case <-ctx.Done():
			resp.Diagnostics.AddError("Waiting for the VM to go", fmt.Sprintf("%s is still there after wait_timeout %s", m.ID.ValueString(), limit))
			return
		case <-time.After(time.Second):
		}
	}
}

// ImportState takes namespace/name.
func (r *vmResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, ok := strings.Cut(req.ID, "/")
	if !ok || ns == "" || name == "" {
		resp.Diagnostics.AddError("Importing a VM", fmt.Sprintf("the ID is namespace/name, not %q", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_timeout"), waitTimeout.String())...)
}

var (
	_ resource.ResourceWithConfigure   = (*vmResource)(nil)
	_ resource.ResourceWithImportState = (*vmResource)(nil)
)
