package console

import (
	"crypto"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// Provenance is what the check of a job record's signature found.
type Provenance struct {
	// Verified: the envelope's signature verifies under one of the installation's public keys,
	// it signs this job, and the record it signs is the record stored.
	Verified bool `json:"verified"`
	// KeyID is the key whose signature verified, also when the signed record differs from the
	// stored one.
	KeyID string `json:"keyID,omitempty"`
	// Reason says why the record is not verified.
	Reason string `json:"reason,omitempty"`
}

// reasonNotSealed is the Reason of a record without an envelope.
const reasonNotSealed = "not sealed: the job has not finished, or its record was not signed"

// checkProvenance checks rec's envelope as hyperfleet-verify does, against keys (or says why the
// keys could not be read), then that the record it signs is rec: the stored fields beside an
// envelope are not vouched for by it, so a row changed after sealing must not pass as verified.
func checkProvenance(rec history.JobRecord, keys []crypto.PublicKey, keysErr error) Provenance {
	if !rec.Sealed() {
		return Provenance{Reason: reasonNotSealed}
	}
	if keysErr != nil {
		return Provenance{Reason: "public key unavailable: " + keysErr.Error()}
	}
	env, err := provenance.ParseEnvelope(rec.Envelope)
	if err != nil {
		return Provenance{Reason: err.Error()}
	}
	st, pub, err := provenance.VerifyKey(env, keys...)
	if err != nil {
		return Provenance{Reason: err.Error()}
	}
	keyID, err := provenance.KeyID(pub)
	if err != nil {
		return Provenance{Reason: err.Error()}
	}
	p := Provenance{KeyID: keyID}
	if name := st.Subject[0].Name; name != rec.ID {
		p.Reason = fmt.Sprintf("the envelope signs job %q, not this record (%q)", name, rec.ID)
		return p
	}
	var signed history.JobRecord
	if err := json.Unmarshal(st.Predicate, &signed); err != nil {
		p.Reason = "the signed predicate is not a job record: " + err.Error()
		return p
	}
	if changed := changedFields(signedForm(signed), signedForm(rec)); len(changed) > 0 {
		p.Reason = "the stored record differs from the signed one in " + strings.Join(changed, ", ")
		return p
	}
	p.Verified = true
	return p
}

// signedForm is the part of a record its signature covers (recorder.Signed: no envelope and no
// write time), in the form the store keeps it: times in UTC to the microsecond, no empty labels,
// the ID derived as the store derives it.
func signedForm(r history.JobRecord) history.JobRecord {
	r.Envelope, r.UpdatedAt = nil, time.Time{}
	if r.ID == "" && r.Platform != "" && r.JobID != "" {
		r.ID = r.Platform + "/" + r.JobID
	}
	if len(r.Labels) == 0 {
		r.Labels = nil
	}
	for _, p := range []**time.Time{&r.Times.Queued, &r.Times.VMRequested, &r.Times.Cloned, &r.Times.Booted,
		&r.Times.Attested, &r.Times.JobStarted, &r.Times.JobFinished, &r.Times.VMDestroyed} {
		if *p != nil {
			t := (*p).UTC().Truncate(time.Microsecond)
			*p = &t
		}
	}
	return r
}

// changedFields names the JSON fields (vm.host for nested ones) where a and b differ, sorted.
func changedFields(a, b history.JobRecord) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	var am, bm map[string]any
	for _, x := range []struct {
		r    history.JobRecord
		into *map[string]any
	}{{a, &am}, {b, &bm}} {
		raw, _ := json.Marshal(x.r)
		_ = json.Unmarshal(raw, x.into)
	}
	var out []string
	diffJSON("", am, bm, &out)
	if len(out) == 0 {
		// Equal in JSON yet not in Go: nothing a reader of the record could see differs.
		return nil
	}
	slices.Sort(out)
	return out
}

func diffJSON(prefix string, a, b map[string]any, out *[]string) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		am, aIsMap := a[k].(map[string]any)
		bm, bIsMap := b[k].(map[string]any)
		switch {
		case aIsMap && bIsMap:
			diffJSON(prefix+k+".", am, bm, out)
		case !reflect.DeepEqual(a[k], b[k]):
			*out = append(*out, prefix+k)
		}
	}
}
