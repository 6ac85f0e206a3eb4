package terraform

import (
	"context"
	"net/http"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// clustersDataSource lists HypervisorClusters; vmsDataSource lists VMs: both as the console shows them.
type clustersDataSource struct{ c *client }
type vmsDataSource struct{ c *client }

func newClustersDataSource() datasource.DataSource { return &clustersDataSource{} }
func newVMsDataSource() datasource.DataSource      { return &vmsDataSource{} }

func configureData(req datasource.ConfigureRequest) *client {
	c, _ := req.ProviderData.(*client)
	return c
}

func (d *clustersDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	d.c = configureData(req)
}
func (d *vmsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	d.c = configureData(req)
}

func (d *clustersDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_clusters"
}
func (d *vmsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vms"
}

type clustersModel struct {
	Namespace types.String   `tfsdk:"namespace"`
	Clusters  []clusterModel `tfsdk:"clusters"`
}

type clusterModel struct {
	Namespace types.String `tfsdk:"namespace"`
	Name      types.String `tfsdk:"name"`
	Provider  types.String `tfsdk:"provider"`
	Endpoint  types.String `tfsdk:"endpoint"`
	Ready     types.String `tfsdk:"ready"`
	Version   types.String `tfsdk:"version"`
	Hosts     types.Int64  `tfsdk:"hosts"`
	VMs       types.Int64  `tfsdk:"vms"`
}

func (d *clustersDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	s := func() schema.StringAttribute { return schema.StringAttribute{Computed: true} }
	resp.Schema = schema.Schema{
		Description: "The HypervisorClusters you may read, with their health, as the console shows them.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Optional: true, Description: "Only this namespace."},
			"clusters": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"namespace": s(), "name": s(), "provider": s(), "endpoint": s(), "ready": s(), "version": s(),
				"hosts": schema.Int64Attribute{Computed: true}, "vms": schema.Int64Attribute{Computed: true},
			}}},
		},
	}
}

func (d *clustersDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m clustersModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var list struct {
		Items []struct {
			Namespace, Name, Provider, Endpoint, Ready, Version string
			Hosts, VMs                                          int64
		} `json:"items"`
	}
	if err := d.c.do(ctx, http.MethodGet, "/api/v1/clusters?namespace="+url.QueryEscape(m.Namespace.ValueString()), nil, &list); err != nil {
		report(&resp.Diagnostics, "Listing HypervisorClusters", err)
		return
	}
	m.Clusters = []clusterModel{}
	for _, c := range list.Items {
		m.Clusters = append(m.Clusters, clusterModel{Namespace: types.StringValue(c.Namespace), Name: types.StringValue(c.Name),
			Provider: types.StringValue(c.Provider), Endpoint: types.StringValue(c.Endpoint), Ready: types.StringValue(c.Ready),
			Version: types.StringValue(c.Version), Hosts: types.Int64Value(c.Hosts), VMs: types.Int64Value(c.VMs)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type vmsModel struct {
	Namespace types.String `tfsdk:"namespace"`
	Cluster   types.String `tfsdk:"cluster"`
	VMs       []vmsItem    `tfsdk:"vms"`
}

type vmsItem struct {
	Namespace  types.String `tfsdk:"namespace"`
	Name       types.String `tfsdk:"name"`
	Cluster    types.String `tfsdk:"cluster"`
	Node       types.String `tfsdk:"node"`
	VMID       types.String `tfsdk:"vm_id"`
	Phase      types.String `tfsdk:"phase"`
	PowerState types.String `tfsdk:"power_state"`
	Persistent types.Bool   `tfsdk:"persistent"`
	Foreign    types.Bool   `tfsdk:"foreign"`
	Addresses  types.List   `tfsdk:"addresses"`
}

func (d *vmsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	s := func() schema.StringAttribute { return schema.StringAttribute{Computed: true} }
	resp.Schema = schema.Schema{
		Description: "The VMs you may read (runners, long-lived VMs, and the hypervisors' other VMs, marked foreign), as the console shows them.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Optional: true, Description: "Only this namespace."},
			"cluster":   schema.StringAttribute{Optional: true, Description: "Only this HypervisorCluster's."},
			"vms": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"namespace": s(), "name": s(), "cluster": s(), "node": s(), "vm_id": s(), "phase": s(), "power_state": s(),
				"persistent": schema.BoolAttribute{Computed: true}, "foreign": schema.BoolAttribute{Computed: true},
				"addresses": schema.ListAttribute{Computed: true, ElementType: types.StringType},
			}}},
		},
	}
}

func (d *vmsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m vmsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	q := url.Values{}
	if v := m.Namespace.ValueString(); v != "" {
		q.Set("namespace", v)
	}
	if v := m.Cluster.ValueString(); v != "" {
		q.Set("cluster", v)
	}
	var list struct {
		Items []struct {
			vm
			Foreign bool `json:"foreign"`
		} `json:"items"`
	}
	if err := d.c.do(ctx, http.MethodGet, "/api/v1/vms?"+q.Encode(), nil, &list); err != nil {
		report(&resp.Diagnostics, "Listing VMs", err)
		return
	}
	m.VMs = []vmsItem{}
	for _, v := range list.Items {
		addrs := make([]attr.Value, 0, len(v.Addresses))
		for _, a := range v.Addresses {
			addrs = append(addrs, types.StringValue(a))
		}
		m.VMs = append(m.VMs, vmsItem{Namespace: types.StringValue(v.Namespace), Name: types.StringValue(v.Name),
			Cluster: types.StringValue(v.Cluster), Node: types.StringValue(v.Host), VMID: types.StringValue(v.ID),
			Phase: types.StringValue(v.Phase), PowerState: types.StringValue(v.PowerState), Persistent: types.BoolValue(v.Persistent),
			Foreign: types.BoolValue(v.Foreign), Addresses: types.ListValueMust(types.StringType, addrs)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
