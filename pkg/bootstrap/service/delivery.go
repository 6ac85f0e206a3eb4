package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// maxClaimAttempts bounds the optimistic-concurrency retries of one claim.
const maxClaimAttempts = 5

// claimRunnerConfig records, with the resourceVersion read, that this VM's runner config is being
// issued. Of concurrent requests (on any replicas) exactly one claims it; the others get 409. The
// claim also guarantees the platform's "one registration per name at a time" rule.
func (s *Server) claimRunnerConfig(ctx context.Context, t *target) error {
	for range maxClaimAttempts {
		if t.config.Annotations[bootstrapv1.RunnerRetiredAnnotation] != "" {
			return refusal(http.StatusForbidden, fmt.Errorf("the RunnerPool removed %s before its runner config was issued", t.id))
		}
		if at := t.config.Status.RunnerConfigTime; at != nil {
			return refusal(http.StatusConflict, fmt.Errorf("runner config of %s was already issued at %s", t.id, at.UTC().Format(time.RFC3339)))
		}
		now := metav1.NewTime(s.opts.Now())
		t.config.Status.RunnerConfigTime = &now
		err := s.opts.Client.Status().Update(ctx, t.config)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		if err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(t.config), t.config); err != nil {
			return err
		}
		if t.config.Status.SPIFFEID != t.id.String() {
			return refusal(http.StatusForbidden, fmt.Errorf("BootstrapConfig of %s changed hands", t.id))
		}
	}
	return fmt.Errorf("claiming the runner config of %s: too much contention", t.id)
}

// releaseRunnerConfig undoes a claim whose platform call failed, so the VM's retry can succeed. It
// runs even when the request's context ended, within Options.APITimeout.
func (s *Server) releaseRunnerConfig(ctx context.Context, t *target, cause error) {
	ctx, cancel := s.detached(ctx)
	defer cancel()
	err := s.updateStatus(ctx, t.config, func(c *bootstrapv1.BootstrapConfig) {
		c.Status.RunnerConfigTime = nil
		conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionFalse,
			Reason: bootstrapv1.RunnerConfigFailedReason, Message: "runner registration failed: " + cause.Error(),
			ObservedGeneration: c.Generation})
	})
	if err != nil {
		s.log.Error(err, "releasing the runner config claim; the VM will be refused and replaced", "spiffeID", t.id.String())
	}
}

// recordAttested marks bootstrap complete: the MachineClaim controller reads it to turn Ready. It
// runs even when the request's context ended, within Options.APITimeout.
func (s *Server) recordAttested(ctx context.Context, t *target) error {
	ctx, cancel := s.detached(ctx)
	defer cancel()
	return s.updateStatus(ctx, t.config, func(c *bootstrapv1.BootstrapConfig) {
		now := metav1.NewTime(s.opts.Now())
		c.Status.AttestedTime = &now
		if t.cert != nil {
			sum := sha256.Sum256(t.cert.Raw)
			c.Status.AttestedSVID = &bootstrapv1.AttestedSVID{SerialNumber: t.cert.SerialNumber.Text(16), SHA256: hex.EncodeToString(sum[:])}
		}
		conditions.Set(c, metav1.Condition{Type: bootstrapv1.AttestedCondition, Status: metav1.ConditionTrue,
			Reason: bootstrapv1.AttestedReason, Message: "the VM attested as " + t.id.String() + " and received its runner config",
			ObservedGeneration: c.Generation})
	})
}

// detached is ctx without its cancellation but with a deadline of its own: a write that must
// outlive the request still cannot hang on a stalled API server.
func (s *Server) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.opts.APITimeout)
}

func (s *Server) updateStatus(ctx context.Context, c *bootstrapv1.BootstrapConfig, mutate func(*bootstrapv1.BootstrapConfig)) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := s.opts.Client.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
				return err
			}
		}
		first = false
		mutate(c)
		return s.opts.Client.Status().Update(ctx, c)
	})
}
