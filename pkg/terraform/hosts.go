package terraform

import (
	"context"
	"net/http"
	"net/url"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type hostsDataSource struct{ c *client }

func newHostsDataSource() datasource.DataSource { return &hostsDataSource{} }

type hostsModel struct {
	Namespace types.String `tfsdk:"namespace"`
	Cluster   types.String `tfsdk:"cluster"`
	Hosts     []hostModel  `tfsdk:"hosts"`
}

type hostModel struct {
	Cluster       types.String `tfsdk:"cluster"`
	Provider      types.String `tfsdk:"provider"`
	Name          types.String `tfsdk:"name"`
	State         types.String `tfsdk:"state"`
	CPUs          types.Int64  `tfsdk:"cpus"`
	MemoryMiB     types.Int64  `tfsdk:"memory_mib"`
	FreeMemoryMiB types.Int64  `tfsdk:"free_memory_mib"`
}

func (d *hostsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_hosts"
}

func (d *hostsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The hosts of the HypervisorClusters of a namespace, as the console's inventory shows them.",
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true},
			"cluster":   schema.StringAttribute{Optional: true, Description: "Only this HypervisorCluster's hosts."},
			"hosts": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"cluster": schema.StringAttribute{Computed: true}, "provider": schema.StringAttribute{Computed: true},
				"name": schema.StringAttribute{Computed: true}, "state": schema.StringAttribute{Computed: true},
				"cpus": schema.Int64Attribute{Computed: true}, "memory_mib": schema.Int64Attribute{Computed: true},
				"free_memory_mib": schema.Int64Attribute{Computed: true},
			}}},
		},
	}
}

func (d *hostsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*client); ok {
		d.c = c
	}
}

func (d *hostsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m hostsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var list struct {
		Items []host `json:"items"`
	}
	if err := d.c.do(ctx, http.MethodGet, "/api/v1/hosts?namespace="+url.QueryEscape(m.Namespace.ValueString()), nil, &list); err != nil {
		report(&resp.Diagnostics, "Listing hosts", err)
		return
	}
	m.Hosts = []hostModel{}
	for _, h := range list.Items {
		if c := m.Cluster.ValueString(); c != "" && h.Cluster != c {
			continue
		}
		m.Hosts = append(m.Hosts, hostModel{Cluster: types.StringValue(h.Cluster), Provider: types.StringValue(h.Provider),
			Name: types.StringValue(h.Name), State: types.StringValue(h.State), CPUs: types.Int64Value(h.CPUs),
			MemoryMiB: types.Int64Value(h.MemoryMiB), FreeMemoryMiB: types.Int64Value(h.FreeMemoryMiB)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
