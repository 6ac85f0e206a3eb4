package github

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// eventRecorder is a minimal webhook receiver: verify, parse, remember job events.
type eventRecorder struct {
	mu     sync.Mutex
	events []platform.JobEvent
}

func (r *eventRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	hook, err := Webhooks.ParseWebhook(req.Header, body, testSecret)
	if err != nil {
		w.WriteHeader(platform.WebhookHTTPStatus(err))
		return
	}
	if hook.Kind == platform.WebhookJob {
		r.mu.Lock()
		r.events = append(r.events, *hook.Job)
		r.mu.Unlock()
	}
	w.WriteHeader(http.StatusAccepted)
}

func (r *eventRecorder) statesOf(jobID int64) []platform.JobState {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []platform.JobState
	for _, e := range r.events {
		if e.JobID == formatID(jobID) {
			out = append(out, e.State)
		}
	}
	return out
}

// TestRunnersRunEachJobExactlyOnce drives the loop HyperFleet automates: jobs are queued,
// runners are registered with JIT configs, each runner runs one job through the fake runner
// protocol, and the webhooks tell the story in order.
func TestRunnersRunEachJobExactlyOnce(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recorder := &eventRecorder{}
	receiver := httptest.NewServer(recorder)
	t.Cleanup(receiver.Close)
	fake, c := newTestClient(t, fakegithub.Options{WebhookURL: receiver.URL, WebhookSecret: string(testSecret)}, nil)

	const jobs = 4
	for range jobs {
		fake.CreateJob("acme/api", []string{"self-hosted", "Linux"})
	}
	demand, err := c.QueuedJobs(ctx, orgScope("acme"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(platform.FilterJobs(demand, []string{"linux"})).To(HaveLen(jobs))

	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for i := range jobs {
		encoded, _, err := jitConfig(c, ctx, orgScope("acme"), platform.RunnerSpec{Name: fmt.Sprintf("hf-linux-%d", i), Labels: []string{"linux"}})
		g.Expect(err).NotTo(HaveOccurred())
		runner, err := fakegithub.NewRunnerClient(encoded, nil)
		g.Expect(err).NotTo(HaveOccurred())
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := runner.RunOnce(ctx, 10*time.Millisecond)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}

	g.Expect(fake.VerifyEachJobRanOnce()).To(Succeed())
	runnerNames := map[string]bool{}
	for _, j := range fake.Jobs() {
		runnerNames[j.RunnerName] = true
	}
	g.Expect(runnerNames).To(HaveLen(jobs), "one job per runner")
	remaining, err := c.ListRunners(ctx, orgScope("acme"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remaining).To(BeEmpty(), "ephemeral runners are gone after their job")
	demand, err = c.QueuedJobs(ctx, orgScope("acme"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(demand).To(BeEmpty())

	for _, j := range fake.Jobs() {
		g.Eventually(func() []platform.JobState { return recorder.statesOf(j.ID) }).
			WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).
			Should(Equal([]platform.JobState{platform.JobQueued, platform.JobInProgress, platform.JobCompleted}))
	}
}

func TestIdleRunnerWithoutMatchingJobGoesAway(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	job := fake.CreateJob("acme/api", []string{"self-hosted", "gpu"})
	encoded, _, err := jitConfig(c, context.Background(), repoScope("acme/api"), platform.RunnerSpec{Name: "hf-cpu", Labels: []string{"linux"}})
	g.Expect(err).NotTo(HaveOccurred())
	runner, err := fakegithub.NewRunnerClient(encoded, nil)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()

	_, err = runner.RunOnce(ctx, 10*time.Millisecond)

	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	got, _ := fake.Job(job.ID)
	g.Expect(got.Status).To(Equal(fakegithub.JobQueued))
	g.Expect(fake.Runners()).To(BeEmpty())
}
