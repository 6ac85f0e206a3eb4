package demand

import (
	"cmp"
	"slices"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// SelectPool picks the one pool a job of a platform's repository (its path) with labels is
// counted against, or nil. Counting a job in every pool that could serve it would start a VM
// per pool for one job, so exactly one is chosen, the same way by every replica and by the
// repair loop:
//  1. the pool is of the job's platform, its scope contains the repository (repository pools by
//     path, organization and group pools by prefix, instance pools all, ignoring case) and its
//     runners may take the job (platform.Pool.Serves: labels, tags, queue);
//  2. repository-scoped pools win over organization-scoped ones, and those over instance ones,
//     as on GitHub and GitLab;
//  3. then the pool with the fewest labels beyond the job's, so a plain job does not take a
//     GPU runner;
//  4. then namespace and name, so the choice is stable.
//
// Pools being deleted are skipped. A job never selects a pool of another platform.
func SelectPool(pools []fleetv1.RunnerPool, kind platform.Kind, repository string, labels []string) *fleetv1.RunnerPool {
	ranked := RankPools(pools, kind, repository, labels)
	if len(ranked) == 0 {
		return nil
	}
	return ranked[0]
}

// RankPools returns the pools that could serve a job, best first by SelectPool's rules. The
// webhook receiver walks them until one proves it holds the job's installation.
func RankPools(pools []fleetv1.RunnerPool, kind platform.Kind, repository string, labels []string) []*fleetv1.RunnerPool {
	type ranked struct {
		pool *fleetv1.RunnerPool
		rank poolRank
	}
	var out []ranked
	for i := range pools {
		if rank, ok := rankPool(&pools[i], kind, repository, labels); ok {
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
	kind := platform.KindOf(pool)
	for _, j := range jobs {
		if p := SelectPool(pools, kind, j.Repository, j.Labels); p != nil && p.Namespace == pool.Namespace && p.Name == pool.Name {
			out = append(out, j)
		}
	}
	return out
}

type poolRank struct {
	breadth         int // 0 repository, 1 organization or group, 2 instance
	extraLabels     int
	namespace, name string
}

func (a poolRank) less(b poolRank) bool {
	if a.breadth != b.breadth {
		return a.breadth < b.breadth
	}
	return cmp.Or(
		cmp.Compare(a.extraLabels, b.extraLabels),
		cmp.Compare(a.namespace, b.namespace),
		cmp.Compare(a.name, b.name),
	) < 0
}

func rankPool(p *fleetv1.RunnerPool, kind platform.Kind, repository string, jobLabels []string) (poolRank, bool) {
	if !p.DeletionTimestamp.IsZero() {
		return poolRank{}, false
	}
	pool, ok := platform.PoolOf(p)
	if !ok || pool.Kind != kind {
		return poolRank{}, false
	}
	if pool.Scope.Validate() != nil || !pool.Scope.Contains(repository) || !pool.Serves(jobLabels) {
		return poolRank{}, false
	}
	breadth := 0
	switch {
	case pool.Scope.IsInstance():
		breadth = 2
	case !pool.Scope.IsRepository():
		breadth = 1
	}
	return poolRank{breadth: breadth, extraLabels: pool.ExtraLabels(jobLabels), namespace: p.Namespace, name: p.Name}, true
}
