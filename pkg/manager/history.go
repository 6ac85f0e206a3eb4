package manager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/history/recorder"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
)

// HistoryActor names the manager in the audit entries of the VMs it creates and destroys.
const HistoryActor = "hyperfleet-manager"

// UnfinishedAfter is how long after its VM is gone a job may still report its completion before
// its record is closed as unknown and sealed (docs/history.md, "A job that never reports").
const UnfinishedAfter = time.Hour

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

// addHistory runs the job history recorder when a history store is configured: the ledgers tell
// it of job events, the MachineClaim controller of VM lifecycle moments, and it seals finished
// records with the installation's provenance key, kept in the manager's namespace
// (custody.EnsureKey) and first made when the first record is sealed.
func addHistory(mgr manager.Manager, cfg *config.Manager, opts *controllers.Options) error {
	url := cfg.HistoryURL
	if cfg.HistoryURLFile != "" {
		b, err := os.ReadFile(cfg.HistoryURLFile)
		if err != nil {
			return fmt.Errorf("history-url-file: %w", err)
		}
		url = strings.TrimSpace(string(b))
	}
	if url == "" {
		return nil
	}
	namespace := opts.JobClaimNamespace
	c := mgr.GetClient()
	rec := recorder.New(recorder.Options{
		Open:      func(ctx context.Context) (history.Store, error) { return history.Open(ctx, url) },
		Key:       func(ctx context.Context) (provenance.Signer, error) { return custody.EnsureKey(ctx, c, namespace) },
		Retention: cfg.HistoryRetention,
		// A job runs on its VM: an hour after the VM is gone, only a lost message is still due.
		UnfinishedAfter: UnfinishedAfter,
		Log:             ctrl.Log.WithName("history"),
	})
	opts.History = recorder.Claims{Recorder: rec, Actor: HistoryActor}
	opts.JobHistory = rec
	opts.HistoryHealth = func() (bool, time.Time, string) {
		h := rec.Health()
		why := h.LastError
		if len(why) > 300 {
			why = why[:300] + "…"
		}
		return !h.Failing, h.FailingSince, why
	}
	return mgr.Add(rec)
}
