package cloudinit

import (
	"os"
	"path/filepath"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
)

// NoCloudISO renders a NoCloud seed: an ISO 9660 image (Rock Ridge and Joliet) labelled "cidata"
// holding user-data and meta-data and, when not empty, network-config and vendor-data. cloud-init
// reads it on Linux guests, and cloudbase-init on Windows guests with its NoCloudConfigDriveService.
func NoCloudISO(userData, metaData, networkConfig, vendorData string) ([]byte, error) {
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
	files := map[string]string{"user-data": userData, "meta-data": metaData}
	if networkConfig != "" {
		files["network-config"] = networkConfig
	}
	if vendorData != "" {
		files["vendor-data"] = vendorData
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
