package fakegithub_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestJITConfigRateLimit(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fake := fakegithub.StartForTest(t, fakegithub.Options{JITPerWindow: 3, Clock: clock})
	auth := "token " + installationToken(t, fake, "acme")
	jit := func(name string) response {
		return call(t, http.MethodPost, fake.URL()+"/repos/acme/api/actions/runners/generate-jitconfig", auth,
			map[string]any{"name": name, "runner_group_id": 1, "labels": []string{"linux"}})
	}
	for i := range 3 {
		g.Expect(jit(fmt.Sprint("r", i)).status).To(Equal(http.StatusCreated))
	}
	r := jit("r3")
	g.Expect(r.status).To(Equal(http.StatusForbidden), "the fourth in a minute is over the limit")
	g.Expect(r.header.Get("Retry-After")).To(Equal("60"))
	g.Expect(r.json(t)).To(HaveKeyWithValue("message", "You have exceeded a secondary rate limit."))
	g.Expect(fake.JITRefusals()).To(Equal(1))
	g.Expect(fake.Runners()).To(HaveLen(3), "a refused request registers no runner")

	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	g.Expect(jit("r3").status).To(Equal(http.StatusCreated), "the window moved on")
}
