package console

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// HistoryJobDetail is one job record with its timeline and the check of its signature.
type HistoryJobDetail struct {
	HistoryJob
	// Timeline is the eight moments of the job's life in order, known or not.
	Timeline   []TimelineStep `json:"timeline"`
	Provenance Provenance     `json:"provenance"`
}

// TimelineStep is one moment of a job's life.
type TimelineStep struct {
	// Step is the JobTimes field: queued, vmRequested, cloned, booted, attested, jobStarted,
	// jobFinished or vmDestroyed.
	Step string `json:"step"`
	// Time is nil when the moment is not known.
	Time *time.Time `json:"time,omitempty"`
	// SincePreviousSeconds is the time from the latest known moment before this one; absent for
	// the first known moment and for unknown ones.
	SincePreviousSeconds *float64 `json:"sincePreviousSeconds,omitempty"`
}

// timelineSteps name the moments of JobTimes in the order of a job's life, with their labels.
var timelineSteps = []struct {
	step, label string
	of          func(history.JobTimes) *time.Time
}{
	{"queued", "Queued", func(t history.JobTimes) *time.Time { return t.Queued }},
	{"vmRequested", "VM requested", func(t history.JobTimes) *time.Time { return t.VMRequested }},
	{"cloned", "Cloned", func(t history.JobTimes) *time.Time { return t.Cloned }},
	{"booted", "Booted", func(t history.JobTimes) *time.Time { return t.Booted }},
	{"attested", "Attested", func(t history.JobTimes) *time.Time { return t.Attested }},
	{"jobStarted", "Job started", func(t history.JobTimes) *time.Time { return t.JobStarted }},
	{"jobFinished", "Job finished", func(t history.JobTimes) *time.Time { return t.JobFinished }},
	{"vmDestroyed", "VM destroyed", func(t history.JobTimes) *time.Time { return t.VMDestroyed }},
}

// timelineOf lists a job's moments in order, each known one with the time since the one before.
func timelineOf(t history.JobTimes) []TimelineStep {
	out := make([]TimelineStep, 0, len(timelineSteps))
	var previous *time.Time
	for _, s := range timelineSteps {
		step := TimelineStep{Step: s.step, Time: s.of(t)}
		if step.Time != nil {
			if previous != nil {
				gap := step.Time.Sub(*previous).Seconds()
				step.SincePreviousSeconds = &gap
			}
			previous = step.Time
		}
		out = append(out, step)
	}
	return out
}

// errNoJobRecord answers a record that does not exist and one the caller may not read in the same
// words, so nobody learns which jobs other namespaces ran.
var errNoJobRecord = errors.New("no such job record, or not one you may read")

// visibleJob reads one job record if the caller may read its namespace's records, by the rule of
// the listing: a namespace where they may list MachineClaims; a record without a namespace only
// for a cluster-wide reader.
func (s *Server) visibleJob(ctx context.Context, c client.Client, store history.Store, id string) (history.JobRecord, error) {
	rec, err := store.Job(ctx, id)
	if errors.Is(err, history.ErrNotFound) {
		return history.JobRecord{}, errNoJobRecord
	}
	if err != nil {
		return history.JobRecord{}, storeError(err)
	}
	_, all, err := s.auditNamespaces(ctx, c, rec.Namespace)
	switch {
	case apierrors.IsForbidden(err):
		return history.JobRecord{}, errNoJobRecord
	case err != nil:
		return history.JobRecord{}, err
	case rec.Namespace == "" && !all:
		return history.JobRecord{}, errNoJobRecord
	}
	return rec, nil
}

// getHistoryJob answers one job record with its timeline and provenance, or with format=envelope
// its signed envelope as stored, for hyperfleet-verify.
func (s *Server) getHistoryJob(w http.ResponseWriter, r *http.Request, c *caller) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "envelope" {
		writeProblem(w, r, http.StatusBadRequest, "Invalid format", "format must be json or envelope",
			[]FieldError{{Field: "format", Message: "must be json or envelope"}})
		return
	}
	store, err := s.audit.Store()
	if err != nil {
		writeProblem(w, r, http.StatusServiceUnavailable, errHistoryUnavailable, err.Error(), nil)
		return
	}
	rec, err := s.visibleJob(r.Context(), c.Client, store, r.PathValue("platform")+"/"+r.PathValue("id"))
	if !writeJobError(w, r, err) {
		return
	}
	if format == "envelope" {
		if !rec.Sealed() {
			writeProblem(w, r, http.StatusNotFound, "Not sealed", "the record has no signed envelope yet: the job has not finished, or its record was not sealed", nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="`+envelopeFileName(rec.ID)+`"`)
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(rec.Envelope)
		return
	}
	writeJSON(w, http.StatusOK, s.historyJobDetail(r.Context(), rec))
}

// writeJobError answers err of visibleJob, or reports there was none.
func writeJobError(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoJobRecord):
		writeProblem(w, r, http.StatusNotFound, "Not found", err.Error(), nil)
	case errors.Is(err, errHistoryStore):
		writeProblem(w, r, http.StatusServiceUnavailable, errHistoryUnavailable, err.Error(), nil)
	default:
		writeKubeError(w, r, err)
	}
	return false
}

// historyJobDetail is rec with its timeline, its signature checked against the keys the
// installation publishes.
func (s *Server) historyJobDetail(ctx context.Context, rec history.JobRecord) HistoryJobDetail {
	d := HistoryJobDetail{HistoryJob: historyJobOf(rec), Timeline: timelineOf(rec.Times)}
	if !rec.Sealed() {
		d.Provenance = Provenance{Reason: reasonNotSealed}
		return d
	}
	keys, err := s.publicKeys(ctx)
	d.Provenance = checkProvenance(rec, keys, err)
	return d
}

// envelopeFileName is a download's name for the envelope of job id, of safe characters only.
func envelopeFileName(id string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		}
		return '_'
	}, id)
	return "hyperfleet-job-" + name + ".envelope.json"
}
