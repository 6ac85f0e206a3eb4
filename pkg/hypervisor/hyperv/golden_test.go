package hyperv

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
)

const (
	goldenTextSeparator  = "\n# ---- folders, decoded (not sent) ----\n"
	goldenInputSeparator = "\n# ---- argument, decoded (not sent) ----\n"
)

// base64Text finds the folders a script carries as base64 text (psText).
var base64Text = regexp.MustCompile(`FromBase64String\('([A-Za-z0-9+/=]*)'\)`)

// withTexts appends the folders a script carries, decoded, so a review sees them.
func withTexts(t *testing.T, script string) string {
	t.Helper()
	var texts []string
	for _, m := range base64Text.FindAllStringSubmatch(script, -1) {
		raw, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(raw))
	}
	return script + goldenTextSeparator + strings.Join(texts, "\n") + "\n"
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the scripts HyperFleet sends now")

// TestGoldenScripts pins every script HyperFleet sends to a host, byte for byte: the module calls
// with the inputs the provider builds, the module probe and the folder preparation of a deploy.
// A change here changes what runs on every Hyper-V host; review the diff, then run with -update.
func TestGoldenScripts(t *testing.T) {
	p := &Provider{cfg: Config{InstallationID: testInstallation, Cluster: testCluster}, ownerTag: OwnerTag(testInstallation, testCluster)}
	cfg, err := Config{Hosts: []Host{{Name: "hv1", Endpoint: "https://hv1:5986/wsman"}}, Username: "u", Password: "p",
		Cluster: testCluster, InstallationID: testInstallation}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p.cfg = cfg
	const id = "6f1d3c2a-8e4b-4f0e-9a57-2b1c7d9e4a10"
	owner := p.notes(ownerFixture(), "runner for team-a")
	// A call's golden file is the script, then its argument decoded, for review.
	call := func(fn string, in any) string {
		s, err := callScript(cfg.ModuleRoot, fn, in)
		if err != nil {
			t.Fatal(err)
		}
		pretty, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return withTexts(t, s) + goldenInputSeparator + string(pretty) + "\n"
	}
	ref := vmInput{ID: id, Expect: p.expect(""), SeedDirectory: cfg.SeedDirectory, SeedPath: cfg.SeedDirectory + `\hyperfleet-` + id + "-cidata.iso"}
	stop, shutdown, removeRef := ref, ref, ref
	removeRef.VHDDirectory, removeRef.StorageIndex = cfg.VHDDirectory, cfg.StorageIndex
	stop.Mode, shutdown.Mode = "TurnOff", "Shutdown"
	scripts := map[string]string{
		"probe":         withTexts(t, probeScript(cfg.ModuleRoot)),
		"prepare":       withTexts(t, prepareScript(moduleDir(cfg.ModuleRoot), cfg.SeedDirectory)),
		"inventory":     call(fnInventory, struct{}{}),
		"get-vm":        call(fnVM, struct{ Id string }{id}),
		"find-template": call(fnFindTemplate, struct{ Name, TemplateDirectory string }{templateName, cfg.TemplateDirectory}),
		"new-vm":        call(fnNewVM, newVMInput{Name: "runner-1", DiskName: p.diskName("runner-1", ownerFixture()), ParentPath: templateDisk, VHDDirectory: cfg.VHDDirectory, VMDirectory: cfg.VMDirectory, Notes: owner, MemoryMiB: DefaultMemoryMiB, SecureBootTemplate: cfg.SecureBootTemplate, Expect: p.expect("claim-1")}),
		"new-vm-full-on-storage": call(fnNewVM, newVMInput{Name: "runner-1", ParentPath: templateDisk, VHDDirectory: cfg.VHDDirectory, VMDirectory: cfg.VMDirectory, Notes: owner, MemoryMiB: DefaultMemoryMiB, SecureBootTemplate: cfg.SecureBootTemplate, Expect: p.expect("claim-1"),
			Full: true, Storage: "fast", StorageIndex: cfg.StorageIndex}),
		"set-vm": call(fnSetVM, setVMInput{ID: id, Expect: p.expect("claim-1"), Cores: 4, MemoryMiB: 8192, SwitchName: runnerSwitch, VlanID: 42, Notes: owner, DiskSizeBytes: 40 << 30, SeedPath: ref.SeedPath,
			SeedArchivePath: ref.SeedPath + ".gz", SeedSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}),
		"start-vm":         call(fnStartVM, ref),
		"stop-vm-turnoff":  call(fnStopVM, stop),
		"stop-vm-shutdown": call(fnStopVM, shutdown),
		"remove-vm":        call(fnRemoveVM, removeRef),
		"add-disks": call(fnAddDisks, addDisksInput{ID: id, Expect: p.expect("claim-1"), VHDDirectory: cfg.VHDDirectory,
			Disks: []diskInput{{Name: "data", SizeBytes: 20 << 30, Lun: 1}, {Name: "wal", SizeBytes: 2 << 30, Lun: 2}}}),
		"add-disks-on-storage": call(fnAddDisks, addDisksInput{ID: id, Expect: p.expect("claim-1"), VHDDirectory: cfg.VHDDirectory, StorageIndex: cfg.StorageIndex,
			Disks: []diskInput{{Name: "data", SizeBytes: 20 << 30, Lun: 1, Storage: "fast"}, {Name: "wal", SizeBytes: 2 << 30, Lun: 2}}}),
		"set-adapters": call(fnSetAdapters, setAdaptersInput{ID: id, Expect: p.expect("claim-1"), Adapters: []adapterInput{
			{Name: "lan", SwitchName: runnerSwitch, MacAddress: "02A1B2C3D4E5", VlanID: 42}, {Name: "backup", SwitchName: "backup", MacAddress: "02F6A7B8C9D0"}}}),
		"dismount-seed":      call(fnDismountSeed, ref),
		"get-checkpoints":    call(fnCheckpoints, checkpointInput{ID: id, Expect: p.expect("")}),
		"new-checkpoint":     call(fnNewCheckpoint, checkpointInput{ID: id, Expect: p.expect(""), Name: "hf-0f8e7d6c5b4a39281706f5e4d3c2b1a0", WithMemory: true}),
		"restore-checkpoint": call(fnRestoreCheckpoint, checkpointInput{ID: id, Expect: p.expect(""), Name: "hf-0f8e7d6c5b4a39281706f5e4d3c2b1a0", Start: true}),
		"remove-checkpoint":  call(fnRemoveCheckpoint, checkpointInput{ID: id, Expect: p.expect(""), Name: "hf-0f8e7d6c5b4a39281706f5e4d3c2b1a0"}),
		"test-move":          call(fnTestMove, moveInput{ID: id, Expect: p.expect(""), Hosts: []string{"hv2", "hv3"}, DestinationStoragePath: cfg.VHDDirectory}),
		"start-move":         call(fnStartMove, moveInput{ID: id, Expect: p.expect(""), Target: "hv2", Online: true, IncludeStorage: true, DestinationStoragePath: cfg.VHDDirectory}),
		"get-move":           call(fnGetMove, moveInput{JobID: "0D5A1C9E-3F7B-4C2A-9E61-5B8D4A2F7C10"}),
		"stop-move":          call(fnStopMove, moveInput{ID: id, Expect: p.expect(""), JobID: "0D5A1C9E-3F7B-4C2A-9E61-5B8D4A2F7C10"}),
		"set-network":        call(fnSetNetwork, goldenNetwork(t, p)),
		"remove-network":     call(fnRemoveNetwork, p.networkOf("ci1", ownerFixture())),
		"set-reservation":    call(fnSetReservation, goldenReservation(p)),
		"set-port-policy":    call(fnSetPortPolicy, goldenPortPolicy(t, id, p.expect("claim-1"))),
		"set-storage": call(fnSetStorage, storageInput{IndexPath: p.indexPath(p.ownerTag, "fast"), Owner: p.resourceOwner(ownerFixture(), "fast"),
			Path: storageFolder, Marker: resourceMark(storageBlockStart, "HyperFleet storage fast.", p.resourceOwner(ownerFixture(), "fast"))}),
		"remove-storage": call(fnRemoveStorage, storageInput{IndexPath: p.indexPath(p.ownerTag, "fast"), Owner: p.resourceOwner(ownerFixture(), "fast")}),
		"get-storage":    call(fnGetStorage, storageInput{IndexPath: p.indexPath(p.ownerTag, "fast")}),
	}
	for name, script := range scripts {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				g.Expect(os.WriteFile(path, []byte(script), 0o644)).To(Succeed())
			}
			want, err := os.ReadFile(path)
			g.Expect(err).NotTo(HaveOccurred(), "run go test -run TestGoldenScripts -update")
			g.Expect(script).To(Equal(string(want)))
			sent, _, _ := strings.Cut(script, goldenTextSeparator)
			g.Expect(len(winrmclient.EncodeCommand(sent))).To(BeNumerically("<=", 8191), "cmd.exe's command-line limit")
		})
	}
}
