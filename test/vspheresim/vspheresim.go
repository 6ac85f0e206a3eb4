// Package vspheresim runs VMware's own vSphere simulator (govmomi's vcsim, the simulator package)
// for HyperFleet's tests and local fleet: a vCenter with one datacenter, one compute cluster of
// ESXi hosts, a datastore, a port group and the templates the tests clone, served over HTTPS on
// loopback with a certificate the caller is handed the CA of. Clients talk to it over the wire
// with govmomi's SOAP client, as they would to a vCenter.
//
// What vcsim does not do by itself, this package plays: VMware Tools in a powered-on guest reports
// an IP address (as a booted guest's tools would), so a VM gets an address once it runs; a clone
// keeps its clone spec's configuration; a distributed port group VMs use cannot be destroyed.
package vspheresim

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	_ "github.com/vmware/govmomi/vapi/simulator" // vCenter's vAPI endpoints (tags)
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25/types"
)

// Template is a template the simulator starts with.
type Template struct {
	Name string
	// Tags go in the template's hyperfleet.tags advanced setting.
	Tags []string
	// VSphereTags are vSphere tags (vAPI tagging) attached to the template, "category:name".
	VSphereTags []string
	// NoSnapshot leaves the template without a snapshot: its clones are full copies.
	NoSnapshot bool
}

// Config shapes the simulated vCenter.
type Config struct {
	// Hosts is the number of ESXi hosts in the compute cluster; 0 is 3.
	Hosts int
	// Username and Password are the only credentials accepted; empty are
	// administrator@vsphere.local and Simulat0r!.
	Username, Password string
	// Templates; nil is one template, ubuntu-2404-runner, tagged runner, with a snapshot.
	Templates []Template
	// NoGuestIP keeps powered-on VMs without an address.
	NoGuestIP bool
	// BootHook, when set, plays each VM's guest from its power-on, once it has an address.
	BootHook BootHook
	// Listen is the loopback address the vCenter is served on; empty picks a free port.
	Listen string
}

// Simulator is a running simulated vCenter.
type Simulator struct {
	model  *simulator.Model
	server *simulator.Server
	// URL is the vCenter's endpoint (https://127.0.0.1:port), without the SDK path.
	URL string
	// CA is the PEM certificate the endpoint's TLS certificate is verified with.
	CA                 []byte
	Username, Password string
	// Datacenter, Cluster, Datastore, Switch and Network name the inventory the simulator made:
	// Network is a distributed port group on the distributed switch Switch.
	Datacenter, Cluster, Datastore, Switch, Network string

	stop chan struct{}
	wg   sync.WaitGroup

	hook   BootHook
	mu     sync.Mutex
	booted map[string]context.CancelFunc

	front   *httptest.Server
	callsMu sync.Mutex
	calls   map[string]int
}

// Start starts a simulator.
func Start(cfg Config) (*Simulator, error) {
	if cfg.Hosts == 0 {
		cfg.Hosts = 3
	}
	if cfg.Username == "" {
		cfg.Username, cfg.Password = "administrator@vsphere.local", "Simulat0r!"
	}
	if cfg.Templates == nil {
		cfg.Templates = []Template{{Name: "ubuntu-2404-runner", Tags: []string{"runner"}}}
	}
	m := simulator.VPX()
	m.Host = 0
	m.ClusterHost = cfg.Hosts
	m.Machine = len(cfg.Templates) + 1 // one more: a VM that is not HyperFleet's
	m.Autostart = false
	if err := m.Create(); err != nil {
		return nil, fmt.Errorf("vcsim model: %w", err)
	}
	m.Service.TLS = new(tls.Config)
	// The vAPI (REST) endpoints too: vSphere's tags.
	m.Service.RegisterEndpoints = true
	m.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(cfg.Username, cfg.Password)}
	server := m.Service.NewServer()
	s := &Simulator{model: m, server: server, Username: cfg.Username, Password: cfg.Password,
		stop: make(chan struct{}), hook: cfg.BootHook, booted: map[string]context.CancelFunc{}, calls: map[string]int{}}
	if err := s.serveFront(m.Service.ServeMux, cfg.Listen); err != nil {
		server.Close()
		m.Remove()
		return nil, err
	}
	if err := s.setUp(cfg); err != nil {
		s.Close()
		return nil, err
	}
	s.applyCloneSpecs()
	s.ResetCalls()
	s.wg.Add(1)
	go s.tools(!cfg.NoGuestIP)
	return s, nil
}

// StartForTest starts a simulator that the test's end stops.
func StartForTest(t testing.TB, cfg Config) *Simulator {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the simulator.
func (s *Simulator) Close() {
	select {
	case <-s.stop:
		return
	default:
		close(s.stop)
	}
	s.mu.Lock()
	for _, cancel := range s.booted {
		cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.front.Close()
	s.server.Close()
	s.model.Remove()
}

// client logs in as the administrator, for the simulator's own set-up.
func (s *Simulator) client(ctx context.Context) (*govmomi.Client, error) {
	u, err := url.Parse(s.URL + "/sdk")
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword(s.Username, s.Password)
	return govmomi.NewClient(ctx, u, true)
}

// asAdmin runs fn with a session of the simulator's administrator and a finder set to the
// datacenter, as a person changing the inventory through vCenter's API would.
func (s *Simulator) asAdmin(fn func(ctx context.Context, c *govmomi.Client, f *find.Finder, dc *object.Datacenter) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(ctx) }()
	f := find.NewFinder(c.Client, true)
	dc, err := f.DefaultDatacenter(ctx)
	if err != nil {
		return err
	}
	f.SetDatacenter(dc)
	return fn(ctx, c, f, dc)
}

// setUp names the inventory and turns the model's first VMs into the configured templates.
func (s *Simulator) setUp(cfg Config) error {
	return s.asAdmin(func(ctx context.Context, c *govmomi.Client, f *find.Finder, dc *object.Datacenter) error {
		s.Datacenter = dc.Name()
		cluster, err := f.DefaultClusterComputeResource(ctx)
		if err != nil {
			return err
		}
		s.Cluster = cluster.Name()
		ds, err := f.DefaultDatastore(ctx)
		if err != nil {
			return err
		}
		s.Datastore = ds.Name()
		nets, err := f.NetworkList(ctx, "*")
		if err != nil {
			return err
		}
		for _, n := range nets {
			name := n.GetInventoryPath()[strings.LastIndex(n.GetInventoryPath(), "/")+1:]
			switch {
			case n.Reference().Type == "DistributedVirtualPortgroup" && !strings.Contains(name, "Uplink") && s.Network == "":
				s.Network = name
			case strings.HasSuffix(n.Reference().Type, "DistributedVirtualSwitch") && s.Switch == "":
				s.Switch = name
			}
		}
		vms, err := f.VirtualMachineList(ctx, "*")
		if err != nil {
			return err
		}
		if len(vms) < len(cfg.Templates) {
			return fmt.Errorf("vcsim made %d VMs for %d templates", len(vms), len(cfg.Templates))
		}
		for i, tmpl := range cfg.Templates {
			if err := makeTemplate(ctx, vms[i], tmpl); err != nil {
				return fmt.Errorf("template %s: %w", tmpl.Name, err)
			}
			if err := attachTags(ctx, c, url.UserPassword(s.Username, s.Password), vms[i], tmpl.VSphereTags); err != nil {
				return fmt.Errorf("tagging template %s: %w", tmpl.Name, err)
			}
		}
		return nil
	})
}

// attachTags attaches vSphere tags ("category:name") to vm through the vAPI, making their
// categories and tags as needed.
func attachTags(ctx context.Context, c *govmomi.Client, user *url.Userinfo, vm *object.VirtualMachine, want []string) error {
	if len(want) == 0 {
		return nil
	}
	rc := rest.NewClient(c.Client)
	if err := rc.Login(ctx, user); err != nil {
		return err
	}
	defer func() { _ = rc.Logout(ctx) }()
	m := tags.NewManager(rc)
	for _, ct := range want {
		category, name, ok := strings.Cut(ct, ":")
		if !ok {
			return fmt.Errorf("vSphere tag %q is not category:name", ct)
		}
		catID, err := m.CreateCategory(ctx, &tags.Category{Name: category, Cardinality: "MULTIPLE", AssociableTypes: []string{"VirtualMachine"}})
		if err != nil {
			existing, gerr := m.GetCategory(ctx, category)
			if gerr != nil {
				return err
			}
			catID = existing.ID
		}
		tagID, err := m.CreateTag(ctx, &tags.Tag{Name: name, CategoryID: catID})
		if err != nil {
			existing, gerr := m.GetTagForCategory(ctx, name, catID)
			if gerr != nil {
				return err
			}
			tagID = existing.ID
		}
		if err := m.AttachTag(ctx, tagID, vm.Reference()); err != nil {
			return err
		}
	}
	return nil
}

func makeTemplate(ctx context.Context, vm *object.VirtualMachine, tmpl Template) error {
	wait := func(t *object.Task, err error) error {
		if err != nil {
			return err
		}
		return t.Wait(ctx)
	}
	if err := wait(vm.Rename(ctx, tmpl.Name)); err != nil {
		return err
	}
	if len(tmpl.Tags) > 0 {
		if err := wait(vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: "hyperfleet.tags", Value: strings.Join(tmpl.Tags, ",")}}})); err != nil {
			return err
		}
	}
	if !tmpl.NoSnapshot {
		if err := wait(vm.CreateSnapshot(ctx, "base", "the disk state linked clones share", false, false)); err != nil {
			return err
		}
	}
	return vm.MarkAsTemplate(ctx)
}

// tools plays VMware Tools and the guests: a powered-on VM without an address reports one,
// 10.56.x.y (when guestIP), and boots (the BootHook) once it has one; a VM powered off halts.
func (s *Simulator) tools(guestIP bool) {
	defer s.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	next := 10
	ctx := s.model.Service.Context
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		for _, e := range ctx.Map.All("VirtualMachine") {
			vm := asVM(e)
			if vm == nil {
				continue
			}
			var id, ip string
			on := false
			ctx.WithLock(vm, func() {
				if vm.Config == nil {
					return
				}
				id = strings.ToLower(vm.Config.InstanceUuid)
				on = vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
				if on && guestIP && vm.Guest != nil && vm.Guest.IpAddress == "" {
					addr := net.IPv4(10, 56, byte(next/250), byte(next%250+2)).String()
					next++
					vm.Guest.IpAddress = addr
					vm.Guest.ToolsRunningStatus = string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
					if len(vm.Guest.Net) > 0 {
						vm.Guest.Net[0].IpAddress = []string{addr}
					}
				}
				if vm.Guest != nil {
					ip = vm.Guest.IpAddress
				}
				if !on && vm.Guest != nil {
					vm.Guest.IpAddress = "" // a guest that is down reports nothing
					for i := range vm.Guest.Net {
						vm.Guest.Net[i].IpAddress = nil
					}
				}
			})
			switch {
			case on && ip != "" && s.hook != nil && !s.isBooted(id):
				for _, v := range s.VMs() {
					if v.InstanceUUID == id {
						s.boot(v, ip)
					}
				}
			case !on && id != "":
				s.halted(id)
			}
		}
	}
}

// VM is a VM as the simulator holds it, for assertions.
type VM struct {
	Name, InstanceUUID, Host string
	PowerState               types.VirtualMachinePowerState
	Template                 bool
	ExtraConfig              map[string]string
	// Snapshots are the names in the VM's snapshot tree, parents first.
	Snapshots []string
	// DiskGiB are the sizes of its virtual disks, MACs the addresses of its network adapters and
	// Networks the port groups (or standard networks) they are connected to, each in device order.
	DiskGiB  []int64
	MACs     []string
	Networks []string
}

// VMs lists every VM and template the simulator holds.
func (s *Simulator) VMs() []VM {
	ctx := s.model.Service.Context
	var out []VM
	for _, e := range ctx.Map.All("VirtualMachine") {
		vm := asVM(e)
		if vm == nil {
			continue
		}
		ctx.WithLock(vm, func() {
			v := VM{Name: vm.Name, PowerState: vm.Runtime.PowerState, ExtraConfig: map[string]string{}}
			if vm.Config != nil {
				v.InstanceUUID = strings.ToLower(vm.Config.InstanceUuid)
				v.Template = vm.Config.Template
				for _, o := range vm.Config.ExtraConfig {
					if ov := o.GetOptionValue(); ov != nil {
						v.ExtraConfig[ov.Key] = fmt.Sprint(ov.Value)
					}
				}
			}
			if vm.Config != nil {
				for _, d := range vm.Config.Hardware.Device {
					switch dev := d.(type) {
					case *types.VirtualDisk:
						v.DiskGiB = append(v.DiskGiB, dev.CapacityInKB>>20)
					case types.BaseVirtualEthernetCard:
						v.MACs = append(v.MACs, dev.GetVirtualEthernetCard().MacAddress)
						v.Networks = append(v.Networks, networkOf(ctx, dev.GetVirtualEthernetCard()))
					}
				}
			}
			if vm.Snapshot != nil {
				var walk func([]types.VirtualMachineSnapshotTree)
				walk = func(list []types.VirtualMachineSnapshotTree) {
					for _, sn := range list {
						v.Snapshots = append(v.Snapshots, sn.Name)
						walk(sn.ChildSnapshotList)
					}
				}
				walk(vm.Snapshot.RootSnapshotList)
			}
			if vm.Runtime.Host != nil {
				if h, ok := ctx.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem); ok {
					v.Host = h.Name
				}
			}
			out = append(out, v)
		})
	}
	return out
}

// asVM is the simulator's VM behind a registry entry, wrapped or not.
func asVM(e any) *simulator.VirtualMachine {
	switch vm := e.(type) {
	case *simulator.VirtualMachine:
		return vm
	case *cloneSource:
		return vm.VirtualMachine
	}
	return nil
}
