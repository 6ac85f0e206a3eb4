package hypervisor

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// fakeProvider is a Provider that only counts Close; the cache never calls anything else.
type fakeProvider struct {
	Provider
	id     int
	closed atomic.Bool
}

func (f *fakeProvider) Close() { f.closed.Store(true) }

func TestCacheReusesProviderWhileConfigUnchanged(t *testing.T) {
	g := NewWithT(t)
	c := NewCache()
	builds := 0
	build := func() (Provider, error) { builds++; return &fakeProvider{id: builds}, nil }

	first, err := c.Get("ns/pve", "h1", build)
	g.Expect(err).NotTo(HaveOccurred())
	again, err := c.Get("ns/pve", "h1", build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(first))
	g.Expect(builds).To(Equal(1))

	other, err := c.Get("ns/other", "h1", build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(BeIdenticalTo(first))
	g.Expect(c.Len()).To(Equal(2))
}

func TestCacheRebuildsAndClosesOnConfigChange(t *testing.T) {
	g := NewWithT(t)
	c := NewCache()
	n := 0
	build := func() (Provider, error) { n++; return &fakeProvider{id: n}, nil }

	old, _ := c.Get("ns/pve", "h1", build)
	rotated, err := c.Get("ns/pve", "h2", build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rotated.(*fakeProvider).id).To(Equal(2))
	g.Eventually(old.(*fakeProvider).closed.Load).Should(BeTrue())
	g.Expect(rotated.(*fakeProvider).closed.Load()).To(BeFalse())

	c.Delete("ns/pve")
	g.Expect(c.Len()).To(BeZero())
	g.Eventually(rotated.(*fakeProvider).closed.Load).Should(BeTrue())
}

func TestCacheDoesNotCacheFailedBuilds(t *testing.T) {
	g := NewWithT(t)
	c := NewCache()
	_, err := c.Get("ns/pve", "h1", func() (Provider, error) { return nil, errors.New("bad CA bundle") })
	g.Expect(err).To(MatchError("bad CA bundle"))
	g.Expect(c.Len()).To(BeZero())

	p, err := c.Get("ns/pve", "h1", func() (Provider, error) { return &fakeProvider{id: 7}, nil })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.(*fakeProvider).id).To(Equal(7))
}

func TestCacheConcurrentGetsShareOneBuild(t *testing.T) {
	g := NewWithT(t)
	c := NewCache()
	var builds atomic.Int32
	build := func() (Provider, error) {
		builds.Add(1)
		time.Sleep(20 * time.Millisecond)
		return &fakeProvider{}, nil
	}
	var wg sync.WaitGroup
	got := make([]Provider, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Get("ns/pve", "h1", build)
			if err == nil {
				got[i] = p
			}
		}()
	}
	wg.Wait()
	g.Expect(builds.Load()).To(Equal(int32(1)))
	for _, p := range got {
		g.Expect(p).To(BeIdenticalTo(got[0]))
	}
}
