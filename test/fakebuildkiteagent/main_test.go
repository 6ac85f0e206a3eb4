package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// TestStartRunsExactlyOneJob builds the binary and starts it as the in-VM agent would start
// buildkite-agent: over HTTPS (the CA through SSL_CERT_FILE), with the token in a file. Each
// agent takes one job of its queue, finishes it and exits; a job of another queue is left alone.
func TestStartRunsExactlyOneJob(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "buildkite-agent")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	s := fakebuildkite.StartForTest(t, fakebuildkite.Options{TLS: true})
	ca := filepath.Join(dir, "ca.pem")
	g.Expect(os.WriteFile(ca, s.CACertPEM(), 0o600)).To(Succeed())
	first := s.CreateJob("api", []string{"queue=linux"})
	second := s.CreateJob("api", []string{"queue=linux", "os=linux"})
	other := s.CreateJob("api", []string{"queue=macos"})

	for i, name := range []string{"vm-1", "vm-2"} {
		tok := s.AddClusterToken(name)
		tokFile := filepath.Join(dir, name+".token")
		g.Expect(os.WriteFile(tokFile, []byte(tok.Value+"\n"), 0o600)).To(Succeed())
		cmd := exec.Command(bin, "start", "--token", "file://"+tokFile, "--endpoint", s.AgentEndpoint(),
			"--name", name, "--tags", "queue=linux,os=linux", "--disconnect-after-job")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+ca)
		cmd.Dir = dir
		done := make(chan error, 1)
		var output []byte
		go func() { o, e := cmd.CombinedOutput(); output = o; done <- e }()
		select {
		case err := <-done:
			g.Expect(err).NotTo(HaveOccurred(), string(output))
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("agent %d did not exit after its job", i+1)
		}
		g.Expect(string(output)).To(ContainSubstring("finished"))
		g.Expect(filepath.Join(dir, "builds", name, "acme", "api")).To(BeADirectory())
	}
	for _, id := range []string{first.ID, second.ID} {
		j, _ := s.GetJob(id)
		g.Expect(j.State).To(Equal(fakebuildkite.JobFinished))
		g.Expect(j.Acquisitions).To(Equal(1))
	}
	j, _ := s.GetJob(other.ID)
	g.Expect(j.State).To(Equal(fakebuildkite.JobScheduled))
	for _, a := range s.Agents() {
		g.Expect(a.ConnectionState).To(Equal("disconnected"))
		g.Expect(a.JobsRun).To(Equal(1))
	}

	// Without --disconnect-after-job it refuses to start rather than run a second job.
	cmd := exec.Command(bin, "start", "--token", "x", "--endpoint", s.AgentEndpoint())
	out, err = cmd.CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("--disconnect-after-job"))
}
