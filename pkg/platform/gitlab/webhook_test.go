package gitlab_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
)

// TestJobHooksFromRealPayloads: GitLab's own Job Hook shapes map deliberately: only a pending
// job is demand; created and manual jobs are held, running is in progress, failed completed.
// The project's path comes from the project object, or from the repository's homepage in
// payloads of versions that do not send it.
func TestJobHooksFromRealPayloads(t *testing.T) {
	tests := []struct {
		file       string
		status     string
		phase      gitlab.Phase
		runnerTags []string
	}{
		{"job_pending.json", "pending", gitlab.PhaseDemand, nil},
		{"job_created_without_project.json", "created", gitlab.PhaseHeld, nil},
		{"job_manual.json", "manual", gitlab.PhaseHeld, nil},
		{"job_running.json", "running", gitlab.PhaseInProgress, []string{"linux", "docker", "hyperfleet-pool-0123456789abcdef"}},
		{"job_failed.json", "failed", gitlab.PhaseCompleted, []string{"linux", "docker", "hyperfleet-pool-0123456789abcdef"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := NewWithT(t)
			d, err := gitlab.ParseDelivery(jobHookHeader(hookSecret), readPayload(t, tt.file), []byte(hookSecret))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Kind).To(Equal(gitlab.KindJob))
			j := d.Job
			g.Expect(j.JobID).To(Equal(int64(1977)))
			g.Expect(j.PipelineID).To(Equal(int64(2366)))
			g.Expect(j.ProjectID).To(Equal(int64(380)))
			g.Expect(j.ProjectPath).To(Equal("gitlab-org/gitlab-test"))
			g.Expect(j.URL).To(Equal("http://192.168.64.1:3005/gitlab-org/gitlab-test/-/jobs/1977"), "the job's page, for its record")
			g.Expect(j.Status).To(Equal(tt.status))
			g.Expect(j.Phase).To(Equal(tt.phase))
			g.Expect(j.RunnerTags).To(Equal(tt.runnerTags))
			g.Expect(j.DeliveryID).To(Equal("8c0b1e4f-5d2a-4b7e-9c3d-1f2e3a4b5c6d"))
			g.Expect(j.CreatedAt).To(Equal(time.Date(2021, 2, 23, 2, 41, 37, 0, time.UTC)))
		})
	}
}

// TestEveryStatusIsMappedOnPurpose: each status GitLab documents has a phase, and only
// pending asks for a VM.
func TestEveryStatusIsMappedOnPurpose(t *testing.T) {
	want := map[string]gitlab.Phase{
		"pending": gitlab.PhaseDemand,
		"created": gitlab.PhaseHeld, "waiting_for_resource": gitlab.PhaseHeld, "preparing": gitlab.PhaseHeld,
		"manual": gitlab.PhaseHeld, "scheduled": gitlab.PhaseHeld,
		"running": gitlab.PhaseInProgress, "canceling": gitlab.PhaseInProgress,
		"success": gitlab.PhaseCompleted, "failed": gitlab.PhaseCompleted, "canceled": gitlab.PhaseCompleted,
		"skipped": gitlab.PhaseCompleted,
	}
	for status, phase := range want {
		t.Run(status, func(t *testing.T) {
			g := NewWithT(t)
			got, ok := gitlab.PhaseOf(status)
			g.Expect(ok).To(BeTrue())
			g.Expect(got).To(Equal(phase))
			body := bytes.Replace(readPayload(t, "job_pending.json"), []byte(`"build_status": "pending"`), []byte(`"build_status": "`+status+`"`), 1)
			d, err := gitlab.ParseDelivery(jobHookHeader(hookSecret), body, []byte(hookSecret))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Job.Phase).To(Equal(phase))
		})
	}
	_, ok := gitlab.PhaseOf("bogus")
	NewWithT(t).Expect(ok).To(BeFalse())
	body := bytes.Replace(readPayload(t, "job_pending.json"), []byte(`"build_status": "pending"`), []byte(`"build_status": "bogus"`), 1)
	d, err := gitlab.ParseDelivery(jobHookHeader(hookSecret), body, []byte(hookSecret))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(d.Kind).To(Equal(gitlab.KindIgnored), "an undocumented status is not acted on")
}

// TestForgedJobHooks plays the attacker: a delivery without the token, with a wrong one, with
// the token of another pool, or sent to a receiver with no secret configured is refused with
// ErrInvalidSignature (401) before its body is read; a body that does not parse is 400; events
// other than Job Hook are ignored.
func TestForgedJobHooks(t *testing.T) {
	body := readPayload(t, "job_pending.json")
	forged := []struct {
		name   string
		header http.Header
		secret string
	}{
		{"no token", jobHookHeader(""), hookSecret},
		{"wrong token", jobHookHeader("guess"), hookSecret},
		{"token of another pool", jobHookHeader("pool-b-webhook-secret"), hookSecret},
		{"prefix of the token", jobHookHeader(hookSecret[:len(hookSecret)-1]), hookSecret},
		{"token with a suffix", jobHookHeader(hookSecret + "x"), hookSecret},
		{"no secret configured", jobHookHeader(""), ""},
	}
	for _, tt := range forged {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := gitlab.ParseDelivery(tt.header, body, []byte(tt.secret))
			g.Expect(errors.Is(err, platform.ErrInvalidSignature)).To(BeTrue(), "%v", err)
			g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusUnauthorized))
		})
	}
	t.Run("malformed", func(t *testing.T) {
		g := NewWithT(t)
		for _, b := range [][]byte{[]byte("{"), []byte(`{"object_kind":"build"}`), []byte(`{"object_kind":"push","build_id":1,"project_id":2}`)} {
			_, err := gitlab.ParseDelivery(jobHookHeader(hookSecret), b, []byte(hookSecret))
			g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusBadRequest), string(b))
		}
		h := jobHookHeader(hookSecret)
		h.Del(gitlab.HeaderEvent)
		_, err := gitlab.ParseDelivery(h, body, []byte(hookSecret))
		g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusBadRequest))
	})
	t.Run("other events", func(t *testing.T) {
		g := NewWithT(t)
		for _, ev := range []string{"Pipeline Hook", "Push Hook", "Merge Request Hook"} {
			h := jobHookHeader(hookSecret)
			h.Set(gitlab.HeaderEvent, ev)
			d, err := gitlab.ParseDelivery(h, []byte(`{"object_kind":"pipeline"}`), []byte(hookSecret))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Kind).To(Equal(gitlab.KindIgnored))
		}
		// An ignored event still needs the token.
		h := jobHookHeader("guess")
		h.Set(gitlab.HeaderEvent, "Pipeline Hook")
		_, err := gitlab.ParseDelivery(h, []byte(`{}`), []byte(hookSecret))
		g.Expect(errors.Is(err, platform.ErrInvalidSignature)).To(BeTrue())
	})
}
