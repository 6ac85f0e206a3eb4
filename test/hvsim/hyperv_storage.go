package hvsim

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
)

// Storages (Set-HFStorage, Remove-HFStorage, Get-HFStorage), as the module runs them with
// Test-Path, New-Item -ItemType Directory, Set-Content, Get-Content, Get-ChildItem -Force,
// Remove-Item and Get-Volume -FilePath. Folders the module makes are kept (dirs); a folder also
// exists while files are under it. A volume is mounted at a drive's root or a cluster shared
// volume's folder (AddVolume); its free space is its size less the files on it. A VM's full copy
// and extra disks go into a storage's folder found in the index (Get-HFStorageFolder), so they
// count on its volume.

const storageBlock = "```hyperfleet-storage"

const storageMarkerFile = ".hyperfleet-owner"

// defaultVolumeSize is C:'s size on a simulated host, 1 TiB.
const defaultVolumeSize = 1 << 40

// isDir is Test-Path -PathType Container.
func (hh *hvHost) isDir(path string) bool {
	k := key(strings.TrimRight(path, `\`))
	if _, ok := hh.dirs[k]; ok {
		return true
	}
	for fk := range hh.files {
		if strings.HasPrefix(fk, k+`\`) {
			return true
		}
	}
	return false
}

// children is Get-ChildItem -Force: the names of the files and folders right under path.
func (hh *hvHost) children(path string) []string {
	prefix := key(strings.TrimRight(path, `\`)) + `\`
	seen := map[string]bool{}
	var out []string
	add := func(k, p string) {
		if !strings.HasPrefix(k, prefix) {
			return
		}
		rest := p[len(prefix):]
		name, _, _ := strings.Cut(rest, `\`)
		if name != "" && !seen[strings.ToLower(name)] {
			seen[strings.ToLower(name)] = true
			out = append(out, name)
		}
	}
	for k, f := range hh.files {
		add(k, f.path)
	}
	for k, p := range hh.dirs {
		add(k, p)
	}
	sort.Strings(out)
	return out
}

// newDirectory is New-Item -ItemType Directory (without -Force: an existing item is refused).
func (hh *hvHost) newDirectory(path string, force bool) *hvError {
	if !isAbsWindowsPath(path) {
		return refuse("NotFound", "Cannot find drive. A drive with the name '%s' does not exist.", path)
	}
	if hh.files[key(path)] != nil || (!force && hh.isDir(path)) {
		return refuse("AlreadyExists", "An item with the specified name %s already exists.", path)
	}
	hh.dirs[key(strings.TrimRight(path, `\`))] = strings.TrimRight(path, `\`)
	return nil
}

// setContent is Set-Content -Value v -Encoding UTF8: Windows PowerShell writes a BOM and a line break.
func (hh *hvHost) setContent(path, v string) {
	hh.writeFile(path, append([]byte("\ufeff"), v+"\r\n"...))
}

// content is Get-Content -Raw, without the BOM.
func (hh *hvHost) content(path string) (string, bool) {
	f := hh.files[key(path)]
	if f == nil {
		return "", false
	}
	return strings.TrimPrefix(string(f.data), "\ufeff"), true
}

type hvStorageIndex struct {
	Path    string
	Adopted bool
}

func (hh *hvHost) storageIndex(path string) (*hvStorageIndex, *hvError) {
	text, ok := hh.content(path)
	if !ok {
		return nil, nil
	}
	var def hvStorageIndex
	if err := json.Unmarshal([]byte(text), &def); err != nil {
		return nil, refuse("Invalid", "Invalid JSON primitive: %s.", strings.TrimSpace(text))
	}
	return &def, nil
}

func (hh *hvHost) storageMarked(folder string, o hvOwner) bool {
	text, ok := hh.content(strings.TrimRight(folder, `\`) + `\` + storageMarkerFile)
	return ok && marked(text, storageBlock, o)
}

// setStorage is Set-HFStorage.
func (h *HyperV) setStorage(hh *hvHost, in hvInput) (any, *hvError) {
	def, err := hh.storageIndex(in.IndexPath)
	if err != nil {
		return nil, err
	}
	if def != nil && def.Path != in.Path {
		return nil, refuse("AlreadyExists", "storage %s already names folder %s on %s, not %s", in.Owner.Name, def.Path, strings.ToUpper(hh.name), in.Path)
	}
	changed := false
	switch {
	case in.Adopt:
		if !hh.isDir(in.Path) {
			return nil, refuse("NotFound", "folder %s does not exist on %s: an adopted storage must exist", in.Path, strings.ToUpper(hh.name))
		}
	case hh.isDir(in.Path) || hh.files[key(in.Path)] != nil:
		if !hh.storageMarked(in.Path, in.Owner) {
			return nil, refuse("NotOwned", "folder %s on %s exists without this HyperFleet installation's mark (%s); it is left alone (adopt it to use it as it is)",
				in.Path, strings.ToUpper(hh.name), storageMarkerFile)
		}
	default:
		if err := hh.newDirectory(in.Path, false); err != nil {
			return nil, err
		}
		hh.setContent(in.Path+`\`+storageMarkerFile, in.Marker)
		changed = true
	}
	if def == nil {
		parent := in.IndexPath[:max(strings.LastIndex(in.IndexPath, `\`), 0)]
		if err := hh.newDirectory(parent, true); err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(hvStorageIndex{Path: in.Path, Adopted: in.Adopt})
		hh.setContent(in.IndexPath, string(raw))
		changed = true
	}
	return map[string]any{"Changed": changed}, nil
}

// removeStorage is Remove-HFStorage.
func (h *HyperV) removeStorage(hh *hvHost, in hvInput) (any, *hvError) {
	def, err := hh.storageIndex(in.IndexPath)
	if err != nil {
		return nil, err
	}
	if def == nil {
		return map[string]any{"Removed": false}, nil
	}
	if !def.Adopted && hh.isDir(def.Path) {
		items := hh.children(def.Path)
		mine := hh.storageMarked(def.Path, in.Owner)
		if !mine && len(items) > 0 {
			return nil, refuse("NotOwned", "folder %s on %s does not carry this HyperFleet installation's mark (%s); it is left alone", def.Path, strings.ToUpper(hh.name), storageMarkerFile)
		}
		var data []string
		for _, n := range items {
			if n != storageMarkerFile {
				data = append(data, n)
			}
		}
		if len(data) > 0 {
			return nil, refuse("Busy", "folder %s on %s still holds %d items (%s); HyperFleet deletes no data: move or delete them, then delete the storage again",
				def.Path, strings.ToUpper(hh.name), len(data), strings.Join(data[:min(len(data), 5)], ", "))
		}
		delete(hh.files, key(def.Path+`\`+storageMarkerFile))
		delete(hh.dirs, key(strings.TrimRight(def.Path, `\`)))
	}
	delete(hh.files, key(in.IndexPath))
	return map[string]any{"Removed": true}, nil
}

var storageNameRe = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,61}[a-z0-9]$`)

// storageFolder is Get-HFStorageFolder: the folder of the storage a VM's disk goes to, as the
// storage index records it for the caller's owner.
func (hh *hvHost) storageFolder(in hvInput, name string) (string, *hvError) {
	if !storageNameRe.MatchString(name) {
		return "", refuse("Invalid", "'%s' is not a storage name", name)
	}
	if in.StorageIndex == "" || in.Expect.OwnerTag == "" {
		return "", refuse("Invalid", "storage %s is named without the storage index and owner to find it in", name)
	}
	def, err := hh.storageIndex(strings.TrimRight(in.StorageIndex, `\`) + `\` + in.Expect.OwnerTag + "." + name + ".json")
	if err != nil {
		return "", err
	}
	if def == nil {
		return "", refuse("NotFound", "storage %s is not defined on %s: this HypervisorCluster's storage index (%s) has no record of it; a VMStorage defines or adopts it",
			name, strings.ToUpper(hh.name), in.StorageIndex)
	}
	if !hh.isDir(def.Path) {
		return "", refuse("NotFound", "folder %s of storage %s does not exist on %s", def.Path, name, strings.ToUpper(hh.name))
	}
	return def.Path, nil
}

// storageFolders are the folders of the storages the index records for the caller's owner, as
// Remove-HFVM finds them (Get-ChildItem -Filter <owner-tag>.*.json).
func (hh *hvHost) storageFolders(in hvInput) []string {
	if in.StorageIndex == "" || in.Expect.OwnerTag == "" {
		return nil
	}
	prefix := key(strings.TrimRight(in.StorageIndex, `\`) + `\` + in.Expect.OwnerTag + ".")
	var out []string
	for k, f := range hh.files {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, ".json") && !strings.Contains(k[len(prefix):], `\`) {
			if def, err := hh.storageIndex(f.path); err == nil && def != nil && def.Path != "" {
				out = append(out, def.Path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// getStorage is Get-HFStorage.
func (h *HyperV) getStorage(hh *hvHost, in hvInput) (any, *hvError) {
	def, err := hh.storageIndex(in.IndexPath)
	if err != nil {
		return nil, err
	}
	if def == nil {
		return map[string]any{"Defined": false}, nil
	}
	out := map[string]any{"Defined": true, "Path": def.Path, "Adopted": def.Adopted, "Active": false, "SizeBytes": 0, "RemainingBytes": 0}
	if hh.isDir(def.Path) {
		size, remaining := hh.volume(def.Path)
		out["Active"], out["SizeBytes"], out["RemainingBytes"] = true, size, remaining
	}
	return out, nil
}

// volume is Get-Volume -FilePath: the size of the volume path is on and what its files leave.
func (hh *hvHost) volume(path string) (size, remaining int64) {
	mount := hh.mountOf(path)
	size = defaultVolumeSize
	if s, ok := hh.volumes[mount]; ok {
		size = s
	}
	used := int64(0)
	for k, f := range hh.files {
		if hh.mountOf(k) == mount {
			used += f.size
		}
	}
	return size, max(size-used, 0)
}

// mountOf is the lower-cased mount point of the volume holding path: the longest added volume's
// folder it is under, or its drive's root.
func (hh *hvHost) mountOf(path string) string {
	k := key(path)
	best := ""
	for m := range hh.volumes {
		if strings.HasPrefix(k+`\`, m) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" && len(k) >= 3 {
		best = k[:3]
	}
	return best
}
