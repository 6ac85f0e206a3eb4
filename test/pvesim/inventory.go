package pvesim

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Inventory is the simulated world at start: nodes, storages, VMs (templates
// and foreign VMs HyperFleet must leave alone), pools and storage files.
// LoadInventory reads it from YAML or JSON with these field names.
type Inventory struct {
	ClusterName string        `json:"clusterName,omitempty"`
	Nodes       []NodeSpec    `json:"nodes"`
	Storages    []StorageSpec `json:"storages"`
	VMs         []VMSpec      `json:"vms,omitempty"`
	Pools       []PoolSpec    `json:"pools,omitempty"`
	Files       []FileSpec    `json:"files,omitempty"`
	// PCIMappings are the cluster's PCI resource mappings (Datacenter, Resource Mappings).
	PCIMappings []PCIMappingSpec `json:"pciMappings,omitempty"`
}

// PCIMappingSpec is one cluster PCI resource mapping: its ID and the nodes that have a device
// for it. A VM whose hostpciN names the mapping starts only on those nodes.
type PCIMappingSpec struct {
	ID    string   `json:"id"`
	Nodes []string `json:"nodes"`
}

// NodeSpec is one cluster node. Its used memory is BaseMemoryUsedMiB plus the
// memory of its running VMs.
type NodeSpec struct {
	Name              string `json:"name"`
	CPUs              int    `json:"cpus"`
	MemoryMiB         int    `json:"memoryMiB"`
	BaseMemoryUsedMiB int    `json:"baseMemoryUsedMiB,omitempty"`
	Offline           bool   `json:"offline,omitempty"`
}

// StorageSpec is one storage. Non-shared storages exist separately on each
// node in Nodes (all nodes when empty).
type StorageSpec struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`    // lvmthin, dir, rbd, ...
	Content  []string `json:"content"` // images, rootdir, iso, vztmpl, snippets, backup, import
	Shared   bool     `json:"shared,omitempty"`
	TotalGiB int      `json:"totalGiB,omitempty"`
	Nodes    []string `json:"nodes,omitempty"`
}

// VMSpec is one VM or template. Config holds raw PVE config keys
// ("cores": "2", "scsi0": "local-lvm:base-9000-disk-0,size=32G", ...);
// disks it references are created on their storage.
type VMSpec struct {
	VMID     int               `json:"vmid"`
	Node     string            `json:"node"`
	Name     string            `json:"name,omitempty"`
	Template bool              `json:"template,omitempty"`
	Running  bool              `json:"running,omitempty"`
	Tags     []string          `json:"tags,omitempty"`
	Pool     string            `json:"pool,omitempty"`
	Config   map[string]string `json:"config,omitempty"`
}

// PoolSpec is a resource pool.
type PoolSpec struct {
	ID      string `json:"id"`
	Comment string `json:"comment,omitempty"`
}

// FileSpec is a file present on a storage at start, e.g. a cicustom snippet.
type FileSpec struct {
	Node    string `json:"node,omitempty"` // empty: every node the storage is on
	Volume  string `json:"volume"`         // "local:snippets/user-data.yaml"
	Content string `json:"content"`
}

// LoadInventory reads an inventory from a YAML or JSON file.
func LoadInventory(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pvesim: read inventory: %w", err)
	}
	var inv Inventory
	if err := yaml.UnmarshalStrict(b, &inv); err != nil {
		return nil, fmt.Errorf("pvesim: parse inventory %s: %w", path, err)
	}
	return &inv, nil
}

// DefaultInventory is three nodes with different free memory, local-lvm and
// local storages, two runner templates and four foreign VMs.
func DefaultInventory() *Inventory {
	foreign := func(vmid int, node, name string, running bool, tags []string, mem string) VMSpec {
		return VMSpec{
			VMID: vmid, Node: node, Name: name, Running: running, Tags: tags,
			Config: map[string]string{
				"cores": "4", "sockets": "1", "memory": mem, "ostype": "l26", "scsihw": "virtio-scsi-single",
				"scsi0": fmt.Sprintf("local-lvm:vm-%d-disk-0,size=64G", vmid),
				"net0":  fmt.Sprintf("virtio=BC:24:11:AA:%02X:%02X,bridge=vmbr0", vmid/100%256, vmid%100),
				"boot":  "order=scsi0;net0", "onboot": "1",
			},
		}
	}
	return &Inventory{
		ClusterName: "hyperfleet-sim",
		Nodes: []NodeSpec{
			{Name: "pve1", CPUs: 16, MemoryMiB: 65536, BaseMemoryUsedMiB: 8192},
			{Name: "pve2", CPUs: 16, MemoryMiB: 65536, BaseMemoryUsedMiB: 24576},
			{Name: "pve3", CPUs: 16, MemoryMiB: 65536, BaseMemoryUsedMiB: 4096},
		},
		Storages: []StorageSpec{
			{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}, TotalGiB: 512},
			{Name: "local", Type: "dir", Content: []string{"iso", "vztmpl", "snippets"}, TotalGiB: 100},
		},
		VMs: []VMSpec{
			RunnerTemplate(9000, "pve1", "ubuntu-2404-runner", "32G", "runner", "template", "ubuntu"),
			RunnerTemplate(9001, "pve2", "debian-12-runner", "20G", "debian", "runner", "template"),
			foreign(100, "pve1", "pbs-backup", true, nil, "4096"),
			foreign(101, "pve2", "gitlab", true, []string{"prod"}, "8192"),
			foreign(102, "pve3", "dev-sandbox", false, []string{"dev", "team-a"}, "2048"),
			foreign(103, "pve3", "win-build", true, nil, "8192"),
		},
	}
}

// RunnerTemplate is a runner template like the default inventory's: 2 cores, 2 GiB, the guest agent
// enabled and a boot disk of the given size ("32G") on local-lvm. Clusters with local storage keep
// one copy per node, with the same name and tags and different VMIDs, so linked clones can be made
// on every node; PVE does not require VM names to be unique.
func RunnerTemplate(vmid int, node, name, disk string, tags ...string) VMSpec {
	return VMSpec{
		VMID: vmid, Node: node, Name: name, Template: true, Tags: tags,
		Config: map[string]string{
			"cores": "2", "sockets": "1", "memory": "2048", "cpu": "x86-64-v2-AES",
			"ostype": "l26", "scsihw": "virtio-scsi-single", "agent": "1",
			"scsi0":   "local-lvm:base-" + fmt.Sprint(vmid) + "-disk-0,iothread=1,size=" + disk,
			"net0":    fmt.Sprintf("virtio=BC:24:11:%02X:%02X:00,bridge=vmbr0", vmid/100%256, vmid%100),
			"boot":    "order=scsi0;net0",
			"serial0": "socket", "vga": "serial0",
			"smbios1": fmt.Sprintf("uuid=6a1f2c3d-0000-4000-8000-%012d", vmid),
		},
	}
}

// loadInventory installs inv as the simulator's state.
func (s *Simulator) loadInventory(inv *Inventory) error {
	s.cluster = inv.ClusterName
	s.pciMappings = map[string]map[string]bool{}
	for _, m := range inv.PCIMappings {
		s.pciMappings[m.ID] = map[string]bool{}
		for _, n := range m.Nodes {
			s.pciMappings[m.ID][n] = true
		}
	}
	if s.cluster == "" {
		s.cluster = "pvesim"
	}
	for i, n := range inv.Nodes {
		if n.Name == "" || !nodeNameRe.MatchString(n.Name) {
			return fmt.Errorf("pvesim: inventory node %q: invalid name", n.Name)
		}
		s.nodes = append(s.nodes, &nodeState{
			name: n.Name, id: i + 1, cpus: max(n.CPUs, 1), maxmem: mib(max(n.MemoryMiB, 1024)),
			baseUsed: mib(n.BaseMemoryUsedMiB), online: !n.Offline,
		})
	}
	if len(s.nodes) == 0 {
		return fmt.Errorf("pvesim: inventory has no nodes")
	}
	for _, st := range inv.Storages {
		def := &storageDef{name: st.Name, typ: st.Type, content: append([]string(nil), st.Content...),
			shared: st.Shared, total: int64(max(st.TotalGiB, 1)) << 30}
		sort.Strings(def.content)
		if len(st.Nodes) > 0 {
			def.nodes = map[string]bool{}
			for _, n := range st.Nodes {
				def.nodes[n] = true
			}
		}
		s.storages = append(s.storages, def)
	}
	for _, p := range inv.Pools {
		s.pools[p.ID] = &poolState{id: p.ID, comment: p.Comment, members: map[int]bool{}}
	}
	for _, spec := range inv.VMs {
		if err := s.addInventoryVM(spec); err != nil {
			return err
		}
	}
	for _, f := range inv.Files {
		storeID, name, ok := strings.Cut(f.Volume, ":")
		if !ok {
			return fmt.Errorf("pvesim: inventory file %q: not a volume ID", f.Volume)
		}
		st := s.storage(storeID)
		if st == nil {
			return fmt.Errorf("pvesim: inventory file %q: unknown storage", f.Volume)
		}
		content, _, _ := strings.Cut(name, "/")
		for _, n := range s.nodes {
			if (f.Node == "" || f.Node == n.name) && st.onNode(n.name) {
				s.putVolume(n.name, &volume{storage: storeID, volid: f.Volume, content: content,
					format: fileFormat(name), size: int64(len(f.Content)), data: []byte(f.Content)})
			}
		}
	}
	return nil
}

func (s *Simulator) addInventoryVM(spec VMSpec) error {
	if s.node(spec.Node) == nil {
		return fmt.Errorf("pvesim: inventory VM %d: unknown node %q", spec.VMID, spec.Node)
	}
	if _, dup := s.vms[spec.VMID]; dup || spec.VMID < 100 {
		return fmt.Errorf("pvesim: inventory VM %d: duplicate or invalid VMID", spec.VMID)
	}
	conf := map[string]string{}
	for k, v := range spec.Config {
		conf[k] = v
	}
	if spec.Name != "" {
		conf["name"] = spec.Name
	}
	if spec.Template {
		conf["template"] = "1"
	}
	if len(spec.Tags) > 0 {
		conf["tags"] = uniqueTags(strings.Join(spec.Tags, ";"))
	}
	vm := &vmState{vmid: spec.VMID, node: spec.Node, conf: conf, status: "stopped"}
	s.vms[spec.VMID] = vm
	for key, val := range conf {
		if !isDriveKey(key) {
			continue
		}
		d := parseDrive(val)
		if d.isCDROM() || d.storage == "" {
			continue
		}
		st := s.storage(d.storage)
		if st == nil {
			return fmt.Errorf("pvesim: inventory VM %d: %s uses unknown storage %q", spec.VMID, key, d.storage)
		}
		s.putVolume(spec.Node, &volume{storage: d.storage, volid: d.volid(), content: "images",
			format: "raw", size: parseSize(d.opts["size"]), vmid: spec.VMID})
	}
	if spec.Pool != "" {
		p, ok := s.pools[spec.Pool]
		if !ok {
			p = &poolState{id: spec.Pool, members: map[int]bool{}}
			s.pools[spec.Pool] = p
		}
		p.members[spec.VMID] = true
	}
	if spec.Running && !spec.Template {
		s.markRunning(vm, false)
	}
	return nil
}

func mib(n int) int64 { return int64(n) << 20 }
