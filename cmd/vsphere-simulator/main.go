// Command vsphere-simulator runs VMware's vCenter simulator (govmomi's vcsim, through
// test/vspheresim) as a process, for local fleets and end-to-end tests: one datacenter, a compute
// cluster of ESXi hosts, a datastore, a port group and HyperFleet's runner template, served over
// HTTPS on loopback with a CA of its own.
//
//	vsphere-simulator --listen 127.0.0.1:8989 --hosts 3 --user 'administrator@vsphere.local=S3cret!' --ca-out /tmp/vc-ca.pem
//
// It prints the endpoint, the credentials and the inventory's names, then serves until it is
// interrupted. VMs get an address from the simulated VMware Tools once they run; no guest runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vsphere-simulator:", err)
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends, then stops.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vsphere-simulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8989", "loopback address to serve the vCenter on (/sdk)")
	hosts := fs.Int("hosts", 3, "ESXi hosts in the compute cluster")
	user := fs.String("user", "administrator@vsphere.local=Simulat0r!", "the one account, NAME=PASSWORD")
	caOut := fs.String("ca-out", "", "write the CA certificate PEM clients should trust to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name, password, ok := strings.Cut(*user, "=")
	if !ok || name == "" || password == "" {
		return errors.New("--user must be NAME=PASSWORD")
	}
	if *hosts < 1 || *hosts > 32 {
		return fmt.Errorf("--hosts %d: want 1 to 32", *hosts)
	}
	sim, err := vspheresim.Start(vspheresim.Config{Hosts: *hosts, Username: name, Password: password, Listen: *listen})
	if err != nil {
		return err
	}
	defer sim.Close()
	if *caOut != "" {
		if err := os.WriteFile(*caOut, sim.CA, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "vCenter simulator at %s (user %s; datacenter %s, compute cluster %s, datastore %s, port group %s, template ubuntu-2404-runner)\n",
		sim.URL, name, sim.Datacenter, sim.Cluster, sim.Datastore, sim.Network)
	<-ctx.Done()
	return nil
}
