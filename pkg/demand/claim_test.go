package demand_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
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
// a GitLab host or a Buildkite slug and UUID are hashed into a valid ConfigMap name that says the
// platform, and pairs that would read alike when joined, or alike on two platforms, do not meet.
func TestClaimNamesAreValidForEveryPlatform(t *testing.T) {
	g := NewWithT(t)
	g.Expect(demand.ClaimName(platform.KindGitHub, "42", "9001")).To(Equal("job-claim-42-9001"))
	g.Expect(demand.ClaimName(platform.KindGitLab, "gitlab.example.com", "77")).To(MatchRegexp(`^job-claim-gitlab-[0-9a-f]{40}$`))
	names := map[string]bool{}
	for _, kind := range platform.Kinds() {
		for _, pair := range [][2]string{
			{"42", "9001"}, {"gitlab.example.com:8443", "77"}, {"GitLab.Example.com", "77"},
			{"acme", "0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11"}, {"a-b", "c"}, {"a", "b-c"},
			{strings.Repeat("x", 300), strings.Repeat("9", 300)},
		} {
			name := demand.ClaimName(kind, pair[0], pair[1])
			g.Expect(validation.IsDNS1123Subdomain(name)).To(BeEmpty(), "%q", name)
			g.Expect(names).NotTo(HaveKey(name), "%s %v collides", kind, pair)
			names[name] = true
		}
	}
	g.Expect(demand.JobKey("0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11")).To(Equal("0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11"))
	g.Expect(demand.JobKey("group/project#12")).To(MatchRegexp(`^h-[0-9a-f]{40}$`))
	g.Expect(demand.JobKey("h-123")).NotTo(Equal("h-123"), "a key that looks hashed is hashed too")
}

func createGitLabPool(t *testing.T, name, url string, scope fleetv1.GitLabScope, tags []string, untagged bool) *fleetv1.RunnerPool {
	t.Helper()
	return createPool(t, builder.NewRunnerPool(name, "").WithGitLab(fleetv1.GitLabSpec{URL: url, Scope: scope, Tags: tags,
		RunUntagged: untagged, CredentialsRef: fleetv1.LocalObjectReference{Name: "gitlab"}}))
}

// TestClaimsOfTwoPlatformsDoNotMeet: a GitLab instance at host "12345" and GitHub's installation
// 12345 both have a job 678. Each platform's pool owns its own job; before claim names said the
// platform, the second pool was told the first owned its job, and the job went to no pool.
func TestClaimsOfTwoPlatformsDoNotMeet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claims := &demand.Claims{Client: env.Client, Namespace: newNamespace(t)}
	github := createPool(t, builder.NewRunnerPool("github", ""))
	gitlab := createGitLabPool(t, "gitlab", "https://12345", fleetv1.GitLabScope{Group: "acme"}, []string{"linux"}, false)
	buildkite := createPool(t, builder.NewRunnerPool("buildkite", "").WithBuildkite(fleetv1.BuildkiteSpec{Organization: "12345",
		Cluster: "5e4b2c1a-8f3d-4e6a-b7c9-0d1e2f3a4b5c", Queue: "linux", CredentialsRef: fleetv1.LocalObjectReference{Name: "buildkite"}}))

	for _, p := range []*fleetv1.RunnerPool{github, gitlab, buildkite} {
		o, err := claims.Claim(ctx, "12345", "678", p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.Is(p)).To(BeTrue(), "%s's job is its own", platform.KindOf(p))
		o, found, err := claims.OwnerOf(ctx, platform.KindOf(p), "12345", "678")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue())
		g.Expect(o.Is(p)).To(BeTrue())
	}
	o, found, err := claims.Owner(ctx, "12345", "678")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(o.Is(github)).To(BeTrue(), "GitHub's claim keeps its name, so it is found first")
}

// TestClaimsMadeBeforePlatformNamesAreStillFound: an upgrade meets claims of GitLab and Buildkite
// jobs under the names every platform's claims had before (GitHub's names are unchanged). A live
// pool's old claim of its platform still owns its job, for every path that asks; an old claim of
// another platform's pool, which only the old names let meet, does not.
func TestClaimsMadeBeforePlatformNamesAreStillFound(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claims := &demand.Claims{Client: env.Client, Namespace: newNamespace(t)}
	first := createGitLabPool(t, "first", "https://gitlab.example.com", fleetv1.GitLabScope{Group: "acme"}, []string{"linux"}, false)
	second := createGitLabPool(t, "second", "https://gitlab.example.com", fleetv1.GitLabScope{Group: "acme"}, []string{"linux"}, false)
	github := createPool(t, builder.NewRunnerPool("github", ""))
	decimal := createGitLabPool(t, "decimal", "https://12345", fleetv1.GitLabScope{Group: "acme"}, []string{"linux"}, false)

	// As the release before wrote them: the old name (GitHub's names are the old ones) and data.
	oldClaim := func(installation, job string, owner *fleetv1.RunnerPool) {
		g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: claims.Namespace, Name: demand.ClaimName(platform.KindGitHub, installation, job),
				Labels: map[string]string{demand.ClaimLabel: string(owner.UID)}},
			Data: map[string]string{"pool-namespace": owner.Namespace, "pool-name": owner.Name, "pool-uid": string(owner.UID),
				"installation": installation, "job": job, "claimed-at": time.Now().UTC().Format(time.RFC3339)},
		})).To(Succeed())
	}
	oldClaim("gitlab.example.com", "77", first)
	oldClaim("12345", "678", github)

	o, err := claims.Claim(ctx, "gitlab.example.com", "77", second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(first)).To(BeTrue(), "the old claim still gives the job one owner")
	o, found, err := claims.OwnerOf(ctx, platform.KindGitLab, "gitlab.example.com", "77")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && o.Is(first)).To(BeTrue())
	o, found, err = claims.Owner(ctx, "gitlab.example.com", "77")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && o.Is(first)).To(BeTrue())
	n, err := claims.Prune(ctx, first, map[string]demand.Record{"77": {}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeZero())

	o, err = claims.Claim(ctx, "12345", "678", decimal)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(decimal)).To(BeTrue(), "GitHub's job 678 is not the GitLab job 678")
	o, found, err = claims.OwnerOf(ctx, platform.KindGitHub, "12345", "678")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && o.Is(github)).To(BeTrue(), "and GitHub's claim stays GitHub's")
}

// TestListedJobsTakeBackClaimsTheirOwnerCannotServe plays whoever holds the GitLab receiver's
// token, which every maintainer who points a webhook at HyperFleet has: a forged delivery names a
// victim's job ID with the attacker's own project, so the receiver claims the job for the
// attacker's pool (untagged, its credentials prove the same instance), and the victim's pool
// would leave the job to it for good. The victim's repair, which lists the job in the victim's
// project, takes it back: the claiming pool's scope does not hold the job. A pool of another
// namespace that can serve the job keeps a job it claimed first.
func TestListedJobsTakeBackClaimsTheirOwnerCannotServe(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claims := &demand.Claims{Client: env.Client, Namespace: newNamespace(t)}
	const host = "gitlab.example.com"
	attacker := createGitLabPool(t, "attacker", "https://"+host, fleetv1.GitLabScope{Group: "attackers"}, nil, true)
	victim := createGitLabPool(t, "victim", "https://"+host, fleetv1.GitLabScope{Group: "victims"}, []string{"linux"}, false)
	sibling := createGitLabPool(t, "sibling", "https://"+host, fleetv1.GitLabScope{Project: "victims/app"}, []string{"linux"}, false)
	listed := func(id string) []platform.Job {
		return []platform.Job{{ID: id, State: platform.JobQueued, Labels: []string{"linux"}, Repository: "victims/app"}}
	}

	o, err := claims.Claim(ctx, host, "500", attacker)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(attacker)).To(BeTrue(), "a delivery alone routes the job to the attacker's pool")
	mine, err := claims.Owned(ctx, host, victim, listed("500"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mine).To(HaveLen(1), "the victim's repair takes the job back")
	o, found, err := claims.OwnerOf(ctx, platform.KindGitLab, host, "500")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found && o.Is(victim)).To(BeTrue())

	o, err = claims.Claim(ctx, host, "501", sibling)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(o.Is(sibling)).To(BeTrue())
	mine, err = claims.Owned(ctx, host, victim, listed("501"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mine).To(BeEmpty(), "a pool that can serve the job keeps the job it saw first")
}
