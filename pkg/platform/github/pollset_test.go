package github

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/api"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// TestPollSetSharesOnePollerPerInstallationAndScope: pools of one installation and scope share a
// poller, at the shortest of their intervals; webhook-only pools get none; a poller stops when
// no pool needs it.
func TestPollSetSharesOnePollerPerInstallationAndScope(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	acme := gh.InstallationID("acme")
	gh.CreateJob("acme/api", []string{"self-hosted", "linux"})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "github-app"},
		Data: map[string][]byte{KeyAppID: []byte(fmt.Sprint(gh.AppID())), KeyPrivateKey: gh.AppKeyPEM()}}
	pool := func(name string, demand fleetv1.GitHubDemand, interval time.Duration, edit func(*fleetv1.GitHubSpec)) *fleetv1.RunnerPool {
		spec := fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}, APIURL: gh.URL() + "/",
			CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}, Demand: demand}
		if interval > 0 {
			spec.PollInterval = &metav1.Duration{Duration: interval}
		}
		if edit != nil {
			edit(&spec)
		}
		return builder.NewRunnerPool(name, "team-a").WithGitHub(spec).Build()
	}
	objs := []client.Object{secret,
		pool("linux", fleetv1.GitHubDemandPolling, time.Minute, nil),
		pool("linux-gpu", fleetv1.GitHubDemandBoth, 20*time.Second, nil),
		pool("hooked", fleetv1.GitHubDemandWebhook, 0, nil),
		pool("api", fleetv1.GitHubDemandPolling, 0, func(s *fleetv1.GitHubSpec) { s.Repository = "acme/api" }),
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(objs...).Build()

	var mu sync.Mutex
	polls := map[string][]platform.PolledDemand{}
	set := &PollSet{Reader: c, Clients: &PoolClients{Reader: c, Transport: gh.HTTPClient().Transport},
		Feed: func(_ context.Context, d platform.PolledDemand) {
			mu.Lock()
			defer mu.Unlock()
			key := fmt.Sprint(d.Pools)
			polls[key] = append(polls[key], d)
		}}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); set.stopAll() }()
	g.Expect(set.Sync(runCtx)).To(Succeed())
	g.Expect(set.Running()).To(ConsistOf(fmt.Sprintf("%d|acme", acme), fmt.Sprintf("%d|acme/api", acme)))
	set.mu.Lock()
	g.Expect(set.running[fmt.Sprintf("%d|acme", acme)].interval).To(Equal(20 * time.Second))
	set.mu.Unlock()

	shared := fmt.Sprint([]types.NamespacedName{{Namespace: "team-a", Name: "linux"}, {Namespace: "team-a", Name: "linux-gpu"}})
	g.Eventually(func() []platform.PolledDemand {
		mu.Lock()
		defer mu.Unlock()
		return polls[shared]
	}, 20*time.Second).Should(ContainElement(And(
		HaveField("Installation", fmt.Sprint(acme)), HaveField("HeldToo", true), HaveField("Err", BeNil()),
		HaveField("Jobs", HaveLen(1)))))

	// A second Sync changes nothing; deleting the repository pool stops its poller only.
	g.Expect(set.Sync(runCtx)).To(Succeed())
	g.Expect(set.Running()).To(HaveLen(2))
	g.Expect(c.Delete(ctx, objs[4])).To(Succeed())
	g.Expect(set.Sync(runCtx)).To(Succeed())
	g.Expect(set.Running()).To(ConsistOf(fmt.Sprintf("%d|acme", acme)))
	for _, o := range objs[1:3] {
		g.Expect(c.Delete(ctx, o)).To(Succeed())
	}
	g.Expect(set.Sync(runCtx)).To(Succeed())
	g.Expect(set.Running()).To(BeEmpty())
}
