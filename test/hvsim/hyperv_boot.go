package hvsim

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// HyperVBootHook is called when a VM starts, with what its guest sees: the NoCloud files of the
// seed ISO in its DVD drive. When it returns the guest powers off. ctx is cancelled when the VM is
// turned off or shut down from outside, or the simulator closes.
type HyperVBootHook func(ctx context.Context, vm HyperVBootVM) error

// HyperVBootVM is a booting VM's identity and cloud-init data.
type HyperVBootVM struct {
	ID, Host, Name string
	IP, MAC        string
	UserData       []byte
	MetaData       []byte
	NetworkConfig  []byte
	VendorData     []byte
	// PowerOff shuts the VM down from inside the guest, like `poweroff`.
	PowerOff func()
}

type hvBootRun struct {
	cancel context.CancelFunc
	boot   int
	// shutdown asks a QEMU guest to shut down (nil: the hook's guest, whose shutdown is cancel).
	shutdown func()
}

// startBoot runs the boot hook, or under the QEMU backend a real guest, for a VM that just
// started. Called with h.mu held.
func (h *HyperV) startBoot(hh *hvHost, vm *hvVM) {
	hook := h.cfg.BootHook
	if (hook == nil && h.guests == nil) || h.closed {
		return
	}
	b := HyperVBootVM{ID: vm.id, Host: hh.name, Name: vm.name, IP: vm.ip}
	if len(vm.adapters) > 0 {
		b.MAC = vm.adapters[0].mac
	}
	var seed []byte
	for _, d := range vm.dvds {
		f := hh.files[key(d)]
		if d == "" || f == nil {
			continue
		}
		if h.guests != nil && seed == nil {
			seed = f.data // a real guest reads whatever the drive holds
		}
		files, err := readNoCloudISO(f.data)
		if err != nil {
			h.log.Debug("DVD is not a seed ISO", "vm", vm.id, "path", d, "err", err)
			continue
		}
		b.UserData, b.MetaData = files["user-data"], files["meta-data"]
		b.NetworkConfig, b.VendorData = files["network-config"], files["vendor-data"]
		break
	}
	ctx, cancel := context.WithCancel(context.Background())
	if old := h.boots[vm.id]; old != nil {
		old.cancel()
	}
	run := &hvBootRun{cancel: cancel, boot: vm.boot}
	if h.guests != nil {
		hook, run.shutdown = h.qemuBoot(hh, vm, seed)
	}
	h.boots[vm.id] = run
	host, id, boot := hh.name, vm.id, vm.boot
	b.PowerOff = func() { h.guestPowerOff(host, id, boot) }
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer cancel()
		if err := hook(ctx, b); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Warn("boot hook failed", "vm", id, "err", err)
		}
		h.guestPowerOff(host, id, boot)
	}()
}

// guestPowerOff turns the VM off if it is still in the same boot, and ends that boot.
func (h *HyperV) guestPowerOff(host, id string, boot int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hh := h.hosts[host]
	if hh == nil {
		return
	}
	vm := hh.vms[id]
	if vm == nil || vm.boot != boot || vm.state == hvOff {
		return
	}
	vm.state, vm.ip = hvOff, ""
	if b := h.boots[id]; b != nil && b.boot == boot {
		b.cancel() // the guest has halted: its hook's context ends
		delete(h.boots, id)
	}
}

// readNoCloudISO reads the NoCloud files from an ISO 9660 image labelled "cidata".
func readNoCloudISO(data []byte) (map[string][]byte, error) {
	const pvd = 16 * 2048
	if len(data) < pvd+72 || data[pvd] != 1 || string(data[pvd+1:pvd+6]) != "CD001" {
		return nil, errors.New("not an ISO 9660 image")
	}
	if label := strings.Trim(string(data[pvd+40:pvd+72]), " \x00"); !strings.EqualFold(label, "cidata") {
		return nil, errors.New("volume label is " + label + ", not cidata")
	}
	fsys, err := iso9660.Read(file.New(&isoFile{Reader: bytes.NewReader(data), size: int64(len(data))}, true), int64(len(data)), 0, 2048)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, name := range []string{"user-data", "meta-data", "network-config", "vendor-data"} {
		f, err := fsys.OpenFile("/"+name, 0)
		if err != nil {
			continue
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(f)
		_ = f.Close()
		if err == nil {
			out[name] = buf.Bytes()
		}
	}
	if _, ok := out["user-data"]; !ok {
		return nil, errors.New("no user-data on the ISO")
	}
	return out, nil
}

type isoFile struct {
	*bytes.Reader
	size int64
}

func (m *isoFile) Stat() (fs.FileInfo, error) { return isoInfo{size: m.size}, nil }
func (m *isoFile) Close() error               { return nil }

type isoInfo struct{ size int64 }

func (i isoInfo) Name() string       { return "cidata.iso" }
func (i isoInfo) Size() int64        { return i.size }
func (i isoInfo) Mode() fs.FileMode  { return 0o444 }
func (i isoInfo) ModTime() time.Time { return time.Time{} }
func (i isoInfo) IsDir() bool        { return false }
func (i isoInfo) Sys() any           { return nil }
