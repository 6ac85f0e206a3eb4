package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

var (
	hiddenInput = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	csrfAttr    = regexp.MustCompile(`data-csrf="([^"]+)"`)
)

// TestConsoleOnTheLocalFleet is a person at the local fleet's console, as `make dev` prints it:
// they sign in with the printed credentials, create a VM, follow its job until the VM has booted
// (the simulator runs the real agent in it), and delete it.
func TestConsoleOnTheLocalFleet(t *testing.T) {
	g := NewWithT(t)
	c := fleet.State.Console
	g.Expect(c).NotTo(BeNil(), "the local fleet runs the console")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: time.Minute}

	resp, err := browser.Get(c.URL + "/")
	g.Expect(err).NotTo(HaveOccurred())
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.Request.URL.String()).To(HavePrefix(c.IssuerURL + "/authorize"))
	form := url.Values{"username": {c.Username}, "password": {c.Password}}
	for _, m := range hiddenInput.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], strings.ReplaceAll(m[2], "&#43;", "+"))
	}
	resp, err = browser.PostForm(c.IssuerURL+"/authorize", form)
	g.Expect(err).NotTo(HaveOccurred())
	page, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), string(page))
	g.Expect(string(page)).To(ContainSubstring("Fleet Operator"))
	m := csrfAttr.FindStringSubmatch(string(page))
	g.Expect(m).To(HaveLen(2))
	csrf := m[1]

	call := func(method, path string, body any) (int, []byte) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, c.URL+path, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-CSRF-Token", csrf)
		resp, err := browser.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	follow := func(jobID string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/api/v1/jobs/"+jobID+"/log", nil)
		resp, err := browser.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		var event, last string
		var log []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "log":
				log = append(log, strings.TrimPrefix(line, "data: "))
			case strings.HasPrefix(line, "data: ") && event == "end":
				last = strings.TrimPrefix(line, "data: ")
				t.Logf("job %s:\n%s", jobID, strings.Join(log, "\n"))
				return last
			}
		}
		t.Fatalf("job %s: the log ended without an end event: %v", jobID, sc.Err())
		return ""
	}

	status, body := call(http.MethodPost, "/api/v1/vms", console.CreateVMRequest{Namespace: fleet.State.Namespace, Name: "console-vm",
		Cluster: devfleet.HypervisorClusterName, Template: "9000", CPUs: 1, MemoryMiB: 1024})
	g.Expect(status).To(Equal(http.StatusAccepted), string(body))
	var job console.Job
	g.Expect(json.Unmarshal(body, &job)).To(Succeed())
	g.Expect(follow(job.ID)).To(Equal(`{"state":"Succeeded"}`))

	status, body = call(http.MethodGet, "/api/v1/vms/"+fleet.State.Namespace+"/console-vm", nil)
	g.Expect(status).To(Equal(http.StatusOK))
	var vm console.VM
	g.Expect(json.Unmarshal(body, &vm)).To(Succeed())
	g.Expect(vm.Phase).To(Equal("Ready"))
	simVM, ok := fleet.Simulator.VM(atoi(t, vm.ID))
	g.Expect(ok).To(BeTrue())
	g.Expect(simVM.Status).To(Equal("running"))

	status, body = call(http.MethodDelete, "/api/v1/vms/"+fleet.State.Namespace+"/console-vm", nil)
	g.Expect(status).To(Equal(http.StatusAccepted), string(body))
	g.Expect(follow("delete:" + fleet.State.Namespace + ":console-vm")).To(Equal(`{"state":"Succeeded"}`))
	_, exists := fleet.Simulator.VM(atoi(t, vm.ID))
	g.Expect(exists).To(BeFalse())

	// The audit log shows both of the person's actions, with the person, and the manager's
	// creation and destruction of the VM they caused.
	g.Eventually(func(g Gomega) {
		status, body := call(http.MethodGet, "/api/v1/audit?kind=MachineClaim&name=console-vm", nil)
		g.Expect(status).To(Equal(http.StatusOK), string(body))
		var list console.AuditList
		g.Expect(json.Unmarshal(body, &list)).To(Succeed())
		var seen []string
		for _, e := range list.Items {
			seen = append(seen, string(e.Actor.Kind)+" "+e.Action+" "+e.Result)
			if e.Actor.Kind == history.ActorPerson {
				g.Expect(e.Actor.Subject).To(ContainSubstring("operator"))
			}
		}
		g.Expect(seen).To(ContainElements("person create ok", "person delete ok", "controller create-vm ok", "controller destroy-vm ok"))
	}, 30*time.Second, 500*time.Millisecond).Should(Succeed())
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("VM ID %q is not a number", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
