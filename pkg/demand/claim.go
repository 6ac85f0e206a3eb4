package demand

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Labels and keys of a job claim ConfigMap.
const (
	// ClaimLabel marks job claims; its value is the owning pool's UID, so a pool's claims are
	// listed (and deleted with the pool) by one selector.
	ClaimLabel = "hyperfleet.io/job-claim-pool-uid"

	claimKeyNamespace = "pool-namespace"
	claimKeyName      = "pool-name"
	claimKeyUID       = "pool-uid"
	claimKeyJob       = "job"
	claimKeyInstall   = "installation"
	claimKeyAt        = "claimed-at"

	// claimAttempts bounds the create/take-over race; each lost round means another writer won.
	claimAttempts = 5
	// ClaimPruneGrace keeps a claim whose job is not (yet) in its pool's ledger: the ledger is
	// written just after the claim, and a failed write is retried or repaired within minutes.
	ClaimPruneGrace = 10 * time.Minute
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;update;delete

// InstallationSource tells which CI platform account a pool's credentials have proven to hold
// (platform.Source.Installation).
type InstallationSource interface {
	Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error)
}

// Owner is the pool that owns a job.
type Owner struct {
	types.NamespacedName
	UID types.UID
}

// Is reports whether o is pool.
func (o Owner) Is(pool *fleetv1.RunnerPool) bool {
	return o.UID == pool.UID && o.Namespace == pool.Namespace && o.Name == pool.Name
}

// Claims gives every job exactly one owning pool across all namespaces: one ConfigMap per
// (installation, job) in the manager's own namespace, created by whichever path saw the job first
// (a webhook or a pool's repair loop). Create-if-absent in the API server is the arbiter, so two
// replicas or two pools racing for a job agree on one winner. Tenants cannot write in the
// manager's namespace, so no one can claim a job by hand.
type Claims struct {
	// Client reads and writes the claims (uncached ConfigMaps) and reads RunnerPools.
	Client client.Client
	// Namespace holds the claims: the manager's namespace.
	Namespace string
	// Now is the clock; tests replace it.
	Now func() time.Time
}

func (c *Claims) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// ClaimName names the claim of a job of an installation. Two decimal IDs (GitHub's App
// installation and job) keep the readable "job-claim-<installation>-<job>", as before there were
// other platforms; anything else (a GitLab host, a Buildkite slug and UUID) is hashed into
// "job-claim-h-<40 hex>", since a host or a UUID may not fit a ConfigMap name and "a-b"+"c" must
// not meet "a"+"b-c".
func ClaimName(installation, jobID string) string {
	if isDecimal(installation) && isDecimal(jobID) && len(installation)+len(jobID) <= 200 {
		return "job-claim-" + installation + "-" + jobID
	}
	sum := sha256.Sum256([]byte(installation + "\x00" + jobID))
	return "job-claim-h-" + hex.EncodeToString(sum[:20])
}

func ownerOf(cm *corev1.ConfigMap) Owner {
	return Owner{
		NamespacedName: types.NamespacedName{Namespace: cm.Data[claimKeyNamespace], Name: cm.Data[claimKeyName]},
		UID:            types.UID(cm.Data[claimKeyUID]),
	}
}

func (c *Claims) setOwner(cm *corev1.ConfigMap, installation, jobID string, pool *fleetv1.RunnerPool) {
	cm.Labels = map[string]string{ClaimLabel: string(pool.UID)}
	cm.Data = map[string]string{
		claimKeyNamespace: pool.Namespace, claimKeyName: pool.Name, claimKeyUID: string(pool.UID),
		claimKeyInstall: installation, claimKeyJob: jobID, claimKeyAt: c.now().UTC().Format(time.RFC3339),
	}
}

// Owner returns the pool that claimed a job, if any (alive or not).
func (c *Claims) Owner(ctx context.Context, installation, jobID string) (Owner, bool, error) {
	cm := &corev1.ConfigMap{}
	err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ClaimName(installation, jobID)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return Owner{}, false, nil
	case err != nil:
		return Owner{}, false, fmt.Errorf("reading the claim of job %s: %w", jobID, err)
	}
	return ownerOf(cm), true, nil
}

// Claim returns the owner of a job, making pool its owner when the job has none yet, or when its
// owner was deleted (or is being deleted) since. Callers record the job only in the owner's
// ledger.
func (c *Claims) Claim(ctx context.Context, installation, jobID string, pool *fleetv1.RunnerPool) (Owner, error) {
	if installation == "" || jobID == "" {
		return Owner{}, fmt.Errorf("a job claim needs an installation and a job id (installation %q, job %q)", installation, jobID)
	}
	if pool.UID == "" {
		return Owner{}, fmt.Errorf("runner pool %s/%s has no UID; pass the object read from the API server", pool.Namespace, pool.Name)
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: ClaimName(installation, jobID)}
	var lastErr error
	for range claimAttempts {
		cm := &corev1.ConfigMap{}
		err := c.Client.Get(ctx, key, cm)
		switch {
		case apierrors.IsNotFound(err):
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			c.setOwner(cm, installation, jobID, pool)
			if err := c.Client.Create(ctx, cm); err != nil {
				if apierrors.IsAlreadyExists(err) {
					lastErr = err
					continue // another path won; read its claim
				}
				return Owner{}, fmt.Errorf("claiming job %s: %w", jobID, err)
			}
			return ownerOf(cm), nil
		case err != nil:
			return Owner{}, fmt.Errorf("reading the claim of job %s: %w", jobID, err)
		}
		owner := ownerOf(cm)
		if owner.Is(pool) {
			return owner, nil
		}
		alive, err := c.alive(ctx, owner)
		if err != nil {
			return Owner{}, err
		}
		if alive {
			return owner, nil
		}
		// The owner is gone: take the job over, with the resourceVersion read, so of two pools
		// doing this at once only one wins.
		c.setOwner(cm, installation, jobID, pool)
		if err := c.Client.Update(ctx, cm); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				lastErr = err
				continue
			}
			return Owner{}, fmt.Errorf("taking over the claim of job %s: %w", jobID, err)
		}
		return ownerOf(cm), nil
	}
	return Owner{}, fmt.Errorf("claiming job %s: gave up after %d rounds: %w", jobID, claimAttempts, lastErr)
}

// alive reports whether the claim's owner still exists and is not being deleted.
func (c *Claims) alive(ctx context.Context, o Owner) (bool, error) {
	pool := &fleetv1.RunnerPool{}
	if err := c.Client.Get(ctx, o.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the owner %s of a job claim: %w", o.NamespacedName, err)
	}
	return pool.UID == o.UID && pool.DeletionTimestamp.IsZero(), nil
}

// Owned keeps the jobs of an installation that pool owns, claiming the unclaimed ones for it: the
// repair loop passes the queued jobs it found, so a job another pool saw first is left to it.
func (c *Claims) Owned(ctx context.Context, installation string, pool *fleetv1.RunnerPool, jobs []platform.Job) ([]platform.Job, error) {
	var out []platform.Job
	var errs []error
	for _, j := range jobs {
		owner, err := c.Claim(ctx, installation, j.ID, pool)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if owner.Is(pool) {
			out = append(out, j)
		}
	}
	return out, errors.Join(errs...)
}

// Prune deletes pool's claims of jobs its ledger no longer holds (pruned after completion, or
// never written), once they are older than ClaimPruneGrace: claims live as long as the ledger
// remembers the job.
func (c *Claims) Prune(ctx context.Context, pool *fleetv1.RunnerPool, ledger map[string]Record) (int, error) {
	list := &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{ClaimLabel: string(pool.UID)}); err != nil {
		return 0, fmt.Errorf("listing job claims: %w", err)
	}
	pruned := 0
	var errs []error
	for i := range list.Items {
		cm := &list.Items[i]
		id := cm.Data[claimKeyJob]
		if id == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, cm.Data[claimKeyAt])
		if _, known := ledger[JobKey(id)]; known || (err == nil && c.now().Sub(at) < ClaimPruneGrace) {
			continue
		}
		// With the resourceVersion read: a claim another pool took over meanwhile stays.
		err = c.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
		switch {
		case err == nil:
			pruned++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, err)
		}
	}
	return pruned, errors.Join(errs...)
}

// Release deletes every claim of pool, when it is deleted.
func (c *Claims) Release(ctx context.Context, pool *fleetv1.RunnerPool) error {
	if pool.UID == "" {
		return nil
	}
	list := &corev1.ConfigMapList{}
	if err := c.Client.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{ClaimLabel: string(pool.UID)}); err != nil {
		return fmt.Errorf("listing job claims: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if err := c.Client.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
