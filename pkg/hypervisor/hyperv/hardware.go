package hyperv

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Extra disks and network interfaces. Hyper-V's generation 2 VMs have synthetic devices only: one
// kind of network adapter and SCSI disks. What a claim may say that Hyper-V has no equivalent for
// is refused with ErrInvalid before anything on the host changes, rather than silently dropped:
//
//   - a disk's bus other than scsi (virtio, sata): a generation 2 VM has no such controller;
//   - a disk's storage that cannot name a directory storage (Hyper-V has no other kind); a
//     storage name that can is looked up in the host's storage index when the disk is made, and
//     one the host does not record is refused then (ErrNotFound), before any disk is made;
//   - a NIC's model other than virtio (the paravirtual default, which Hyper-V's synthetic adapter
//     is): e1000, rtl8139 and vmxnet3 are emulated devices Hyper-V does not offer;
//   - a NIC's firewall flag: Hyper-V has no per-adapter firewall to turn on;
//   - a NIC without a bridge: on Hyper-V the bridge is the virtual switch, and the provider has no
//     default switch.
//
// A NIC's MTU is not a Hyper-V adapter setting (a virtual switch passes what the host's NIC
// takes); the guest sets it from its network-config, which carries it.

// Module functions of the hardware.
const (
	fnAddDisks    = "Add-HFDisks"
	fnSetAdapters = "Set-HFAdapters"
)

// diskInput is one disk of Add-HFDisks: it goes to SCSI controller 0 at Lun, the boot disk being
// at 0, so the guest finds spec.disks[i] at LUN i+1. Its file is made in the folder of the
// directory storage Storage, or in the VHD folder when Storage is empty.
type diskInput struct {
	Name      string
	SizeBytes int64
	Lun       int
	Storage   string `json:",omitempty"`
}

// addDisksInput is Add-HFDisks' argument. StorageIndex is the host's storage index, where the
// module finds the folder of each disk's storage; set when a disk names one.
type addDisksInput struct {
	ID           string `json:"Id"`
	Expect       expectation
	VHDDirectory string
	StorageIndex string `json:",omitempty"`
	Disks        []diskInput
}

// adapterInput is one network adapter of Set-HFAdapters; MacAddress is written as Hyper-V does,
// twelve hex digits without separators.
type adapterInput struct {
	Name       string
	SwitchName string
	MacAddress string
	VlanID     int `json:"VlanId"`
}

// setAdaptersInput is Set-HFAdapters' argument: every adapter the VM keeps, in order.
type setAdaptersInput struct {
	ID       string `json:"Id"`
	Expect   expectation
	Adapters []adapterInput
}

// maxDisks and maxAdapters bound one call's input, so it fits on a command line: the claim's
// limits (8 each).
const (
	maxDisks    = 8
	maxAdapters = 8
	// maxVHDSizeGiB is VHDX's limit, 64 TiB.
	maxVHDSizeGiB = 64 << 10
)

var (
	diskNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// switchNameRe is a virtual switch name HyperFleet passes: no quotes, wildcards or separators.
	switchNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_. \-]{0,63}$`)
	adapterName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$`)
	macRe        = regexp.MustCompile(`^[0-9A-Fa-f][02468aceACE](:[0-9A-Fa-f]{2}){5}$`)
)

// diskInputs checks the extra disks and renders them for Add-HFDisks.
func diskInputs(op string, disks []hypervisor.ExtraDisk) ([]diskInput, error) {
	if len(disks) > maxDisks {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "%d extra disks: HyperFleet adds at most %d", len(disks), maxDisks)
	}
	seen := map[string]bool{}
	out := make([]diskInput, 0, len(disks))
	for i, d := range disks {
		switch {
		case !diskNameRe.MatchString(d.Name) || len(d.Name) > 20:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "disk %q: the name is not a lowercase DNS label of at most 20 characters (it names the disk's VHDX file)", d.Name)
		case seen[d.Name]:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "disk %q is listed twice", d.Name)
		case d.SizeGiB <= 0 || d.SizeGiB > maxVHDSizeGiB:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "disk %s: size %d GiB is not between 1 GiB and 64 TiB (a VHDX's limit)", d.Name, d.SizeGiB)
		case d.Storage != "" && !storageNameRe.MatchString(d.Storage):
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"disk %s: storage %q cannot name a Hyper-V directory storage (a VMStorage's folder); name one, or leave storage unset for the HypervisorCluster's VHD folder (hyperv.vhdPath)", d.Name, d.Storage)
		case d.Bus != "" && d.Bus != "scsi":
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"disk %s: bus %q: a Hyper-V generation 2 VM has SCSI disks only; use bus scsi (the default)", d.Name, d.Bus)
		}
		seen[d.Name] = true
		out = append(out, diskInput{Name: d.Name, SizeBytes: int64(d.SizeGiB) << 30, Lun: i + 1, Storage: d.Storage})
	}
	return out, nil
}

// adapterInputs checks the NICs and renders them for Set-HFAdapters.
func adapterInputs(op string, nics []hypervisor.NIC) ([]adapterInput, error) {
	if len(nics) > maxAdapters {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "%d NICs: HyperFleet gives a VM at most %d", len(nics), maxAdapters)
	}
	names, macs := map[string]bool{}, map[string]bool{}
	out := make([]adapterInput, 0, len(nics))
	for i, n := range nics {
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("nic%d", i)
		}
		mac := strings.ToUpper(strings.ReplaceAll(n.MAC, ":", ""))
		switch {
		case !adapterName.MatchString(name):
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %d: name %q cannot name a Hyper-V network adapter", i, name)
		case names[strings.ToLower(name)]:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %d: name %q is used twice", i, name)
		case !macRe.MatchString(n.MAC):
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %s: MAC %q is not a unicast MAC address", name, n.MAC)
		case macs[mac]:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %s: MAC %s is used twice", name, n.MAC)
		case n.Bridge == "":
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"NIC %s names no bridge: on Hyper-V the bridge is the virtual switch the adapter connects to, and there is no default", name)
		case !switchNameRe.MatchString(n.Bridge):
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %s: %q cannot name a Hyper-V virtual switch", name, n.Bridge)
		case n.VLAN < 0 || n.VLAN > 4094:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "NIC %s: VLAN %d is not between 1 and 4094", name, n.VLAN)
		case n.Model != "" && n.Model != "virtio":
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"NIC %s: model %q: Hyper-V gives a generation 2 VM synthetic network adapters only; leave model unset (or virtio, the paravirtual default)", name, n.Model)
		case n.Firewall:
			return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op,
				"NIC %s: firewall: Hyper-V has no per-adapter firewall to turn on (use the guest's firewall, or the switch's port ACLs outside HyperFleet); remove the flag", name)
		}
		names[strings.ToLower(name)], macs[mac] = true, true
		out = append(out, adapterInput{Name: name, SwitchName: n.Bridge, MacAddress: mac, VlanID: n.VLAN})
	}
	return out, nil
}

// hardwareInputs checks a ConfigSpec's extra disks and NICs; nil slices when it has none.
func hardwareInputs(op string, spec hypervisor.ConfigSpec) ([]diskInput, []adapterInput, error) {
	if len(spec.PCIDevices) > 0 {
		return nil, nil, hypervisor.Errorf(hypervisor.ErrUnsupported, op, "the Hyper-V provider does not pass PCI devices through")
	}
	var disks []diskInput
	var adapters []adapterInput
	var err error
	if len(spec.ExtraDisks) > 0 {
		if disks, err = diskInputs(op, spec.ExtraDisks); err != nil {
			return nil, nil, err
		}
	}
	if len(spec.NICs) > 0 {
		if adapters, err = adapterInputs(op, spec.NICs); err != nil {
			return nil, nil, err
		}
	}
	return disks, adapters, nil
}

// applyHardware gives an owned VM its network adapters, then creates the extra disks it lacks,
// each a call of its own so neither input outgrows a command line.
func (p *Provider) applyHardware(ctx context.Context, op string, h *host, id string, expect expectation, disks []diskInput, adapters []adapterInput) error {
	if len(adapters) > 0 {
		if err := h.call(ctx, op, fnSetAdapters, setAdaptersInput{ID: id, Expect: expect, Adapters: adapters}, nil); err != nil {
			return err
		}
	}
	if len(disks) > 0 {
		in := addDisksInput{ID: id, Expect: expect, VHDDirectory: p.cfg.VHDDirectory, Disks: disks}
		if slices.ContainsFunc(disks, func(d diskInput) bool { return d.Storage != "" }) {
			in.StorageIndex = p.cfg.StorageIndex
		}
		return h.call(ctx, op, fnAddDisks, in, nil)
	}
	return nil
}

var _ hypervisor.HardwareChecker = (*Provider)(nil)

// CheckHardware refuses, before a VM is made, the hardware Configure would refuse: what Hyper-V
// has no equivalent for (hardwareInputs).
func (p *Provider) CheckHardware(spec hypervisor.ConfigSpec) error {
	if _, _, err := hardwareInputs("check hardware", spec); err != nil {
		return err
	}
	_, err := policyInputs("check hardware", spec.NICs)
	return err
}
