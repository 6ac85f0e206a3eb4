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
	claimKeyPlatform  = "platform"
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
// (platform, installation, job) in the manager's own namespace, created by whichever path saw the job first
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

// ClaimName names the claim of a job of an installation on a platform. GitHub's claims keep the
// names they had before claims knew platforms: "job-claim-<installation>-<job>" for two decimal IDs
// (the App installation and the job), else "job-claim-h-<40 hex>". Other platforms' names say
// the platform and hash the rest, "job-claim-<platform>-<40 hex>": one platform's installation may
// be spelt like another's (a GitLab instance at host "12345" and GitHub's installation 12345 both
// have a job 678; a Buildkite organization "ci" and a GitLab host "ci"), a host or a UUID may not
// fit a ConfigMap name, and "a-b"+"c" must not meet "a"+"b-c".
func ClaimName(kind platform.Kind, installation, jobID string) string {
	if kind == platform.KindGitHub {
		return legacyClaimName(installation, jobID)
	}
	sum := sha256.Sum256([]byte(string(kind) + "\x00" + installation + "\x00" + jobID))
	return "job-claim-" + string(kind) + "-" + hex.EncodeToString(sum[:20])
}

// legacyClaimName is the name every platform's claims had before names said the platform.
func legacyClaimName(installation, jobID string) string {
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
		claimKeyPlatform: string(platform.KindOf(pool)),
		claimKeyInstall:  installation, claimKeyJob: jobID, claimKeyAt: c.now().UTC().Format(time.RFC3339),
	}
}

// find reads the claim of a job of a platform: the one under ClaimName, else one a release before
// platform-qualified names made under legacyClaimName, which counts only while its pool lives and
// is of kind (under an old name a GitHub job and a GitLab job could meet). nil when there is none.
func (c *Claims) find(ctx context.Context, kind platform.Kind, installation, jobID string) (*corev1.ConfigMap, error) {
	names := []string{ClaimName(kind, installation, jobID)}
	if legacy := legacyClaimName(installation, jobID); legacy != names[0] {
		names = append(names, legacy)
	}
	for i, name := range names {
		cm := &corev1.ConfigMap{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, cm)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading the claim of job %s: %w", jobID, err)
		}
		if i == 0 {
			return cm, nil
		}
		if k := cm.Data[claimKeyPlatform]; k != "" && k != string(kind) {
			return nil, nil
		}
		owner, alive, err := c.ownerPool(ctx, ownerOf(cm))
		if err != nil {
			return nil, err
		}
		if alive && platform.KindOf(owner) == kind {
			return cm, nil
		}
	}
	return nil, nil
}

// OwnerOf returns the pool that claimed a job of a platform, if any (alive or not).
func (c *Claims) OwnerOf(ctx context.Context, kind platform.Kind, installation, jobID string) (Owner, bool, error) {
	cm, err := c.find(ctx, kind, installation, jobID)
	if err != nil || cm == nil {
		return Owner{}, false, err
	}
	return ownerOf(cm), true, nil
}

// Owner returns the pool that claimed a job of an installation on any platform, if any (alive or
// not): the first found of each platform's claim, GitHub's first. Callers that know the platform
// should ask OwnerOf, which reads one claim where this may read several and may answer with
// another platform's pool when installations of two platforms are spelt alike.
func (c *Claims) Owner(ctx context.Context, installation, jobID string) (Owner, bool, error) {
	for _, kind := range platform.Kinds() {
		if o, found, err := c.OwnerOf(ctx, kind, installation, jobID); err != nil || found {
			return o, found, err
		}
	}
	return Owner{}, false, nil
}

// Claim returns the owner of a job, making pool its owner when the job has none yet, or when its
// owner was deleted (or is being deleted) since. The claim is of pool's platform. Callers record
// the job only in the owner's ledger.
func (c *Claims) Claim(ctx context.Context, installation, jobID string, pool *fleetv1.RunnerPool) (Owner, error) {
	return c.claim(ctx, installation, jobID, pool, nil)
}

// claim is Claim; for a job the platform listed (listed), it also takes the job from an owner
// whose platform, scope or labels cannot serve it: such a claim was made on a delivery's word
// alone (whoever holds the receiver's secret can route a job to any pool of its platform whose
// credentials prove the installation), and the platform's listing wins over any delivery.
func (c *Claims) claim(ctx context.Context, installation, jobID string, pool *fleetv1.RunnerPool, listed *platform.Job) (Owner, error) {
	if installation == "" || jobID == "" {
		return Owner{}, fmt.Errorf("a job claim needs an installation and a job id (installation %q, job %q)", installation, jobID)
	}
	if pool.UID == "" {
		return Owner{}, fmt.Errorf("runner pool %s/%s has no UID; pass the object read from the API server", pool.Namespace, pool.Name)
	}
	kind := platform.KindOf(pool)
	if !kind.Valid() {
		return Owner{}, fmt.Errorf("runner pool %s/%s names no CI platform", pool.Namespace, pool.Name)
	}
	key := client.ObjectKey{Namespace: c.Namespace, Name: ClaimName(kind, installation, jobID)}
	var lastErr error
	for range claimAttempts {
		cm, err := c.find(ctx, kind, installation, jobID)
		if err != nil {
			return Owner{}, err
		}
		if cm == nil {
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
		}
		owner := ownerOf(cm)
		if owner.Is(pool) {
			return owner, nil
		}
		current, alive, err := c.ownerPool(ctx, owner)
		if err != nil {
			return Owner{}, err
		}
		if alive && (listed == nil || serves(current, kind, *listed)) {
			return owner, nil
		}
		// The owner is gone, or cannot take the job the platform lists: take the job over, with
		// the resourceVersion read, so of two pools doing this at once only one wins.
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

// serves reports whether pool could have been routed a job the platform listed: of the job's
// platform, its scope holding the job's repository, its runners able to take the job's labels.
func serves(pool *fleetv1.RunnerPool, kind platform.Kind, j platform.Job) bool {
	_, ok := rankPool(pool, kind, j.Repository, j.Labels)
	return ok
}

// ownerPool reads a claim's owner and reports whether it still exists and is not being deleted.
func (c *Claims) ownerPool(ctx context.Context, o Owner) (*fleetv1.RunnerPool, bool, error) {
	pool := &fleetv1.RunnerPool{}
	if err := c.Client.Get(ctx, o.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading the owner %s of a job claim: %w", o.NamespacedName, err)
	}
	return pool, pool.UID == o.UID && pool.DeletionTimestamp.IsZero(), nil
}

// Owned keeps the jobs of an installation that pool owns, claiming the unclaimed ones for it: the
// repair loop passes the queued jobs it found, so a job another pool saw first is left to it,
// unless that pool cannot serve the job as the platform lists it (see claim).
func (c *Claims) Owned(ctx context.Context, installation string, pool *fleetv1.RunnerPool, jobs []platform.Job) ([]platform.Job, error) {
	var out []platform.Job
	var errs []error
	for _, j := range jobs {
		owner, err := c.claim(ctx, installation, j.ID, pool, &j)
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
