package pvesim

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// uploadFile is the file part of a multipart upload (field "filename").
type uploadFile struct {
	name string
	data []byte
}

// readMultipart reads form fields into p and returns the uploaded file, as
// pveproxy's file_upload_multipart does.
func readMultipart(r *http.Request, boundary string, p params) (*uploadFile, error) {
	if boundary == "" {
		return nil, fmt.Errorf("upload 'Content-Type '%s' not implemented", r.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(r.Body, boundary)
	var up *uploadFile
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("upload failed")
		}
		data, err := io.ReadAll(io.LimitReader(part, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("upload failed")
		}
		if part.FileName() != "" {
			if part.FormName() != "filename" {
				return nil, fmt.Errorf("wrong field name for file upload - abort upload")
			}
			up = &uploadFile{name: part.FileName(), data: data}
			p["filename"] = pval{s: part.FileName()}
			continue
		}
		p[part.FormName()] = pval{s: string(bytes.TrimRight(data, "\r\n"))}
	}
	if up == nil {
		return nil, fmt.Errorf("upload failed")
	}
	return up, nil
}

func (s *Simulator) storageUsed(node string, st *storageDef) int64 {
	var used int64
	for _, v := range s.nodeVolumes(node, st.name) {
		used += v.size
	}
	return used
}

func (s *Simulator) storageJSON(node string, st *storageDef) map[string]any {
	used := s.storageUsed(node, st)
	return map[string]any{
		"storage": st.name, "type": st.typ, "content": strings.Join(st.content, ","),
		"active": 1, "enabled": 1, "shared": boolInt(st.shared),
		"total": st.total, "used": used, "avail": st.total - used,
		"used_fraction": float64(used) / float64(st.total),
	}
}

func (s *Simulator) getStorages(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	want := rq.p.get("content")
	out := []map[string]any{}
	for _, st := range s.storages {
		if !st.onNode(node) {
			continue
		}
		if want != "" {
			ok := false
			for _, c := range splitList(want) {
				ok = ok || st.hasContent(c)
			}
			if !ok {
				continue
			}
		}
		if name := rq.p.get("storage"); name != "" && name != st.name {
			continue
		}
		out = append(out, s.storageJSON(node, st))
	}
	return out, nil
}

func (s *Simulator) nodeStorage(node, name string) (*storageDef, *apiError) {
	st := s.storage(name)
	if st == nil {
		return nil, errf("storage '%s' does not exist", name)
	}
	if !st.onNode(node) {
		return nil, errf("storage '%s' is not available on node '%s'", name, node)
	}
	return st, nil
}

func (s *Simulator) getStorageStatus(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	st, err := s.nodeStorage(node, rq.p.get("storage"))
	if err != nil {
		return nil, err
	}
	return s.storageJSON(node, st), nil
}

func (s *Simulator) nodeVolumes(node, storeID string) []*volume {
	out := []*volume{}
	for key, v := range s.volumes {
		if v.storage == storeID && key == s.volumeKey(node, v.volid) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].volid < out[j].volid })
	return out
}

func (s *Simulator) getStorageContent(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	if _, err := s.nodeStorage(node, rq.p.get("storage")); err != nil {
		return nil, err
	}
	content, vmid := rq.p.get("content"), rq.p.get("vmid")
	out := []map[string]any{}
	for _, v := range s.nodeVolumes(node, rq.p.get("storage")) {
		if content != "" && v.content != content {
			continue
		}
		if vmid != "" && vmidStr(v.vmid) != vmid {
			continue
		}
		e := map[string]any{"volid": v.volid, "content": v.content, "format": v.format, "size": v.size, "ctime": v.ctime}
		if v.vmid != 0 {
			e["vmid"] = v.vmid
			e["used"] = 0
		}
		if v.parent != "" {
			e["parent"] = v.parent
		}
		out = append(out, e)
	}
	return out, nil
}

var volumeNameRe = regexp.MustCompile(`^(iso|vztmpl|snippets|import|backup)/(.+)$`)

// realVolumeID resolves "local:iso/x.iso" or, with the storage given, "iso/x.iso".
func realVolumeID(storeID, volume string) (string, *apiError) {
	if strings.Contains(volume, ":") {
		sid, _, _ := strings.Cut(volume, ":")
		if storeID != "" && sid != storeID {
			return "", errf("storage ID mismatch (%s != %s)", sid, storeID)
		}
		return volume, nil
	}
	if storeID == "" {
		return "", paramErr(map[string]string{"volume": "no storage specified - incomplete volume ID"})
	}
	return storeID + ":" + volume, nil
}

func (s *Simulator) getVolume(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	volid, err := realVolumeID(rq.p.get("storage"), rq.p.get("volume"))
	if err != nil {
		return nil, err
	}
	v := s.getVolumeOn(node, volid)
	if v == nil {
		return nil, errf("volume_size_info on '%s' failed - no format", volid)
	}
	storeID, name, _ := strings.Cut(volid, ":")
	path := "/dev/pve/" + name
	if m := volumeNameRe.FindStringSubmatch(name); m != nil {
		dir := map[string]string{"iso": "template/iso", "vztmpl": "template/cache", "snippets": "snippets", "import": "import", "backup": "dump"}[m[1]]
		path = "/var/lib/vz/" + dir + "/" + m[2]
	}
	_ = storeID
	return map[string]any{"path": path, "size": v.size, "used": v.size, "format": v.format}, nil
}

func (s *Simulator) deleteVolume(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node := rq.p.get("node")
	volid, err := realVolumeID(rq.p.get("storage"), rq.p.get("volume"))
	if err != nil {
		return nil, err
	}
	storeID, _, _ := strings.Cut(volid, ":")
	if _, err := s.nodeStorage(node, storeID); err != nil {
		return nil, err
	}
	if !rq.auth.has("Datastore.Allocate") {
		return nil, permErr("/storage/" + storeID + ", Datastore.Allocate")
	}
	id := storeID
	if v := s.getVolumeOn(node, volid); v != nil && v.vmid != 0 {
		id = fmt.Sprintf("%d@%s", v.vmid, storeID)
	}
	t := s.startTask(node, "imgdel", id, rq.auth, taskWork{run: func(t *task) error {
		v := s.getVolumeOn(node, volid)
		if v == nil {
			return errf("volume '%s' does not exist", volid)
		}
		for _, vm := range s.vms {
			for k, val := range vm.conf {
				if isDriveKey(k) && parseDrive(val).volid() == volid && vm.node == node && v.content == "images" {
					return errf("volume '%s' is still in use by VM %d", volid, vm.vmid)
				}
			}
		}
		s.dropVolume(node, volid)
		t.log = append(t.log, fmt.Sprintf("Removed volume '%s'", volid))
		return nil
	}}, "DELETE /nodes/{node}/storage/{storage}/content/{volume}")
	return t.upid, nil
}

var isoExtRe = regexp.MustCompile(`(?i)[^/]+\.(iso|img)$`)

// postUpload is the storage upload endpoint go-proxmox's CloudInit uses: the
// file lands in the storage when the imgcopy task ends.
func (s *Simulator) postUpload(rq *request) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	node, storeID := rq.p.get("node"), rq.p.get("storage")
	st, err := s.nodeStorage(node, storeID)
	if err != nil {
		return nil, err
	}
	if rq.upload == nil {
		return nil, errf("missing temporary file name")
	}
	content, filename := rq.p.get("content"), rq.p.get("filename")
	switch content {
	case "iso":
		if !isoExtRe.MatchString(filename) {
			return nil, paramErr(map[string]string{"filename": "wrong file extension"})
		}
	case "vztmpl":
		if !regexp.MustCompile(`[^/]+\.tar\.(gz|xz|zst|bz2)$`).MatchString(filename) {
			return nil, paramErr(map[string]string{"filename": "wrong file extension"})
		}
	default:
		return nil, paramErr(map[string]string{"content": fmt.Sprintf("upload content type '%s' not allowed", content)})
	}
	if !st.hasContent(content) {
		return nil, errf("storage '%s' does not support '%s' content", storeID, content)
	}
	data := rq.upload.data
	volid := fmt.Sprintf("%s:%s/%s", storeID, content, filename)
	t := s.startTask(node, "imgcopy", "", rq.auth, taskWork{run: func(t *task) error {
		t.log = append(t.log, "starting file import from: /var/tmp/pveupload-"+fmt.Sprintf("%x", len(data)))
		s.putVolume(node, &volume{storage: storeID, volid: volid, content: content, format: content, size: int64(len(data)), data: data})
		t.log = append(t.log, fmt.Sprintf("target node: %s", node), "file size is: "+fmt.Sprint(len(data)))
		return nil
	}}, "POST /nodes/{node}/storage/{storage}/upload")
	return t.upid, nil
}
