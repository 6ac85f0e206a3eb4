package terraform

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// New returns the provider at version.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &hyperfleetProvider{version: version} }
}

type hyperfleetProvider struct{ version string }

type providerModel struct {
	Endpoint          types.String `tfsdk:"endpoint"`
	Token             types.String `tfsdk:"token"`
	TokenFile         types.String `tfsdk:"token_file"`
	CAFile            types.String `tfsdk:"ca_file"`
	AllowInsecureHTTP types.Bool   `tfsdk:"allow_insecure_http"`
}

func (p *hyperfleetProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName, resp.Version = "hyperfleet", p.version
}

func (p *hyperfleetProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "HyperFleet's VMs on Proxmox VE, Hyper-V and vSphere, through the HyperFleet console's API as the signed-in person.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{Optional: true,
				Description: "The console's URL, e.g. https://hyperfleet.example.com. Default: HYPERFLEET_ENDPOINT."},
			"token": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: "An OIDC ID token of the console's identity provider. Default: HYPERFLEET_TOKEN."},
			"token_file": schema.StringAttribute{Optional: true,
				Description: "A file holding the token, read at every call so the identity provider's tooling can refresh it. Default: HYPERFLEET_TOKEN_FILE."},
			"ca_file": schema.StringAttribute{Optional: true,
				Description: "PEM CA bundle the console's certificate is verified with; default the system roots. Default: HYPERFLEET_CA_FILE."},
			"allow_insecure_http": schema.BoolAttribute{Optional: true,
				Description: "Allow an http:// endpoint, over which the token travels in clear text: for labs only."},
		},
	}
}

func (p *hyperfleetProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	or := func(v types.String, env string) string {
		if !v.IsNull() && !v.IsUnknown() && v.ValueString() != "" {
			return v.ValueString()
		}
		return os.Getenv(env)
	}
	c, err := newClient(settings{
		Endpoint: or(m.Endpoint, "HYPERFLEET_ENDPOINT"), Token: or(m.Token, "HYPERFLEET_TOKEN"),
		TokenFile: or(m.TokenFile, "HYPERFLEET_TOKEN_FILE"), CAFile: or(m.CAFile, "HYPERFLEET_CA_FILE"),
		AllowInsecureHTTP: m.AllowInsecureHTTP.ValueBool(),
	})
	if err != nil {
		resp.Diagnostics.AddError("HyperFleet provider", err.Error())
		return
	}
	resp.ResourceData, resp.DataSourceData = c, c
}

func (p *hyperfleetProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newVMResource, newSnapshotResource, newPoolScaleResource}
}

func (p *hyperfleetProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newHostsDataSource, newClustersDataSource, newVMsDataSource}
}
