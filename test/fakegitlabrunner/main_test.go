package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// TestRunSingleRunsExactlyOneJob builds the binary and starts it as the in-VM agent starts
// gitlab-runner: URL, token and CA file in the environment, over HTTPS. Each runner takes one job its
// tags allow, runs it to success and exits; a job for other tags is left pending, and a runner
// with nothing to do leaves after its wait timeout.
func TestRunSingleRunsExactlyOneJob(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gitlab-runner")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	ca := filepath.Join(dir, "ca.pem")
	g.Expect(os.WriteFile(ca, s.CACertPEM(), 0o600)).To(Succeed())
	s.AddProject("acme/api")
	first := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	second := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	other := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"macos"}})
	token := func() string {
		return s.AddRunner(fakegitlab.Runner{Type: fakegitlab.InstanceType, Tags: []string{"linux"}}).Token
	}
	start := func(tok string) (string, error) {
		cmd := exec.Command(bin, "run-single", "--executor", "shell", "--max-builds", "1", "--wait-timeout", "2")
		cmd.Env = append(os.Environ(), "CI_SERVER_URL="+s.URL(), "CI_SERVER_TOKEN="+tok, "CI_SERVER_TLS_CA_FILE="+ca)
		cmd.Dir = dir
		done := make(chan error, 1)
		var output []byte
		go func() { o, e := cmd.CombinedOutput(); output = o; done <- e }()
		select {
		case err := <-done:
			return string(output), err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("the runner did not exit")
			return "", nil
		}
	}
	for range 2 {
		tok := token()
		output, err := start(tok)
		g.Expect(err).NotTo(HaveOccurred(), output)
		g.Expect(output).To(ContainSubstring("finished"))
		short := strings.TrimPrefix(tok, "glrt-")[:8]
		g.Expect(filepath.Join(dir, "builds", short, "0", "acme", "api")).To(BeADirectory())
	}
	for _, id := range []int64{first.ID, second.ID} {
		j, _ := s.GetJob(id)
		g.Expect(j.Status).To(Equal(fakegitlab.JobSuccess))
		g.Expect(j.Acquisitions).To(Equal(1))
	}
	output, err := start(token())
	g.Expect(err).NotTo(HaveOccurred(), output)
	g.Expect(output).To(ContainSubstring("wait timeout"))
	j, _ := s.GetJob(other.ID)
	g.Expect(j.Status).To(Equal(fakegitlab.JobPending))

	// Without --max-builds 1 it refuses to start rather than run a second job.
	out, err = exec.Command(bin, "run-single", "--url", s.URL(), "--token", "x", "--executor", "shell").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("--max-builds 1"))
}
