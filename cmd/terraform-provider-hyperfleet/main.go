// Command terraform-provider-hyperfleet is HyperFleet's Terraform provider (pkg/terraform): VMs on
// every hypervisor HyperFleet manages, through the console's API as the signed-in person.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/hyperfleet-io/hyperfleet/pkg/terraform"
)

// version is set at build time.
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers such as delve")
	flag.Parse()
	err := providerserver.Serve(context.Background(), terraform.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/hyperfleet-io/hyperfleet",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
