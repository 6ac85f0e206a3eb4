package vspheresim

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
)

// BootVM is a VM that just powered on, with the cloud-init data of its guestinfo as cloud-init's
// VMware datasource would read it.
type BootVM struct {
	Host, Name, InstanceUUID, IP string
	UserData, MetaData           []byte
	NetworkConfig, VendorData    []byte
	// PowerOff shuts the VM down from inside the guest, like `poweroff`.
	PowerOff func()
}

// BootHook plays a guest: it runs from the VM's power-on until its context ends (the VM powered
// off) or it returns.
type BootHook func(ctx context.Context, vm BootVM) error

// decode reads a guestinfo value, base64 when its .encoding says so.
func decode(extra map[string]string, key string) []byte {
	v := extra[key]
	if extra[key+".encoding"] == "base64" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil
		}
		return b
	}
	return []byte(v)
}

// splitNetwork takes the network configuration out of VMware-datasource metadata ("network:" and
// "network.encoding: base64" lines), as cloud-init does.
func splitNetwork(meta []byte) (rest, network []byte) {
	var lines []string
	var encoded string
	for _, l := range strings.Split(string(meta), "\n") {
		switch {
		case strings.HasPrefix(l, "network.encoding:"):
		case strings.HasPrefix(l, "network:"):
			encoded = strings.TrimSpace(strings.TrimPrefix(l, "network:"))
		default:
			lines = append(lines, l)
		}
	}
	if encoded != "" {
		network, _ = base64.StdEncoding.DecodeString(encoded)
	}
	return []byte(strings.Join(lines, "\n")), network
}

// boot runs the hook for a VM that powered on with an address, until it powers off.
func (s *Simulator) boot(v VM, ip string) {
	if s.hook == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if _, running := s.booted[v.InstanceUUID]; running {
		s.mu.Unlock()
		cancel()
		return
	}
	s.booted[v.InstanceUUID] = cancel
	s.mu.Unlock()
	meta, network := splitNetwork(decode(v.ExtraConfig, "guestinfo.metadata"))
	vm := BootVM{Host: v.Host, Name: v.Name, InstanceUUID: v.InstanceUUID, IP: ip,
		UserData: decode(v.ExtraConfig, "guestinfo.userdata"), MetaData: meta, NetworkConfig: network,
		VendorData: decode(v.ExtraConfig, "guestinfo.vendordata"),
		PowerOff:   func() { s.powerOff(v.InstanceUUID) }}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.hook(ctx, vm)
	}()
}

func (s *Simulator) isBooted(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.booted[id]
	return ok
}

// halted ends the hook of a VM that is no longer powered on.
func (s *Simulator) halted(id string) {
	s.mu.Lock()
	cancel, ok := s.booted[id]
	delete(s.booted, id)
	s.mu.Unlock()
	if ok {
		cancel()
	}
}

// powerOff powers a VM off as its guest would, through vCenter's API.
func (s *Simulator) powerOff(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := s.client(ctx)
	if err != nil {
		return
	}
	defer func() { _ = c.Logout(ctx) }()
	instance := true
	ref, err := object.NewSearchIndex(c.Client).FindByUuid(ctx, nil, id, true, &instance)
	if err != nil || ref == nil {
		return
	}
	vm := object.NewVirtualMachine(c.Client, ref.Reference())
	if t, err := vm.PowerOff(ctx); err == nil {
		_ = t.Wait(ctx)
	}
}
