package console

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// TestJobHistoryVerifiesWithTheConsolesOwnRights: with exactly the RBAC of config/console/rbac,
// the console reads the installation's public key and shows a sealed record of team-a verified to
// alice, in the API and in Chromium; bob of team-b is told it does not exist.
func TestJobHistoryVerifiesWithTheConsolesOwnRights(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key, err := provenance.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	signer, err := provenance.NewSigner(key)
	g.Expect(err).NotTo(HaveOccurred())
	pub, err := provenance.MarshalPublicKeyPEM(signer.Public())
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: console.DefaultNamespace, Name: custody.ConfigMapName},
		Data: map[string]string{custody.PublicKeyField: string(pub), custody.KeyIDField: signer.KeyID()}}
	g.Expect(env.Client.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })

	// The records a recorder would have written, sealed, before the console starts.
	path := filepath.Join(t.TempDir(), "history.db")
	store, err := history.OpenSQLite(path)
	g.Expect(err).NotTo(HaveOccurred())
	queued := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	at := func(d time.Duration) *time.Time { t := queued.Add(d); return &t }
	for i, id := range []string{"4711", "4712"} {
		r := history.JobRecord{Namespace: teamA, Pool: "linux-x64", Platform: "github", JobID: id, Repository: "acme/web",
			JobURL: "https://github.com/acme/web/actions/runs/17/job/" + id, Labels: []string{"self-hosted", "linux"}, Runner: "linux-x64-" + id,
			VM:       history.VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "pve-2", VMID: "310" + id[3:], Name: "linux-x64-" + id},
			Template: history.TemplateRef{Name: "ubuntu-2404-runner", ID: "9000"},
			Identity: history.Identity{SPIFFEID: "spiffe://hyperfleet.example/" + teamA + "/vm/310" + id[3:], SVIDSerial: "4f2a"},
			Times: history.JobTimes{Queued: at(0), VMRequested: at(2 * time.Second), Cloned: at(11 * time.Second), Booted: at(38 * time.Second),
				Attested: at(41 * time.Second), JobStarted: at(44 * time.Second), JobFinished: at(6*time.Minute + time.Duration(i)*time.Minute),
				VMDestroyed: at(6*time.Minute + time.Duration(i)*time.Minute + 9*time.Second)},
			Outcome: history.OutcomeSucceeded}
		st, err := provenance.NewStatement(r.Platform, r.JobID, r)
		g.Expect(err).NotTo(HaveOccurred())
		envelope, err := signer.Sign(st)
		g.Expect(err).NotTo(HaveOccurred())
		r.Envelope, err = json.Marshal(envelope)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(store.UpsertJob(ctx, r)).To(Succeed())
	}
	g.Expect(store.Close()).To(Succeed())
	f := startConsoleWithHistory(t, nil, "sqlite://"+path)

	r := f.call(t, http.MethodGet, "/api/v1/history/jobs/github/4711", f.token(t, alice, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	var d console.HistoryJobDetail
	r.decode(t, &d)
	g.Expect(d.Provenance).To(Equal(console.Provenance{Verified: true, KeyID: signer.KeyID()}),
		"the console's ServiceAccount reads the key ConfigMap with the shipped Role")
	r = f.call(t, http.MethodGet, "/api/v1/history/jobs/github/4711", f.token(t, bob, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusNotFound))

	bctx := newBrowserContext(t)
	g.Expect(chromedp.Do(bctx,
		chromedp.Navigate(f.URL+"/history/jobs/github/4711"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), alice.Username),
		chromedp.SendKeys(chromedp.ID("password"), alice.Password+kb.Enter),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	)).To(Succeed())
	badge, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#provenance [data-field="provenance"]`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(badge).To(Equal("verified"))
	shots := newScreenshots(t)
	shots.take(bctx, "13-history-job")
	for _, p := range []struct{ path, wait, shot string }{
		{"/history", "#history", "14-history"},
		{"/history/stats?window=7d", "#stats", "15-history-stats"},
	} {
		g.Expect(chromedp.Do(bctx, chromedp.Navigate(f.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))).To(Succeed(), p.path)
		shots.take(bctx, p.shot)
	}
}
