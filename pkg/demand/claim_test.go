package demand_test

import (
	"strings"

	"context"
	"k8s.io/apimachinery/pkg/util/validation"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestClaimsRacersAgreeOnOneOwner: pools of several namespaces claim one job at once, as two
// receiver replicas and two repair loops would; every one of them is told the same owner.
func TestClaimsRacersAgreeOnOneOwner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claims := &demand.Claims{Client: env.Client, Namespace: newNamespace(t)}
	var pools []*fleetv1.RunnerPool
	for range 6 {
		pools = append(pools, createPool(t, builder.NewRunnerPool("linux", "")))
	}
	owners := make([]demand.Owner, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		wg.Go(func() {
			o, err := claims.Claim(ctx, "42", "9001", p)
			g.Expect(err).NotTo(HaveOccurred())
			owners[i] = o
		})
	}
	wg.Wait()
	for _, o := range owners {
		g.Expect(o).To(Equal(owners[0]))
	}
	winners := 0
	for _, p := range pools {
		if owners[0].Is(p) {
			winners++
		}
	}
	g.Expect(winners).To(Equal(1))
}

// TestClaimsOfDeletedPoolsAreTakenOverAndPruned: a job whose owner was deleted goes to the next
// pool that sees it; claims leave once the ledger forgot their job, and all of them with the pool.
func TestClaimsOfDeletedPoolsAreTakenOverAndPruned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := newClock()
	claims := &demand.Claims{Client: env.Client, Namespace: newNamespace(t), Now: clk.Now}
	gone := createPool(t, builder.NewRunnerPool("gone", ""))
	next := createPool(t, builder.NewRunnerPool("next", ""))

	o, err := claims.Claim(ctx, "42", "1", gone)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(gone)).To(BeTrue())
	g.Expect(env.Client.Delete(ctx, gone)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(gone), &fleetv1.RunnerPool{}))
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	o, err = claims.Claim(ctx, "42", "1", next)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(next)).To(BeTrue(), "the deleted pool's job is taken over")

	_, err = claims.Claim(ctx, "42", "2", next)
	g.Expect(err).NotTo(HaveOccurred())
	ledger := map[string]demand.Record{"2": {}}
	n, err := claims.Prune(ctx, next, ledger)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero(), "young claims stay while their ledger entry is written")
	clk.Advance(demand.ClaimPruneGrace + time.Minute)
	n, err = claims.Prune(ctx, next, ledger)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1), "job 1 left the ledger; job 2 is still there")

	g.Expect(claims.Release(ctx, next)).To(Succeed())
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(claims.Namespace), client.HasLabels{demand.ClaimLabel})).To(Succeed())
	g.Expect(list.Items).To(BeEmpty())
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "claims-"}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// TestClaimNamesAreValidForEveryPlatform: GitHub's decimal IDs keep their readable claim names;
// a GitLab host or a Buildkite slug and UUID are hashed into a valid ConfigMap name, and pairs
// that would read alike when joined do not meet.
func TestClaimNamesAreValidForEveryPlatform(t *testing.T) {
	g := NewWithT(t)
	g.Expect(demand.ClaimName("42", "9001")).To(Equal("job-claim-42-9001"))
	names := map[string]bool{}
	for _, pair := range [][2]string{
		{"42", "9001"}, {"gitlab.example.com:8443", "77"}, {"GitLab.Example.com", "77"},
		{"acme", "0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11"}, {"a-b", "c"}, {"a", "b-c"},
		{strings.Repeat("x", 300), strings.Repeat("9", 300)},
	} {
		name := demand.ClaimName(pair[0], pair[1])
		g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), "%q", name)
		g.Expect(names).NotTo(HaveKey(name), "%v collides", pair)
		names[name] = true
	}
	g.Expect(demand.JobKey("0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11")).To(Equal("0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11"))
	g.Expect(demand.JobKey("group/project#12")).To(MatchRegexp(`^h-[0-9a-f]{40}$`))
	g.Expect(demand.JobKey("h-123")).NotTo(Equal("h-123"), "a key that looks hashed is hashed too")
}
