package demand

import (
	"cmp"
	"slices"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// SelectPool picks the one pool a job of repository ("owner/name") with runs-on labels is
// counted against, or nil. Counting a job in every pool that could serve it would start a VM
// per pool for one job, so exactly one is chosen, the same way by every replica and by the
// repair loop:
//  1. the pool's scope contains the repository (repository pools by name, organization pools
//     by owner, ignoring case) and its labels satisfy the job (platform.MatchesLabels);
//  2. repository-scoped pools win over organization-scoped ones, as on GitHub;
//  3. then the pool with the fewest labels beyond the job's, so a plain job does not take a
//     GPU runner;
//  4. then namespace and name, so the choice is stable.
//
// Pools being deleted are skipped.
func SelectPool(pools []fleetv1.RunnerPool, repository string, labels []string) *fleetv1.RunnerPool {
	ranked := RankPools(pools, repository, labels)
	if len(ranked) == 0 {
		return nil
	}
	return ranked[0]
}

// RankPools returns the pools that could serve a job, best first by SelectPool's rules. The
// webhook receiver walks them until one proves it holds the job's installation.
func RankPools(pools []fleetv1.RunnerPool, repository string, labels []string) []*fleetv1.RunnerPool {
	type ranked struct {
		pool *fleetv1.RunnerPool
		rank poolRank
	}
	var out []ranked
	for i := range pools {
		if rank, ok := rankPool(&pools[i], repository, labels); ok {
			out = append(out, ranked{pool: &pools[i], rank: rank})
		}
	}
	slices.SortFunc(out, func(a, b ranked) int {
		switch {
		case a.rank.less(b.rank):
			return -1
		case b.rank.less(a.rank):
			return 1
		}
		return 0
	})
	res := make([]*fleetv1.RunnerPool, len(out))
	for i := range out {
		res[i] = out[i].pool
	}
	return res
}

// JobsForPool returns the jobs SelectPool routes to pool among pools, for the repair loop:
// passing all of a scope's queued jobs to Repair would count a job in several pools.
func JobsForPool(pools []fleetv1.RunnerPool, pool *fleetv1.RunnerPool, jobs []platform.Job) []platform.Job {
	var out []platform.Job
	for _, j := range jobs {
		if p := SelectPool(pools, j.Repository, j.Labels); p != nil && p.Namespace == pool.Namespace && p.Name == pool.Name {
			out = append(out, j)
		}
	}
	return out
}

type poolRank struct {
	organizationScoped bool
	extraLabels        int
	namespace, name    string
}

func (a poolRank) less(b poolRank) bool {
	if a.organizationScoped != b.organizationScoped {
		return !a.organizationScoped
	}
	return cmp.Or(
		cmp.Compare(a.extraLabels, b.extraLabels),
		cmp.Compare(a.namespace, b.namespace),
		cmp.Compare(a.name, b.name),
	) < 0
}

func rankPool(p *fleetv1.RunnerPool, repository string, jobLabels []string) (poolRank, bool) {
	if !p.DeletionTimestamp.IsZero() {
		return poolRank{}, false
	}
	scope := platform.Scope{Organization: p.Spec.GitHub.Organization, Repository: p.Spec.GitHub.Repository}
	if scope.Validate() != nil || !scope.Contains(repository) {
		return poolRank{}, false
	}
	if !platform.MatchesLabels(jobLabels, p.Spec.GitHub.Labels) {
		return poolRank{}, false
	}
	job := platform.NormalizeLabels(jobLabels)
	extra := 0
	for _, l := range platform.NormalizeLabels(p.Spec.GitHub.Labels) {
		if _, found := slices.BinarySearch(job, l); !found && l != platform.SelfHostedLabel {
			extra++
		}
	}
	return poolRank{organizationScoped: !scope.IsRepository(), extraLabels: extra, namespace: p.Namespace, name: p.Name}, true
}
