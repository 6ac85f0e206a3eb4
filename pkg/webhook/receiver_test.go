package webhook_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

var linuxPool = fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}}

func TestFiftyQueuedJobsReachTheLedger(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, true)
	pool := h.createPool(t, "linux", linuxPool)
	other := h.createPool(t, "gpu", fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"gpu"}})

	var wg sync.WaitGroup
	statuses := make(chan int, 50)
	// GitHub delivers from many addresses; all of these come from one, so stay below the receiver's
	// per-source cap of requests in flight (32), which would rightly answer 429.
	slots := make(chan struct{}, 16)
	for i := range 50 {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			status, err := fakegithub.PostWebhook(t.Context(), h.client, h.url, secret, "workflow_job",
				fakegithub.NewDeliveryID(), job{id: int64(1000 + i), action: "queued"}.payload())
			if err != nil {
				status = 0
			}
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	for status := range statuses {
		g.Expect(status).To(Equal(http.StatusAccepted))
	}

	h.waitIdle(g)
	d := h.snapshot(g, pool)
	g.Expect(d.Queued).To(Equal(50))
	g.Expect(d.Jobs).To(HaveLen(50))
	g.Expect(h.snapshot(g, other).Jobs).To(BeEmpty())
	g.Expect(h.receiver.Stats().Recorded).To(Equal(uint64(50)))
	g.Expect(h.notifications(pool)).To(Equal(50))
}

func TestDuplicateAndReplayedDeliveriesAddNothing(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, true)
	pool := h.createPool(t, "linux", linuxPool)
	body := job{id: 1, action: "queued"}.payload()
	id := fakegithub.NewDeliveryID()

	g.Expect(h.post(g, id, body)).To(Equal(http.StatusAccepted))
	g.Expect(h.post(g, id, body)).To(Equal(http.StatusOK), "GitHub's redelivery reuses the delivery id")
	for range 3 {
		g.Expect(h.post(g, fakegithub.NewDeliveryID(), body)).To(Equal(http.StatusAccepted), "a replayed body under a new id is queued")
	}
	h.waitIdle(g)

	g.Expect(h.snapshot(g, pool).Jobs).To(HaveLen(1))
	s := h.receiver.Stats()
	g.Expect(s.Duplicates).To(Equal(uint64(1)))
	g.Expect(s.Recorded).To(Equal(uint64(1)))
	g.Expect(s.Unchanged).To(Equal(uint64(3)), "the ledger's forward-only rule drops replays")
	g.Expect(h.notifications(pool)).To(Equal(1))
}

func TestLateQueuedDeliveryDoesNotReopenACompletedJob(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, true)
	pool := h.createPool(t, "linux", linuxPool)

	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 5, action: "completed", runner: "hf-linux-1"}.payload())).To(Equal(http.StatusAccepted))
	h.waitIdle(g)
	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 5, action: "queued"}.payload())).To(Equal(http.StatusAccepted))
	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 5, action: "in_progress", runner: "hf-linux-1"}.payload())).To(Equal(http.StatusAccepted))
	h.waitIdle(g)

	d := h.snapshot(g, pool)
	g.Expect(d.Jobs["5"].State).To(Equal(platform.JobCompleted))
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Busy).To(BeEmpty())
}

func TestJobLifecycleThroughWebhooks(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	var processed []webhook.Processed
	h := startReceiver(t, webhook.Config{OnProcessed: func(p webhook.Processed) {
		mu.Lock()
		defer mu.Unlock()
		processed = append(processed, p)
	}}, true)
	pool := h.createPool(t, "linux", linuxPool)

	before := time.Now().Truncate(time.Second)
	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 9, action: "queued"}.payload())).To(Equal(http.StatusAccepted))
	h.waitIdle(g)
	d := h.snapshot(g, pool)
	g.Expect(d.Queued).To(Equal(1))
	g.Expect(d.Jobs["9"].FirstQueued).To(BeTemporally(">=", before), "the receive time is kept for latency")

	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 9, action: "in_progress", runner: "hf-linux-1"}.payload())).To(Equal(http.StatusAccepted))
	h.waitIdle(g)
	d = h.snapshot(g, pool)
	g.Expect(d.Queued).To(BeZero())
	g.Expect(d.Busy).To(Equal(map[string]string{"hf-linux-1": "9"}))

	mu.Lock()
	defer mu.Unlock()
	g.Expect(processed).To(HaveLen(2))
	g.Expect(processed[0].Pool).To(Equal(types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}))
	g.Expect(processed[0].ReceivedAt).To(BeTemporally(">=", before))
	g.Expect(processed[0].Changed).To(BeTrue())
}

func TestFullQueueAnswers503AndRedeliveryIsAccepted(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{QueueSize: 1}, false)
	pool := h.createPool(t, "linux", linuxPool)
	second := fakegithub.NewDeliveryID()

	g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 1, action: "queued"}.payload())).To(Equal(http.StatusAccepted))
	g.Expect(h.post(g, second, job{id: 2, action: "queued"}.payload())).To(Equal(http.StatusServiceUnavailable))
	g.Expect(h.receiver.Stats().QueueFull).To(Equal(uint64(1)))

	h.startWorkers(t)
	h.waitIdle(g)
	g.Expect(h.post(g, second, job{id: 2, action: "queued"}.payload())).To(Equal(http.StatusAccepted), "a refused delivery is not remembered as seen")
	h.waitIdle(g)
	g.Expect(h.snapshot(g, pool).Queued).To(Equal(2))
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name  string
		pools map[string]fleetv1.GitHubSpec
		job   job
		want  string // pool name; empty: unrouted
	}{
		{name: "repository pool preferred over organization pool",
			pools: map[string]fleetv1.GitHubSpec{
				"org":  {Organization: "acme", Labels: []string{"linux"}},
				"repo": {Organization: "acme", Repository: "acme/api", Labels: []string{"linux", "x64"}},
			},
			job: job{repository: "acme/api", labels: []string{"self-hosted", "linux"}}, want: "repo"},
		{name: "organization pool takes other repositories",
			pools: map[string]fleetv1.GitHubSpec{
				"org":  {Organization: "acme", Labels: []string{"linux"}},
				"repo": {Repository: "acme/api", Labels: []string{"linux"}},
			},
			job: job{repository: "acme/web", labels: []string{"self-hosted", "linux"}}, want: "org"},
		{name: "job labels are a subset of the pool's",
			pools: map[string]fleetv1.GitHubSpec{"big": {Organization: "acme", Labels: []string{"linux", "x64", "large"}}},
			job:   job{labels: []string{"self-hosted", "large"}}, want: "big"},
		{name: "fewest extra labels",
			pools: map[string]fleetv1.GitHubSpec{
				"gpu":   {Organization: "acme", Labels: []string{"linux", "gpu"}},
				"plain": {Organization: "acme", Labels: []string{"linux"}},
			},
			job: job{labels: []string{"linux"}}, want: "plain"},
		{name: "case-insensitive",
			pools: map[string]fleetv1.GitHubSpec{"linux": {Repository: "Acme/API", Labels: []string{"Linux", "X64"}}},
			job:   job{repository: "acme/api", labels: []string{"Self-Hosted", "LINUX", "x64"}}, want: "linux"},
		{name: "user-owned repository",
			pools: map[string]fleetv1.GitHubSpec{"mine": {Repository: "octocat/hello", Labels: []string{"linux"}}},
			job:   job{repository: "octocat/hello", userOwned: true, labels: []string{"linux"}}, want: "mine"},
		{name: "no pool has the labels",
			pools: map[string]fleetv1.GitHubSpec{"linux": {Organization: "acme", Labels: []string{"linux"}}},
			job:   job{labels: []string{"self-hosted", "windows"}}},
		{name: "GitHub-hosted job",
			pools: map[string]fleetv1.GitHubSpec{"linux": {Organization: "acme", Labels: []string{"linux"}}},
			job:   job{labels: []string{"ubuntu-latest"}}},
		{name: "other organization",
			pools: map[string]fleetv1.GitHubSpec{"linux": {Organization: "acme", Labels: []string{"linux"}}},
			job:   job{repository: "globex/api", labels: []string{"linux"}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := startReceiver(t, webhook.Config{}, true)
			pools := map[string]*fleetv1.RunnerPool{}
			for name, spec := range tt.pools {
				pools[name] = h.createPool(t, name, spec)
			}
			tt.job.id, tt.job.action = int64(500+i), "queued"
			g.Expect(h.post(g, fakegithub.NewDeliveryID(), tt.job.payload())).To(Equal(http.StatusAccepted))
			h.waitIdle(g)

			for name, pool := range pools {
				want := 0
				if name == tt.want {
					want = 1
				}
				g.Expect(h.snapshot(g, pool).Queued).To(Equal(want), fmt.Sprintf("pool %s", name))
			}
			if tt.want == "" {
				g.Expect(h.receiver.Stats().Unrouted).To(Equal(uint64(1)))
			}
		})
	}
}
