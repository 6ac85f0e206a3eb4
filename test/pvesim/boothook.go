package pvesim

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// BootHook is called when a VM starts, with the VM's cloud-init data. When it
// returns, the VM powers off, like a guest whose OS halted. ctx is cancelled
// when the VM is stopped or destroyed from outside (or the simulator closes).
type BootHook func(ctx context.Context, vm BootVM) error

// BootVM is what a booting VM's guest sees: its identity and cloud-init
// NoCloud data, read from the attached "cidata" ISO (or, failing that, from
// cicustom snippets present on a simulated storage).
type BootVM struct {
	VMID          int
	Node          string
	Name          string
	Tags          []string
	IP            string
	MAC           string
	UserData      []byte
	MetaData      []byte
	NetworkConfig []byte
	VendorData    []byte
	// PowerOff shuts the VM down from inside the guest, like `poweroff`.
	PowerOff func()
}

type bootRun struct {
	cancel context.CancelFunc
	pid    int
	// qemu is the running QEMU's control sockets (QEMU backend only).
	qemu *qemuVM
}

// startBoot launches the boot hook, or under the QEMU backend a real guest, for a VM that just
// started. Called with s.mu held.
func (s *Simulator) startBoot(vm *vmState) {
	hook := s.cfg.BootHook
	var qvm *qemuVM
	if s.qemu != nil {
		qmp, qga := s.qemu.Sockets(strconv.Itoa(vm.vmid))
		qvm = &qemuVM{qmp: qmp, qga: qga}
		hook = s.qemuBoot(vm.vmid, s.seedISO(vm), netMAC(vm.conf["net0"]), agentEnabled(vm))
	}
	if hook == nil {
		return
	}
	bvm := s.bootVM(vm)
	ctx, cancel := context.WithCancel(context.Background())
	run := &bootRun{cancel: cancel, pid: vm.pid, qemu: qvm}
	if old, ok := s.boots[vm.vmid]; ok {
		old.cancel()
	}
	s.boots[vm.vmid] = run
	vmid, pid := vm.vmid, vm.pid
	bvm.PowerOff = func() { s.guestPowerOff(vmid, pid) }
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		err := hook(ctx, bvm)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("boot hook failed", "vmid", vmid, "err", err)
		}
		s.guestPowerOff(vmid, pid)
	}()
}

// guestPowerOff stops the VM if it is still the same boot (same PID).
func (s *Simulator) guestPowerOff(vmid, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[vmid]
	if !ok || vm.status != "running" || vm.pid != pid {
		return
	}
	s.stopVM(vm)
	s.log.Info("guest powered off", "vmid", vmid)
}

func (s *Simulator) bootVM(vm *vmState) BootVM {
	b := BootVM{VMID: vm.vmid, Node: vm.node, Name: vm.conf["name"], IP: vm.ip}
	if t := vm.conf["tags"]; t != "" {
		b.Tags = strings.Split(t, ";")
	}
	if net0, ok := vm.conf["net0"]; ok {
		for _, part := range strings.Split(net0, ",") {
			if _, v, ok := strings.Cut(part, "="); ok && macRe.MatchString(v) {
				b.MAC = strings.ToLower(v)
			}
		}
	}
	for _, k := range sortedKeys(vm.conf) {
		d := parseDrive(vm.conf[k])
		if !isDriveKey(k) || !d.isCDROM() || d.storage == "" {
			continue
		}
		v := s.getVolumeOn(vm.node, d.volid())
		if v == nil || v.content != "iso" {
			continue
		}
		files, err := readNoCloudISO(v.data)
		if err != nil {
			s.log.Debug("cdrom is not a cloud-init ISO", "vmid", vm.vmid, "volume", v.volid, "err", err)
			continue
		}
		b.UserData, b.MetaData = files["user-data"], files["meta-data"]
		b.NetworkConfig, b.VendorData = files["network-config"], files["vendor-data"]
		return b
	}
	if ci := vm.conf["cicustom"]; ci != "" {
		for _, part := range strings.Split(ci, ",") {
			k, volid, ok := strings.Cut(part, "=")
			if !ok {
				continue
			}
			v := s.getVolumeOn(vm.node, volid)
			if v == nil {
				continue
			}
			switch k {
			case "user":
				b.UserData = v.data
			case "meta":
				b.MetaData = v.data
			case "network":
				b.NetworkConfig = v.data
			case "vendor":
				b.VendorData = v.data
			}
		}
	}
	return b
}

// seedISO is the ISO image in the VM's first CD-ROM drive holding one (nil without), as QEMU
// would be given it: the NoCloud seed HyperFleet uploaded.
func (s *Simulator) seedISO(vm *vmState) []byte {
	for _, k := range sortedKeys(vm.conf) {
		d := parseDrive(vm.conf[k])
		if !isDriveKey(k) || !d.isCDROM() || d.storage == "" {
			continue
		}
		if v := s.getVolumeOn(vm.node, d.volid()); v != nil && v.content == "iso" {
			return append([]byte(nil), v.data...)
		}
	}
	return nil
}

// readNoCloudISO reads the NoCloud files from an ISO9660 image labelled "cidata".
func readNoCloudISO(data []byte) (map[string][]byte, error) {
	const pvd = 16 * 2048
	if len(data) < pvd+72 || data[pvd] != 1 || string(data[pvd+1:pvd+6]) != "CD001" {
		return nil, errors.New("not an ISO9660 image")
	}
	if label := strings.Trim(string(data[pvd+40:pvd+72]), " \x00"); !strings.EqualFold(label, "cidata") {
		return nil, errors.New("volume label is " + label + ", not cidata")
	}
	fsys, err := iso9660.Read(file.New(&memFile{Reader: bytes.NewReader(data), size: int64(len(data))}, true), int64(len(data)), 0, 2048)
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

// memFile adapts an in-memory image to go-diskfs' read-only backend.
type memFile struct {
	*bytes.Reader
	size int64
}

func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{size: m.size}, nil }
func (m *memFile) Close() error               { return nil }

type memInfo struct{ size int64 }

func (i memInfo) Name() string       { return "cidata.iso" }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
