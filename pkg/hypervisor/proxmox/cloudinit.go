package proxmox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// putCloudInitISO builds a NoCloud ISO (volume label "cidata") in-process, uploads it to
// ISOStorage on the VM's node under a name derived from the cluster and VMID, and waits for the
// upload task: PVE copies the file into place in that task, and a VM started before it ends could
// read half an image. Configure attaches it as a CD-ROM on CloudInitDevice. This is the VM's only
// cloud-init data source: a PVE cloud-init drive on the template would be a second one, so
// templates should not carry it. Delete removes the ISO.
//
// go-proxmox's VirtualMachine.CloudInit does the same, but with a fixed temp path shared between
// processes, a one-second task poll, an extra node and storage lookup, a boot order rewrite the ISO
// does not need and a config write of its own.
func (p *Provider) putCloudInitISO(ctx context.Context, op string, ref hypervisor.VMRef, data hypervisor.CloudInitData) error {
	iso, err := buildNoCloudISO(data)
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "build NoCloud ISO: %v", err)
	}
	err = p.uploadISO(ctx, op, ref, iso)
	if errors.Is(err, hypervisor.ErrAlreadyExists) {
		// A retry after a partial failure; the data may differ (a new join token), so replace it.
		if err = p.deleteISO(ctx, op, ref); err == nil {
			err = p.uploadISO(ctx, op, ref, iso)
		}
	}
	return err
}

// isoName is the VM's cloud-init ISO file name. The VMID keeps VMs apart (PVE never has two VMs
// with one VMID, whatever installation made them); the namespace/name hash is the name older
// releases used, so the ISOs of VMs made before installation identities are still found.
func (p *Provider) isoName(ref hypervisor.VMRef) string {
	return fmt.Sprintf("hyperfleet-%s-%s-cloudinit.iso", strings.TrimPrefix(p.legacyTag, clusterTagPrefix), vmidSegment(ref.ID))
}

func (p *Provider) isoVolume(ref hypervisor.VMRef) string {
	return p.cfg.ISOStorage + ":iso/" + p.isoName(ref)
}

// EjectCloudInit ejects the VM's cloud-init ISO (the CD-ROM stays, empty: PVE changes the medium
// of a running VM at once, while removing the drive would wait for a reboot) and starts deleting
// the ISO, so the spent join token it holds is gone from the VM and from storage. Only our own ISO is
// ejected; anything else in that slot is left alone.
func (p *Provider) EjectCloudInit(ctx context.Context, ref hypervisor.VMRef) error {
	op := opName("eject cloud-init of", ref)
	// One config read both proves ownership and shows the drive; the write carries its digest.
	_, cfg, err := p.ownedConfig(ctx, op, ref)
	if err != nil {
		return err
	}
	if drive := cfg[p.cfg.CloudInitDevice]; strings.HasPrefix(drive, p.isoVolume(ref)+",") || drive == p.isoVolume(ref) {
		params := map[string]any{p.cfg.CloudInitDevice: "none,media=cdrom"}
		if d := cfg["digest"]; d != "" {
			params["digest"] = d
		}
		if err := p.put(ctx, op, vmPath(ref, "/config"), params, nil); err != nil {
			return err
		}
	}
	// The deletion's task is not followed: the VM no longer uses the ISO, and Delete removes it
	// again (a missing ISO is fine there), so a deletion that failed leaves nothing behind the VM.
	// Following it cost about three task reads per runner.
	_, err = p.startDeleteISO(ctx, op, ref)
	return err
}

func (p *Provider) uploadISO(ctx context.Context, op string, ref hypervisor.VMRef, iso []byte) error {
	path := fmt.Sprintf("/nodes/%s/storage/%s/upload", ref.Node, p.cfg.ISOStorage)
	var id string
	err := p.call(ctx, op, func(context.Context) error {
		// UploadReader takes no context; the HTTP client's timeout (Config.Timeout) bounds it.
		return p.client.UploadReader(path, map[string]string{"content": "iso"}, p.isoName(ref),
			bytes.NewReader(iso), int64(len(iso)), &id)
	})
	if err != nil || id == "" {
		return err
	}
	return p.waitTask(ctx, op, id)
}

// buildNoCloudISO renders the NoCloud seed: an ISO 9660 image labelled "cidata" holding user-data,
// meta-data and, when given, network-config and vendor-data.
func buildNoCloudISO(data hypervisor.CloudInitData) ([]byte, error) {
	dir, err := os.MkdirTemp("", "hyperfleet-cidata-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	workspace := filepath.Join(dir, "work")
	if err := os.Mkdir(workspace, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "cidata.iso")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fs, err := iso9660.Create(file.New(f, false), 0, 0, 2048, workspace)
	if err != nil {
		return nil, err
	}
	files := map[string]string{"user-data": data.UserData, "meta-data": data.MetaData}
	if data.NetworkConfig != "" {
		files["network-config"] = data.NetworkConfig
	}
	if data.VendorData != "" {
		files["vendor-data"] = data.VendorData
	}
	for name, content := range files {
		w, err := fs.OpenFile("/"+name, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(content)); err != nil {
			return nil, err
		}
		// go-diskfs records the size only for closed files.
		if err := w.Close(); err != nil {
			return nil, err
		}
	}
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, Joliet: true, VolumeIdentifier: "cidata"}); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
