package console

import (
	"bytes"
	"encoding/csv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	"github.com/onsi/gomega/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// auditOf lists the audit log as token's person sees it, with query.
func (f *fixture) auditOf(t *testing.T, token, query string) (int, console.AuditList) {
	t.Helper()
	return getJSON[console.AuditList](t, f, token, "/api/v1/audit"+query)
}

// entry matches an audit entry of actor acting on a namespace's MachineClaim.
func entry(subject, action, namespace, name string, result types.GomegaMatcher) types.GomegaMatcher {
	return gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"Actor":  HaveField("Subject", subject),
		"Action": Equal(action),
		"Object": And(HaveField("Namespace", namespace), HaveField("Name", name)),
		"Result": result,
	})
}

// TestAuditLogRecordsChanges: a person's create, power and delete through the API land in the
// log with their subject, groups and result; refused attempts land with their refusal; each person
// reads only the entries of the namespaces whose VMs they may list.
func TestAuditLogRecordsChanges(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	aliceTok := f.token(t, alice, fakeoidc.TokenOptions{})
	r := f.call(t, http.MethodPost, "/api/v1/vms", aliceTok, console.CreateVMRequest{Namespace: teamA, Name: "audited-vm", Cluster: "pve",
		Template: "9000", CPUs: 2, RunStrategy: "Always", UserData: "#cloud-config\npassword: hunter2\n"})
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	r = f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/audited-vm/power-off", aliceTok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	r = f.call(t, http.MethodDelete, "/api/v1/vms/"+teamA+"/audited-vm", aliceTok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	// Refused by Kubernetes RBAC, and by the read-only role before Kubernetes is asked.
	r = f.call(t, http.MethodPost, "/api/v1/vms", aliceTok, console.CreateVMRequest{Namespace: teamB, Name: "planted", Cluster: "pve", Template: "9000"})
	g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
	r = f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/audited-vm/power-on", f.token(t, victor, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))

	var mine console.AuditList
	g.Eventually(func(g Gomega) {
		status, l := f.auditOf(t, aliceTok, "?actor=oidc:alice@example.com")
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(l.Items).To(HaveLen(3))
		mine = l
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed(), "the queue writes the entries")
	g.Expect(mine.Items).To(HaveExactElements(
		entry("oidc:alice@example.com", "delete", teamA, "audited-vm", Equal("ok")),
		entry("oidc:alice@example.com", "power-off", teamA, "audited-vm", Equal("ok")),
		entry("oidc:alice@example.com", "create", teamA, "audited-vm", Equal("ok")),
	), "newest first; alice's refused attempt in team-b is not hers to read")
	for _, e := range mine.Items {
		g.Expect(e.Actor.Groups).To(Equal([]string{"oidc:team-a"}))
		g.Expect(e.Actor.Kind).To(Equal(history.ActorPerson))
		g.Expect(e.Object.Kind).To(Equal("MachineClaim"))
		g.Expect(e.Object.APIVersion).To(Equal("infrastructure.cluster.x-k8s.io/v1alpha1"))
		g.Expect(e.Detail).NotTo(ContainSubstring("hunter2"))
	}
	g.Expect(mine.Items[1].Detail).To(Equal("runStrategy Halted"))
	g.Expect(mine.Items[2].Detail).To(And(ContainSubstring("template 9000"), ContainSubstring("2 CPUs"), ContainSubstring("runStrategy Always")))

	_, l := f.auditOf(t, aliceTok, "")
	g.Expect(l.Items).To(ContainElement(entry("oidc:victor@example.com", "power-on", teamA, "audited-vm",
		Equal("403 Forbidden: your role may look but not change anything"))), "a refusal by role is an attempt")
	for _, e := range l.Items {
		g.Expect(e.Object.Namespace).To(Equal(teamA))
	}

	bobTok := f.token(t, bob, fakeoidc.TokenOptions{})
	status, theirs := f.auditOf(t, bobTok, "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(theirs.Items).To(HaveExactElements(entry("oidc:alice@example.com", "create", teamB, "planted",
		And(HavePrefix("403 Forbidden: "), ContainSubstring("forbidden")))), "bob reads the attempt on his namespace, and nothing of team-a")

	// Asking for a namespace one may not list VMs in is refused, as the VM list refuses it.
	r = f.call(t, http.MethodGet, "/api/v1/audit?namespace="+teamB, aliceTok, nil)
	g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
	r = f.call(t, http.MethodGet, "/api/v1/audit?namespace="+teamB, f.token(t, mallory, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusForbidden), string(r.Body))
	status, none := f.auditOf(t, f.token(t, mallory, fakeoidc.TokenOptions{}), "")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(none.Items).To(BeEmpty(), "a token naming Kubernetes' admin group reads nothing")

	status, every := f.auditOf(t, f.token(t, audrey, fakeoidc.TokenOptions{}), "?limit=2")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(every.Items).To(HaveLen(2))
	g.Expect(every.Items[0].Object.Namespace).To(Equal(teamA), "the newest: victor's refused power-on")
	g.Expect(every.Next).NotTo(BeEmpty())
	_, older := f.auditOf(t, f.token(t, audrey, fakeoidc.TokenOptions{}), "?limit=10&before="+every.Next)
	g.Expect(older.Items).To(HaveLen(3), "a cluster-wide reader pages through both namespaces")

	// CSV export of the same filters.
	r = f.call(t, http.MethodGet, "/api/v1/audit?format=csv&namespace="+teamA, aliceTok, nil)
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	g.Expect(r.Header.Get("Content-Type")).To(HavePrefix("text/csv"))
	g.Expect(r.Header.Get("Content-Disposition")).To(ContainSubstring("attachment"))
	rows, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rows).To(HaveLen(5))
	g.Expect(rows[0]).To(Equal([]string{"id", "time", "actor", "groups", "actorKind", "action", "apiVersion", "kind", "namespace", "name", "result", "detail"}))
	g.Expect(rows[1][2:6]).To(Equal([]string{"oidc:victor@example.com", "", "person", "power-on"}))
	g.Expect(rows[2][2:6]).To(Equal([]string{"oidc:alice@example.com", "oidc:team-a", "person", "delete"}))

	// The Audit page of a browser session shows the same entries, with the export link.
	b := newBrowser(t)
	f.signIn(t, b, alice, false)
	code, page, _ := b.get(t, f.URL+"/audit?actor="+url.QueryEscape("oidc:alice@example.com"))
	g.Expect(code).To(Equal(http.StatusOK), page)
	g.Expect(page).To(And(ContainSubstring("<h1>Audit log</h1>"), ContainSubstring(`href="/audit" aria-current="page"`),
		ContainSubstring("power-off"), ContainSubstring("runStrategy Halted"), ContainSubstring("format=csv")))
	g.Expect(page).NotTo(ContainSubstring("planted"))
}

// TestAuditLogIsAppendOnly: no method changes or deletes an entry, whoever asks.
func TestAuditLogIsAppendOnly(t *testing.T) {
	f := startConsole(t)
	tok := f.token(t, audrey, fakeoidc.TokenOptions{})
	for _, path := range []string{"/api/v1/audit", "/api/v1/audit/1"} {
		for _, method := range []string{http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodPost} {
			for _, who := range []string{"", tok} {
				g := NewWithT(t)
				r := f.call(t, method, path, who, map[string]string{"result": "ok"})
				g.Expect(r.Status).To(Equal(http.StatusMethodNotAllowed), "%s %s: %s", method, path, r.Body)
				g.Expect(r.problem(t).Detail).To(ContainSubstring("append-only"))
			}
		}
	}
}

// TestAuditLogUnavailable: a history database that cannot be opened leaves the console serving
// VMs and changes; only the audit log answers 503, saying why.
func TestAuditLogUnavailable(t *testing.T) {
	g := NewWithT(t)
	f := startConsoleWithHistory(t, nil, "mysql://nowhere/history")
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	r := f.call(t, http.MethodGet, "/api/v1/vms?namespace="+teamA, tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	r = f.call(t, http.MethodPost, "/api/v1/vms", tok, console.CreateVMRequest{Namespace: teamA, Name: "unaudited-vm", Cluster: "pve", Template: "9000"})
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	r = f.call(t, http.MethodGet, "/api/v1/audit", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusServiceUnavailable), string(r.Body))
	g.Expect(r.problem(t).Detail).To(And(ContainSubstring("cannot be opened"), ContainSubstring("mysql://nowhere/history")))
	b := newBrowser(t)
	f.signIn(t, b, alice, false)
	code, page, _ := b.get(t, f.URL+"/audit")
	g.Expect(code).To(Equal(http.StatusServiceUnavailable))
	g.Expect(strings.ToLower(page)).To(ContainSubstring("audit log unavailable"))
}
