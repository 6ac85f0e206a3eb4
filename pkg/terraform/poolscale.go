package terraform

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// poolScaleResource sets a pool's size through its scale subresource, as kubectl scale does.
type poolScaleResource struct{ c *client }

func newPoolScaleResource() resource.Resource { return &poolScaleResource{} }

type poolScaleModel struct {
	ID        types.String `tfsdk:"id"`
	Namespace types.String `tfsdk:"namespace"`
	Name      types.String `tfsdk:"name"`
	Kind      types.String `tfsdk:"kind"`
	Replicas  types.Int64  `tfsdk:"replicas"`
	Current   types.Int64  `tfsdk:"current_replicas"`
	Ready     types.Int64  `tfsdk:"ready_replicas"`
}

// pool is the console's Pool, as far as scaling needs it.
type pool struct {
	Kind         string `json:"kind"`
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Replicas     int64  `json:"replicas"`
	Ready        int64  `json:"readyReplicas"`
	SpecReplicas *int64 `json:"specReplicas"`
}

func (r *poolScaleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool_scale"
}

func (r *poolScaleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replaceS := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "The size of a RunnerPool or VMPool, set through its scale subresource as kubectl scale does. " +
			"Destroying it leaves the pool at its last size.",
		Attributes: map[string]schema.Attribute{
			"id":        schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}, Description: "kind/namespace/name"},
			"namespace": schema.StringAttribute{Required: true, PlanModifiers: replaceS},
			"name":      schema.StringAttribute{Required: true, PlanModifiers: replaceS},
			"kind": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("RunnerPool"), PlanModifiers: replaceS,
				Description: "RunnerPool (default) or VMPool."},
			"replicas":         schema.Int64Attribute{Required: true, Description: "The size; within a RunnerPool's minReplicas and maxReplicas."},
			"current_replicas": schema.Int64Attribute{Computed: true},
			"ready_replicas":   schema.Int64Attribute{Computed: true},
		},
	}
}

func (r *poolScaleResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		r.c = c
	}
}

func (r *poolScaleResource) scale(ctx context.Context, m *poolScaleModel) error {
	p := "/api/v1/pools/" + url.PathEscape(m.Namespace.ValueString()) + "/" + url.PathEscape(m.Name.ValueString()) + "?kind=" + url.QueryEscape(m.Kind.ValueString())
	var got pool
	if err := r.c.doPatch(ctx, p, map[string]int64{"replicas": m.Replicas.ValueInt64()}, &got); err != nil {
		return err
	}
	m.ID = types.StringValue(m.Kind.ValueString() + "/" + m.Namespace.ValueString() + "/" + m.Name.ValueString())
	m.Current, m.Ready = types.Int64Value(got.Replicas), types.Int64Value(got.Ready)
	return nil
}

func (r *poolScaleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m poolScaleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.scale(ctx, &m); err != nil {
		report(&resp.Diagnostics, "Scaling the pool", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *poolScaleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m poolScaleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.scale(ctx, &m); err != nil {
		report(&resp.Diagnostics, "Scaling the pool", err)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *poolScaleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m poolScaleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var list struct {
		Items []pool `json:"items"`
	}
	q := "/api/v1/pools?namespace=" + url.QueryEscape(m.Namespace.ValueString()) + "&kind=" + url.QueryEscape(m.Kind.ValueString())
	if err := r.c.do(ctx, http.MethodGet, q, nil, &list); err != nil {
		report(&resp.Diagnostics, "Reading the pool", err)
		return
	}
	for _, p := range list.Items {
		if p.Name != m.Name.ValueString() {
			continue
		}
		m.Current, m.Ready = types.Int64Value(p.Replicas), types.Int64Value(p.Ready)
		if p.SpecReplicas != nil {
			m.Replicas = types.Int64Value(*p.SpecReplicas)
		} else {
			m.Replicas = types.Int64Null() // no size is set: the next apply sets it again
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
		return
	}
	resp.State.RemoveResource(ctx)
}

// Delete leaves the pool at its size: a scale cannot be taken back, only changed.
func (r *poolScaleResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}

// ImportState takes kind/namespace/name.
func (r *poolScaleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	parts := strings.Split(req.ID, "/")
	if len(parts) != 3 || (parts[0] != "RunnerPool" && parts[0] != "VMPool") || parts[1] == "" || parts[2] == "" {
		resp.Diagnostics.AddError("Importing a pool's scale", fmt.Sprintf("the ID is RunnerPool/namespace/name or VMPool/namespace/name, not %q", req.ID))
		return
	}
	for i, attr := range []string{"kind", "namespace", "name"} {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(attr), parts[i])...)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}

var (
	_ resource.ResourceWithConfigure   = (*poolScaleResource)(nil)
	_ resource.ResourceWithImportState = (*poolScaleResource)(nil)
)
