package console

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/history/recorder"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
)

// TestHistoryJobVerified: a sealed record whose envelope verifies under the published key and
// signs exactly the stored record shows verified, with its timeline in order and the gaps between
// its moments; its envelope downloads as stored and verifies on its own.
func TestHistoryJobVerified(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	r := job(teamA, "linux", "4711", baseday, 42*time.Second, 3*time.Minute, history.OutcomeSucceeded)
	f.seal(t, f.signer, r, r)

	w := f.do(alice, "GET", "/api/v1/history/jobs/github/4711")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	d := decodeAs[HistoryJobDetail](g, w)
	g.Expect(d.Provenance).To(Equal(Provenance{Verified: true, KeyID: f.signer.KeyID()}))
	g.Expect(d.Sealed).To(BeTrue())
	g.Expect(d.Envelope).To(BeEmpty(), "the envelope is downloaded on its own")
	g.Expect(d.Repository).To(Equal("acme/web"))
	var steps []string
	var gaps []float64
	for _, s := range d.Timeline {
		steps = append(steps, s.Step)
		g.Expect(s.Time).NotTo(BeNil(), s.Step)
		if s.SincePreviousSeconds != nil {
			gaps = append(gaps, *s.SincePreviousSeconds)
		}
	}
	g.Expect(steps).To(Equal([]string{"queued", "vmRequested", "cloned", "booted", "attested", "jobStarted", "jobFinished", "vmDestroyed"}))
	g.Expect(gaps).To(Equal([]float64{1, 3, 5, 32, 1, 180, 2}))

	w = f.do(alice, "GET", "/api/v1/history/jobs/github/4711?format=envelope")
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(w.Header().Get("Content-Disposition")).To(ContainSubstring(`filename="hyperfleet-job-github_4711.envelope.json"`))
	env, err := provenance.ParseEnvelope(w.Body.Bytes())
	g.Expect(err).NotTo(HaveOccurred())
	st, err := provenance.Verify(env, f.signer.Public())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Subject[0].Name).To(Equal("github/4711"))

	page := f.do(alice, "GET", "/history/jobs/github/4711")
	g.Expect(page.Code).To(Equal(http.StatusOK))
	g.Expect(page.Body.String()).To(And(ContainSubstring(`data-field="provenance">verified</span>`), ContainSubstring(f.signer.KeyID()),
		ContainSubstring(`href="/api/v1/history/jobs/github/4711?format=envelope"`), ContainSubstring("+3m 00s"),
		ContainSubstring(`href="/history" aria-current="page"`), ContainSubstring("spiffe://fleet.example/vm/4711")))
}

// TestHistoryJobNotVerified: every way a record can fail its check shows not verified with the
// reason, and the record is still shown.
func TestHistoryJobNotVerified(t *testing.T) {
	ctx := context.Background()
	f := newHistoryFixture(t)
	other, err := provenance.GenerateKey()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	otherSigner, err := provenance.NewSigner(other)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	t.Run("a stored field changed after sealing", func(t *testing.T) {
		g := NewWithT(t)
		r := job(teamA, "linux", "1", baseday, 10*time.Second, time.Minute, history.OutcomeFailed)
		f.seal(t, f.signer, r, r)
		// Whoever holds the database drops the trigger that guards sealed rows and rewrites one.
		db, err := sql.Open("sqlite", f.dbPath)
		g.Expect(err).NotTo(HaveOccurred())
		defer db.Close()
		_, err = db.ExecContext(ctx, `DROP TRIGGER jobs_sealed`)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = db.ExecContext(ctx, `UPDATE jobs SET outcome = 'succeeded', vm_host = 'pve-9' WHERE id = 'github/1'`)
		g.Expect(err).NotTo(HaveOccurred())

		w := f.do(alice, "GET", "/api/v1/history/jobs/github/1")
		g.Expect(w.Code).To(Equal(http.StatusOK))
		d := decodeAs[HistoryJobDetail](g, w)
		g.Expect(d.Outcome).To(Equal(history.OutcomeSucceeded), "the record is shown as stored")
		g.Expect(d.Provenance).To(Equal(Provenance{KeyID: f.signer.KeyID(),
			Reason: "the stored record differs from the signed one in outcome, vm.host"}))
		page := f.do(alice, "GET", "/history/jobs/github/1")
		g.Expect(page.Body.String()).To(And(ContainSubstring(`data-field="provenance">not verified</span>`),
			ContainSubstring("differs from the signed one in outcome, vm.host")))
	})

	for _, tc := range []struct {
		name   string
		record func() history.JobRecord
		reason string
	}{
		{"a different record signed", func() history.JobRecord {
			r := job(teamA, "linux", "2", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
			signed := r
			signed.Repository = "acme/other"
			return f.seal(t, f.signer, r, signed)
		}, "the stored record differs from the signed one in repository"},
		{"another job's envelope", func() history.JobRecord {
			r := job(teamA, "linux", "3", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
			return f.seal(t, f.signer, r, job(teamA, "linux", "33", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded))
		}, `the envelope signs job "github/33", not this record ("github/3")`},
		{"signed by a key the installation does not publish", func() history.JobRecord {
			r := job(teamA, "linux", "4", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
			return f.seal(t, otherSigner, r, r)
		}, "unknown signing key"},
		{"an altered envelope", func() history.JobRecord {
			r := job(teamA, "linux", "5", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
			st, _ := provenance.NewStatement(r.Platform, r.JobID, r)
			env, _ := f.signer.Sign(st)
			forged, _ := provenance.NewStatement(r.Platform, r.JobID, job(teamA, "linux", "5", baseday, 0, 0, history.OutcomeFailed))
			other, _ := otherSigner.Sign(forged)
			env.Payload = other.Payload
			r.Envelope, _ = json.Marshal(env)
			return f.put(t, r)
		}, "bad signature"},
		{"not sealed", func() history.JobRecord {
			return f.put(t, job(teamA, "linux", "6", baseday, 10*time.Second, 0, ""))
		}, reasonNotSealed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := tc.record()
			w := f.do(alice, "GET", "/api/v1/history/jobs/"+r.ID)
			g.Expect(w.Code).To(Equal(http.StatusOK))
			p := decodeAs[HistoryJobDetail](g, w).Provenance
			g.Expect(p.Verified).To(BeFalse())
			g.Expect(p.Reason).To(ContainSubstring(tc.reason))
		})
	}

	t.Run("public key unavailable", func(t *testing.T) {
		g := NewWithT(t)
		r := job(teamA, "linux", "7", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
		f.seal(t, f.signer, r, r)
		keys := f.console
		f.console = fake.NewClientBuilder().Build()
		defer func() { f.console = keys }()
		w := f.do(alice, "GET", "/api/v1/history/jobs/github/7")
		g.Expect(w.Code).To(Equal(http.StatusOK), "the record is shown without its check")
		p := decodeAs[HistoryJobDetail](g, w).Provenance
		g.Expect(p.Verified).To(BeFalse())
		g.Expect(p.Reason).To(And(HavePrefix("public key unavailable: "), ContainSubstring(custody.ConfigMapName)))
		page := f.do(alice, "GET", "/history/jobs/github/7")
		g.Expect(page.Code).To(Equal(http.StatusOK))
		g.Expect(page.Body.String()).To(ContainSubstring("public key unavailable"))
	})

	t.Run("a previous key still verifies", func(t *testing.T) {
		g := NewWithT(t)
		r := job(teamA, "linux", "8", baseday, 10*time.Second, time.Minute, history.OutcomeSucceeded)
		f.seal(t, otherSigner, r, r)
		cm := &corev1.ConfigMap{}
		g.Expect(f.console.Get(ctx, client.ObjectKey{Namespace: DefaultNamespace, Name: custody.ConfigMapName}, cm)).To(Succeed())
		previous, err := provenance.MarshalPublicKeyPEM(otherSigner.Public())
		g.Expect(err).NotTo(HaveOccurred())
		keys := f.console
		f.console = fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name},
			Data: map[string]string{custody.PublicKeyField: cm.Data[custody.PublicKeyField], "previous-0123456789abcdef.pem": string(previous)}}).Build()
		defer func() { f.console = keys }()
		w := f.do(alice, "GET", "/api/v1/history/jobs/github/8")
		g.Expect(decodeAs[HistoryJobDetail](g, w).Provenance).To(Equal(Provenance{Verified: true, KeyID: otherSigner.KeyID()}))
	})
}

// TestSignedFormIgnoresWhatTheStoreSets: the store's write time and its microsecond times do not
// make a faithfully stored record differ from the one signed.
func TestSignedFormIgnoresWhatTheStoreSets(t *testing.T) {
	g := NewWithT(t)
	signed := job(teamA, "linux", "1", baseday.Add(123456789*time.Nanosecond), time.Second, time.Second, history.OutcomeSucceeded)
	signed.ID = ""
	stored := signed
	stored.ID, stored.UpdatedAt, stored.Envelope = "github/1", time.Now(), []byte("{}")
	q := baseday.Add(123456 * time.Microsecond).In(time.FixedZone("X", 3600))
	stored.Times.Queued = &q
	g.Expect(changedFields(signedForm(signed), signedForm(stored))).To(BeEmpty())
	stored.Labels = []string{"linux"}
	g.Expect(changedFields(signedForm(signed), signedForm(stored))).To(Equal([]string{"labels"}))
}

// TestHistoryJobSealedByTheRecorder: a record sealed as the manager's recorder seals it (the stored
// record read back, signed, then its envelope written) shows verified.
func TestHistoryJobSealedByTheRecorder(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := newHistoryFixture(t)
	r := f.put(t, job(teamA, "linux", "9", baseday.Add(987654321*time.Nanosecond), 12*time.Second, time.Minute, history.OutcomeSucceeded))
	stored, err := f.store.Job(ctx, r.ID)
	g.Expect(err).NotTo(HaveOccurred())
	envelope, err := recorder.Seal(f.signer, stored)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.store.UpsertJob(ctx, history.JobRecord{ID: r.ID, Envelope: envelope})).To(Succeed())

	w := f.do(alice, "GET", "/api/v1/history/jobs/github/9")
	g.Expect(decodeAs[HistoryJobDetail](g, w).Provenance).To(Equal(Provenance{Verified: true, KeyID: f.signer.KeyID()}))
}
