package demand_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server")
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// createPool creates a RunnerPool in a fresh namespace, so tests never share a ledger.
func createPool(t *testing.T, b *builder.RunnerPoolBuilder) *fleetv1.RunnerPool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demand-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	pool := b.Build()
	pool.Namespace = ns.Name
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	return pool
}

// clock is a settable time source for Store.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newStore(c *clock) *demand.Store {
	s := demand.NewStore(env.Client)
	s.Now = c.Now
	return s
}

func jobEvent(id int64, state platform.JobState, labels ...string) platform.JobEvent {
	if len(labels) == 0 {
		labels = []string{"self-hosted", "linux"}
	}
	ev := platform.JobEvent{JobID: strconv.FormatInt(id, 10), State: state, Labels: labels, Repository: "acme/api", Organization: "acme"}
	if state == platform.JobInProgress || state == platform.JobCompleted {
		ev.RunnerName = fmt.Sprintf("runner-%d", id)
	}
	return ev
}
