package console

import (
	"bytes"
	"context"
	"crypto"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
)

const (
	teamA = "team-a"
	teamB = "team-b"
)

// historyFixture is a console over a real SQLite history with an installation's signing key
// published in the console's namespace, and people whose Kubernetes RBAC a client plays.
type historyFixture struct {
	s      *Server
	store  history.Store
	dbPath string
	signer provenance.Signer
	// console is the console's own client: it holds the public key ConfigMap.
	console client.Client
}

func newHistoryFixture(t *testing.T) *historyFixture {
	t.Helper()
	g := NewWithT(t)
	f := &historyFixture{dbPath: filepath.Join(t.TempDir(), "h.db")}
	store, err := history.OpenSQLite(f.dbPath)
	g.Expect(err).NotTo(HaveOccurred())
	f.store = store
	t.Cleanup(func() { _ = store.Close() })
	key, err := provenance.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	f.signer, err = provenance.NewSigner(key)
	g.Expect(err).NotTo(HaveOccurred())
	pub, err := provenance.MarshalPublicKeyPEM(f.signer.Public())
	g.Expect(err).NotTo(HaveOccurred())
	f.console = fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: custody.ConfigMapName},
		Data:       map[string]string{custody.PublicKeyField: string(pub), custody.KeyIDField: f.signer.KeyID()},
	}).Build()

	q := newAuditQueue("sqlite://"+f.dbPath, func(context.Context, string) (history.Store, error) { return store, nil }, logr.Discard())
	g.Expect(q.openStore(context.Background())).To(Succeed())
	f.s = &Server{audit: q, log: logr.Discard(), inventory: &Inventory{namespaces: []string{teamA, teamB}}}
	f.s.publicKeys = func(ctx context.Context) ([]crypto.PublicKey, error) {
		return custody.PublicKeys(ctx, f.console, DefaultNamespace)
	}
	return f
}

// person is a caller whose RBAC lets them list MachineClaims in namespaces only, or, when
// clusterWide, list MachineClaims and Namespaces everywhere.
func person(user string, clusterWide bool, namespaces ...string) *caller {
	base := fake.NewClientBuilder().WithScheme(api.NewScheme()).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if clusterWide || o.Namespace != "" && slices.Contains(namespaces, o.Namespace) {
			return cl.List(ctx, list, opts...)
		}
		return apierrors.NewForbidden(schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "machineclaims"}, "",
			errors.New("user "+user+" may not list them here"))
	}})
	return &caller{authenticated: authenticated{Principal: Principal{User: user, Name: user}}, Client: c}
}

var (
	alice   = person("oidc:alice@example.com", false, teamA)
	bob     = person("oidc:bob@example.com", false, teamB)
	audrey  = person("oidc:audrey@example.com", true)
	nobody  = person("oidc:nobody@example.com", false)
	baseday = time.Date(2026, 1, 20, 12, 0, 0, 0, time.UTC)
)

// handler serves the job history's API and pages to c, as the console routes them.
func (f *historyFixture) handler(c *caller) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range f.s.historyRoutes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, func(w http.ResponseWriter, r *http.Request) { rt.Handler(w, r, c) })
	}
	registerHistoryReadOnly(mux)
	for path, page := range map[string]func(http.ResponseWriter, *http.Request, *caller){
		"GET /history": f.s.historyPage, "GET /history/stats": f.s.historyStatsPage, "GET /history/jobs/{platform}/{id}": f.s.historyJobPage,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { page(w, r, c) })
	}
	return mux
}

// get answers c's request of path.
func (f *historyFixture) do(c *caller, method, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.handler(c).ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func decodeAs[T any](g Gomega, w *httptest.ResponseRecorder) T {
	var v T
	g.Expect(json.Unmarshal(w.Body.Bytes(), &v)).To(Succeed(), w.Body.String())
	return v
}

// job is a finished job of namespace's pool, queued at queued, picked up after pickup, run for ran.
func job(namespace, pool, id string, queued time.Time, pickup, ran time.Duration, outcome history.Outcome) history.JobRecord {
	at := func(d time.Duration) *time.Time { t := queued.Add(d); return &t }
	return history.JobRecord{Namespace: namespace, Pool: pool, Platform: "github", JobID: id, JobURL: "https://github.com/acme/web/actions/runs/1/job/" + id,
		Repository: "acme/web", Labels: []string{"linux", "x64"}, Runner: pool + "-runner-" + id,
		VM:       history.VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "pve-1", VMID: "9" + id, Name: pool + "-" + id},
		Template: history.TemplateRef{Name: "ubuntu-2404-runner", ID: "9000", Digest: "sha256:abc"},
		Identity: history.Identity{SPIFFEID: "spiffe://fleet.example/vm/" + id, SVIDSerial: "01", TPMEKHash: "ek" + id},
		Times: history.JobTimes{Queued: at(0), VMRequested: at(time.Second), Cloned: at(4 * time.Second), Booted: at(9 * time.Second),
			Attested: at(pickup - time.Second), JobStarted: at(pickup), JobFinished: at(pickup + ran), VMDestroyed: at(pickup + ran + 2*time.Second)},
		Outcome: outcome}
}

// put stores r as it is.
func (f *historyFixture) put(t *testing.T, r history.JobRecord) history.JobRecord {
	t.Helper()
	NewWithT(t).Expect(f.store.UpsertJob(context.Background(), r)).To(Succeed())
	if r.ID == "" {
		r.ID = r.Platform + "/" + r.JobID
	}
	return r
}

// seal signs signed, as the recorder does, and stores r with that envelope.
func (f *historyFixture) seal(t *testing.T, signer provenance.Signer, r, signed history.JobRecord) history.JobRecord {
	t.Helper()
	g := NewWithT(t)
	st, err := provenance.NewStatement(signed.Platform, signed.JobID, signed)
	g.Expect(err).NotTo(HaveOccurred())
	env, err := signer.Sign(st)
	g.Expect(err).NotTo(HaveOccurred())
	r.Envelope, err = json.Marshal(env)
	g.Expect(err).NotTo(HaveOccurred())
	return f.put(t, r)
}

func ids(items []HistoryJob) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

// TestHistoryListFiltersAndPages: the listing's filters select, pages continue without a gap or a
// repeat, newest first, and no envelope is listed.
func TestHistoryListFiltersAndPages(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	for i, o := range []history.Outcome{history.OutcomeSucceeded, history.OutcomeFailed, history.OutcomeSucceeded, history.OutcomeCancelled, history.OutcomeUnknown} {
		r := job(teamA, "linux", string(rune('1'+i)), baseday.Add(time.Duration(i)*time.Hour), 30*time.Second, time.Minute, o)
		if i == 2 {
			r.Pool, r.Repository = "windows", "acme/api"
		}
		if i == 0 {
			f.seal(t, f.signer, r, r)
		} else {
			f.put(t, r)
		}
	}

	w := f.do(alice, "GET", "/api/v1/history/jobs")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	all := decodeAs[HistoryJobList](g, w)
	g.Expect(ids(all.Items)).To(Equal([]string{"github/5", "github/4", "github/3", "github/2", "github/1"}))
	g.Expect(all.Next).To(BeEmpty())
	g.Expect(all.Items[4].Sealed).To(BeTrue())
	g.Expect(all.Items[3].Sealed).To(BeFalse())
	g.Expect(w.Body.String()).NotTo(ContainSubstring("envelope"), "the listing never carries the envelope")

	for query, want := range map[string][]string{
		"?pool=windows":        {"github/3"},
		"?repository=acme/web": {"github/5", "github/4", "github/2", "github/1"},
		"?outcome=succeeded":   {"github/3", "github/1"},
		"?outcome=cancelled":   {"github/4"},
		"?from=2026-01-20T13:00:00Z&to=2026-01-20T15:00:00Z": {"github/3", "github/2"},
		"?namespace=" + teamA + "&pool=linux&outcome=failed": {"github/2"},
	} {
		w := f.do(alice, "GET", "/api/v1/history/jobs"+query)
		g.Expect(w.Code).To(Equal(http.StatusOK), query)
		g.Expect(ids(decodeAs[HistoryJobList](g, w).Items)).To(Equal(want), query)
	}

	var paged []string
	next := ""
	for pages := 0; ; pages++ {
		g.Expect(pages).To(BeNumerically("<", 5))
		w := f.do(alice, "GET", "/api/v1/history/jobs?limit=2&before="+next)
		g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
		page := decodeAs[HistoryJobList](g, w)
		paged = append(paged, ids(page.Items)...)
		if next = page.Next; next == "" {
			break
		}
	}
	g.Expect(paged).To(Equal(ids(all.Items)))
}

// TestHistoryListRefusesBadFilters: each bad filter is a 400 naming its field.
func TestHistoryListRefusesBadFilters(t *testing.T) {
	f := newHistoryFixture(t)
	for query, field := range map[string]string{
		"outcome=won":       "outcome",
		"from=yesterday":    "from",
		"to=2026-01-20":     "to",
		"limit=0":           "limit",
		"limit=1001":        "limit",
		"before=not-a-page": "before",
		"format=xml":        "format",
	} {
		t.Run(query, func(t *testing.T) {
			g := NewWithT(t)
			w := f.do(alice, "GET", "/api/v1/history/jobs?"+query)
			g.Expect(w.Code).To(Equal(http.StatusBadRequest))
			g.Expect(decodeAs[Problem](g, w).Errors).To(ContainElement(HaveField("Field", field)))
		})
	}
}

// TestHistoryCSV: the export has one row per record with the main columns, every page of them,
// and no cell a spreadsheet would run.
func TestHistoryCSV(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	r := job(teamA, "linux", "7", baseday, 30*time.Second, time.Minute, history.OutcomeFailed)
	r.FailureReason = "=HYPERLINK(\"http://evil\")"
	f.seal(t, f.signer, r, r)
	f.put(t, job(teamA, "linux", "8", baseday.Add(time.Hour), 0, 0, ""))
	f.put(t, job(teamB, "linux", "9", baseday, 0, 0, ""))

	w := f.do(alice, "GET", "/api/v1/history/jobs?format=csv")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	g.Expect(w.Header().Get("Content-Type")).To(HavePrefix("text/csv"))
	g.Expect(w.Header().Get("Content-Disposition")).To(ContainSubstring("attachment"))
	rows, err := csv.NewReader(bytes.NewReader(w.Body.Bytes())).ReadAll()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rows).To(HaveLen(3), "the header and team-a's two records")
	g.Expect(rows[0]).To(Equal([]string{"id", "namespace", "pool", "platform", "jobID", "repository", "runner", "provider",
		"hypervisorCluster", "host", "vmid", "template", "spiffeID", "queued", "vmRequested", "cloned", "booted", "attested",
		"jobStarted", "jobFinished", "vmDestroyed", "outcome", "failureReason", "sealed"}))
	g.Expect(rows[1][0]).To(Equal("github/8"))
	g.Expect(rows[2]).To(Equal([]string{"github/7", teamA, "linux", "github", "7", "acme/web", "linux-runner-7", "proxmox", "pve",
		"pve-1", "97", "ubuntu-2404-runner", "spiffe://fleet.example/vm/7", "2026-01-20T12:00:00Z", "2026-01-20T12:00:01Z",
		"2026-01-20T12:00:04Z", "2026-01-20T12:00:09Z", "2026-01-20T12:00:29Z", "2026-01-20T12:00:30Z", "2026-01-20T12:01:30Z",
		"2026-01-20T12:01:32Z", "failed", `'=HYPERLINK("http://evil")`, "true"}))
	g.Expect(w.Body.String()).NotTo(ContainSubstring("payloadType"))

	w = f.do(alice, "GET", "/api/v1/history/jobs?format=csv&limit=1")
	rows, _ = csv.NewReader(bytes.NewReader(w.Body.Bytes())).ReadAll()
	g.Expect(rows).To(HaveLen(2), "a limit bounds the export")
}

// TestHistoryNamespaceScoping plays a person of team-a after team-b's records: by listing, by
// filter and by ID, they get nothing, and the answer for an existing record of team-b is the
// answer for one that does not exist. A record without a namespace is for cluster-wide readers.
func TestHistoryNamespaceScoping(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	mine := job(teamA, "linux", "100", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
	f.seal(t, f.signer, mine, mine)
	theirs := job(teamB, "secret-pool", "200", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
	theirs.Repository = "bob/private"
	f.seal(t, f.signer, theirs, theirs)
	orphan := job("", "", "300", baseday, 10*time.Second, time.Minute, history.OutcomeUnknown)
	f.put(t, orphan)

	w := f.do(alice, "GET", "/api/v1/history/jobs")
	g.Expect(ids(decodeAs[HistoryJobList](g, w).Items)).To(Equal([]string{"github/100"}))
	for _, query := range []string{"?repository=bob/private", "?pool=secret-pool"} {
		w := f.do(alice, "GET", "/api/v1/history/jobs"+query)
		g.Expect(w.Code).To(Equal(http.StatusOK))
		g.Expect(decodeAs[HistoryJobList](g, w).Items).To(BeEmpty(), query)
	}
	w = f.do(alice, "GET", "/api/v1/history/jobs?namespace="+teamB)
	g.Expect(w.Code).To(Equal(http.StatusForbidden), "as the VM list refuses a namespace one may not list")
	g.Expect(w.Body.String()).NotTo(ContainSubstring("github/200"))
	w = f.do(alice, "GET", "/api/v1/history/jobs?format=csv&namespace="+teamB)
	g.Expect(w.Code).To(Equal(http.StatusForbidden))
	w = f.do(alice, "GET", "/api/v1/history/stats?namespace="+teamB)
	g.Expect(w.Code).To(Equal(http.StatusForbidden))
	w = f.do(alice, "GET", "/api/v1/history/stats?window=30d")
	g.Expect(w.Body.String()).NotTo(ContainSubstring("secret-pool"))

	missing := f.do(alice, "GET", "/api/v1/history/jobs/github/404404")
	g.Expect(missing.Code).To(Equal(http.StatusNotFound))
	for _, path := range []string{"/api/v1/history/jobs/github/200", "/api/v1/history/jobs/github/200?format=envelope",
		"/api/v1/history/jobs/github/300"} {
		w := f.do(alice, "GET", path)
		g.Expect(w.Code).To(Equal(http.StatusNotFound), path)
		g.Expect(w.Body.String()).To(Equal(missing.Body.String()), "%s: answered as a record that does not exist", path)
	}
	w = f.do(alice, "GET", "/history/jobs/github/200")
	g.Expect(w.Code).To(Equal(http.StatusNotFound))
	g.Expect(w.Body.String()).NotTo(Or(ContainSubstring("bob/private"), ContainSubstring("secret-pool")))

	w = f.do(nobody, "GET", "/api/v1/history/jobs")
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(decodeAs[HistoryJobList](g, w).Items).To(BeEmpty())

	w = f.do(bob, "GET", "/api/v1/history/jobs/github/200")
	g.Expect(w.Code).To(Equal(http.StatusOK), "bob reads his own namespace's record")
	w = f.do(audrey, "GET", "/api/v1/history/jobs")
	g.Expect(ids(decodeAs[HistoryJobList](g, w).Items)).To(ConsistOf("github/100", "github/200", "github/300"))
	w = f.do(audrey, "GET", "/api/v1/history/jobs/github/300")
	g.Expect(w.Code).To(Equal(http.StatusOK), "a cluster-wide reader reads a record without a namespace")
}

// TestHistoryIsReadOnly: no method but GET reaches the job history, whoever asks.
func TestHistoryIsReadOnly(t *testing.T) {
	f := newHistoryFixture(t)
	f.put(t, job(teamA, "linux", "1", baseday, 0, 0, ""))
	for _, path := range []string{"/api/v1/history/jobs", "/api/v1/history/jobs/github/1", "/api/v1/history/stats"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			g := NewWithT(t)
			w := f.do(audrey, method, path)
			g.Expect(w.Code).To(Equal(http.StatusMethodNotAllowed), "%s %s", method, path)
			g.Expect(w.Header().Get("Allow")).To(Equal("GET, HEAD"))
		}
	}
	_, err := f.store.Job(context.Background(), "github/1")
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "still there")
}

// TestHistoryUnavailable: a database that cannot be opened is a 503 with its reason on every read.
func TestHistoryUnavailable(t *testing.T) {
	f := newHistoryFixture(t)
	f.s.audit = newAuditQueue("sqlite:///nowhere/h.db", func(context.Context, string) (history.Store, error) {
		return nil, errors.New("disk on fire")
	}, logr.Discard())
	_ = f.s.audit.openStore(context.Background())
	for _, path := range []string{"/api/v1/history/jobs", "/api/v1/history/jobs/github/1", "/api/v1/history/stats", "/history"} {
		g := NewWithT(t)
		w := f.do(alice, "GET", path)
		g.Expect(w.Code).To(Equal(http.StatusServiceUnavailable), path)
		g.Expect(w.Body.String()).To(ContainSubstring("disk on fire"))
	}
}

// TestOpenAPIDescribesEveryRoute: the OpenAPI document names exactly the API's operations, and each
// schema it refers to exists.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	g := NewWithT(t)
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	g.Expect(json.Unmarshal(openAPIDocument, &doc)).To(Succeed())
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	s := &Server{}
	s.routes = append(s.apiRoutes(), s.historyRoutes()...)
	g.Expect(documented).To(Equal(s.Operations()))
	for _, ref := range refsIn(openAPIDocument) {
		g.Expect(doc.Components.Schemas).To(HaveKey(strings.TrimPrefix(ref, "#/components/schemas/")), ref)
	}
}

func refsIn(doc []byte) []string {
	var out []string
	for _, part := range strings.Split(string(doc), `"$ref": "`)[1:] {
		ref, _, _ := strings.Cut(part, `"`)
		out = append(out, ref)
	}
	return out
}
