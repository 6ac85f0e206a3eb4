package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestRunIsAHyperVHost: the Hyper-V provider runs a VM's life on the process's simulated host, and
// the boot command gets the VM's user-data from the seed ISO.
func TestRunIsAHyperVHost(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	caFile, booted := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "booted")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--ca-out", caFile, "--user", "ops=pa55word", "--host", "hv7",
			"--log-level", "WARN", "--boot-command", `echo "$HVSIM_HOST $HVSIM_VM_NAME" > ` + booted + `; cat "$HVSIM_USER_DATA" >> ` + booted},
			&stdout, &stderr)
	}()
	urlRe := regexp.MustCompile(`listening on (https://\S+/wsman)`)
	g.Eventually(stdout.String).WithTimeout(10 * time.Second).Should(MatchRegexp(urlRe.String()))
	ca, err := os.ReadFile(caFile)
	g.Expect(err).NotTo(HaveOccurred())

	p, err := hyperv.New(hyperv.Config{Hosts: []hyperv.Host{{Name: "hv7", Endpoint: urlRe.FindStringSubmatch(stdout.String())[1]}},
		Username: "ops", Password: "pa55word", CABundle: ca, Cluster: "fleet/hv", InstallationID: "0123456789abcdef"}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: hvsim.HyperVTemplate})
	g.Expect(err).NotTo(HaveOccurred())
	ref, _, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: "hv7"}, Name: "runner-1",
		Owner: hypervisor.Ownership{Cluster: "fleet/hv", ClaimNamespace: "team-a", ClaimName: "runner-1", ClaimID: "c1"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048, Network: &hypervisor.NetworkSpec{Name: hvsim.HyperVSwitch},
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\nruncmd: [hyperfleet-agent]\n", MetaData: "instance-id: runner-1\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string { b, _ := os.ReadFile(booted); return string(b) }).WithTimeout(10 * time.Second).
		Should(Equal("hv7 runner-1\n#cloud-config\nruncmd: [hyperfleet-agent]\n"))
	g.Eventually(func() hypervisor.PowerState {
		vm, err := p.VM(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		return vm.State
	}).WithTimeout(10*time.Second).Should(Equal(hypervisor.PowerStateStopped), "the guest powered off when the boot command exited")
	_, err = p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())

	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
}
