package terraform

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type snapshotResource struct{ c *client }

func newSnapshotResource() resource.Resource { return &snapshotResource{} }

type snapshotModel struct {
	ID             types.String `tfsdk:"id"`
	Namespace      types.String `tfsdk:"namespace"`
	VM             types.String `tfsdk:"vm"`
	Name           types.String `tfsdk:"name"`
	WithMemory     types.Bool   `tfsdk:"with_memory"`
	Description    types.String `tfsdk:"description"`
	Phase          types.String `tfsdk:"phase"`
	ReadyToUse     types.Bool   `tfsdk:"ready_to_use"`
	HypervisorName types.String `tfsdk:"hypervisor_name"`
}

// snapshot is the console's Snapshot.
type snapshot struct {
	Namespace      string `json:"namespace"`
	VM             string `json:"vm"`
	Name           string `json:"name"`
	Description    string `json:"description"`
	WithMemory     bool   `json:"withMemory"`
	Phase          string `json:"phase"`
	ReadyToUse     bool   `json:"readyToUse"`
	HypervisorName string `json:"hypervisorName"`
	Error          string `json:"error"`
	Deleting       bool   `json:"deleting"`
}

func snapshotPath(namespace, vmName, name string) string {
	return vmPath(namespace, vmName) + "/snapshots/" + url.PathEscape(name)
}

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vm_snapshot"
}

func (r *snapshotResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceS := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A snapshot of a long-lived VM (a MachineSnapshot). Any change replaces it.",
		Attributes: map[string]schema.Attribute{
			"id":           schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}, Description: "namespace/vm/name"},
			"namespace":    schema.StringAttribute{Required: true, PlanModifiers: replaceS},
			"vm":           schema.StringAttribute{Required: true, PlanModifiers: replaceS, Description: "The VM's name (a hyperfleet_vm's name)."},
			"name":         schema.StringAttribute{Required: true, PlanModifiers: replaceS},
			"with_memory":  schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false), PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()}, Description: "Also save a running VM's memory."},
			"description":  schema.StringAttribute{Optional: true, PlanModifiers: replaceS},
			"phase":        schema.StringAttribute{Computed: true},
			"ready_to_use": schema.BoolAttribute{Computed: true},
			"hypervisor_name": schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description: "The snapshot's name on the hypervisor."},
		},
	}
}

func (r *snapshotResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func applySnapshot(m *snapshotModel, s *snapshot) {
	m.ID = types.StringValue(s.Namespace + "/" + s.VM + "/" + s.Name)
	m.Namespace, m.VM, m.Name = types.StringValue(s.Namespace), types.StringValue(s.VM), types.StringValue(s.Name)
	m.WithMemory = types.BoolValue(s.WithMemory)
	if s.Description != "" {
		m.Description = types.StringValue(s.Description)
	} else {
		m.Description = types.StringNull()
	}
	m.Phase, m.ReadyToUse, m.HypervisorName = types.StringValue(s.Phase), types.BoolValue(s.ReadyToUse), types.StringValue(s.HypervisorName)
}

func (r *snapshotResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ns, vmName, name := m.Namespace.ValueString(), m.VM.ValueString(), m.Name.ValueString()
	body := map[string]any{"name": name, "withMemory": m.WithMemory.ValueBool(), "description": m.Description.ValueString()}
	if err := r.c.do(ctx, http.MethodPost, vmPath(ns, vmName)+"/snapshots", body, nil); err != nil {
		report(&resp.Diagnostics, "Taking the snapshot", err)
		return
	}
	m.ID = types.StringValue(ns + "/" + vmName + "/" + name)
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		var s snapshot
		err := r.c.do(ctx, http.MethodGet, snapshotPath(ns, vmName, name), nil, &s)
		if err == nil {
			applySnapshot(&m, &s)
			if s.ReadyToUse || s.Phase == "Failed" {
				resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
				if s.Phase == "Failed" {
					resp.Diagnostics.AddError("Taking the snapshot", "the hypervisor failed it: "+s.Error)
				}
				return
			}
		} else if !isNotFound(err) {
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			report(&resp.Diagnostics, "Waiting for the snapshot", err)
			return
		}
		select {
		case <-ctx.Done():
			m.Phase, m.ReadyToUse = types.StringValue("InProgress"), types.BoolValue(false)
			resp.Diagnostics.Append(resp.State.Set(context.WithoutCancel(ctx), &m)...)
			resp.Diagnostics.AddError("Waiting for the snapshot", fmt.Sprintf("not ready after %s", waitTimeout))
			return
		case <-time.After(time.Second):
		}
	}
}

func (r *snapshotResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var s snapshot
	err := r.c.do(ctx, http.MethodGet, snapshotPath(m.Namespace.ValueString(), m.VM.ValueString(), m.Name.ValueString()), nil, &s)
	switch {
	case isNotFound(err), err == nil && s.Deleting:
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		report(&resp.Diagnostics, "Reading the snapshot", err)
		return
	}
	applySnapshot(&m, &s)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update is never called: every attribute requires replacement.
func (r *snapshotResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("Updating a snapshot", "a snapshot cannot change; it is replaced")
}

func (r *snapshotResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m snapshotModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := snapshotPath(m.Namespace.ValueString(), m.VM.ValueString(), m.Name.ValueString())
	if err := r.c.do(ctx, http.MethodDelete, p, nil, nil); err != nil && !isNotFound(err) {
		report(&resp.Diagnostics, "Deleting the snapshot", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	for {
		err := r.c.do(ctx, http.MethodGet, p, nil, &snapshot{})
		if isNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			resp.Diagnostics.AddError("Waiting for the snapshot to go", fmt.Sprintf("%s is still there after %s", m.ID.ValueString(), waitTimeout))
			return
		case <-time.After(time.Second):
		}
	}
}

// ImportState takes namespace/vm/name.
func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	parts := strings.Split(req.ID, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		resp.Diagnostics.AddError("Importing a snapshot", fmt.Sprintf("the ID is namespace/vm/name, not %q", req.ID))
		return
	}
	for i, attr := range []string{"namespace", "vm", "name"} {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attr), parts[i])...)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}

var (
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
)
