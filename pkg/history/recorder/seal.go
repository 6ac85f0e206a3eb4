package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// Complete reports whether a record tells its whole story: the job finished (or its outcome is
// known) and its VM is gone. Only then is it sealed.
func Complete(rec history.JobRecord) bool {
	return rec.Platform != "" && rec.JobID != "" && rec.Times.VMDestroyed != nil &&
		(rec.Times.JobFinished != nil || rec.Outcome != "")
}

// Signed is the form of a record its signature covers: everything but the envelope itself and
// the store's write time. Verifiers compare a stored record with the signed one in this form.
func Signed(rec history.JobRecord) history.JobRecord {
	rec.Envelope, rec.UpdatedAt = nil, time.Time{}
	return rec
}

// Seal signs a complete record: the DSSE envelope of its in-toto statement, as JSON.
func Seal(signer provenance.Signer, rec history.JobRecord) ([]byte, error) {
	st, err := provenance.NewStatement(rec.Platform, rec.JobID, Signed(rec))
	if err != nil {
		return nil, err
	}
	env, err := signer.Sign(st)
	if err != nil {
		return nil, err
	}
	return json.Marshal(env)
}

// seal signs job id's record if it is complete and not sealed yet.
func (r *Recorder) seal(ctx context.Context, store history.Store, id string) error {
	rec, err := store.Job(ctx, id)
	if err != nil {
		return err
	}
	if rec.Sealed() || !Complete(rec) {
		return nil
	}
	if r.opts.Signer == nil && r.opts.Key != nil {
		signer, err := r.opts.Key(ctx)
		if err != nil {
			// The record is written; it waits for the key without holding up the records behind
			// it, and is sealed when a later attempt gets the key.
			if r.unsealed == nil {
				r.unsealed = map[string]bool{}
			}
			if len(r.unsealed) == 0 {
				r.opts.Log.Error(err, "cannot get the provenance key; finished job records wait unsealed and are sealed once it is readable", "job", id)
			}
			r.unsealed[id] = true
			return nil
		}
		r.opts.Signer = &signer // only the writer goroutine reads or sets it
	}
	delete(r.unsealed, id)
	if r.opts.Signer == nil {
		r.mu.Lock()
		first := r.noKeyAt.IsZero()
		if first {
			r.noKeyAt = r.opts.Now()
		}
		r.mu.Unlock()
		if first {
			r.opts.Log.Info("no provenance key: finished job records are kept unsealed", "job", id)
		}
		return nil
	}
	envelope, err := Seal(*r.opts.Signer, rec)
	if err != nil {
		return fmt.Errorf("%w: sealing job %s: %w", history.ErrInvalid, id, err)
	}
	err = store.UpsertJob(ctx, history.JobRecord{ID: id, Envelope: envelope})
	if errors.Is(err, history.ErrSealed) {
		return nil // another replica sealed it first
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.health.Sealed++
	r.mu.Unlock()
	metrics.HistorySealed.Inc()
	logJob(r.opts.Log, rec, r.opts.Signer.KeyID())
	return nil
}
