package platform

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestIsForward(t *testing.T) {
	tests := []struct {
		from, to JobState
		want     bool
	}{
		{"", JobQueued, true},
		{"", JobCompleted, true},
		{JobQueued, JobInProgress, true},
		{JobQueued, JobCompleted, true},
		{JobWaiting, JobInProgress, true},
		{JobInProgress, JobCompleted, true},
		{JobQueued, JobWaiting, false},
		{JobWaiting, JobQueued, false},
		{JobQueued, JobQueued, false},
		{JobInProgress, JobQueued, false},
		{JobCompleted, JobInProgress, false},
		{JobCompleted, JobCompleted, false},
		{JobQueued, "requeued", false},
		{"bogus", JobCompleted, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s to %s", tt.from, tt.to), func(t *testing.T) {
			NewWithT(t).Expect(IsForward(tt.from, tt.to)).To(Equal(tt.want))
		})
	}
}

func TestNeedsRunner(t *testing.T) {
	g := NewWithT(t)
	g.Expect(JobQueued.NeedsRunner()).To(BeTrue())
	g.Expect(JobWaiting.NeedsRunner()).To(BeTrue())
	g.Expect(JobInProgress.NeedsRunner()).To(BeFalse())
	g.Expect(JobCompleted.NeedsRunner()).To(BeFalse())
}

func TestScope(t *testing.T) {
	tests := []struct {
		name      string
		scope     Scope
		effective Scope
		owner     string
		contains  string
		valid     bool
	}{
		{name: "repository", scope: Scope{Repository: "acme/api"}, effective: Scope{Repository: "acme/api"}, owner: "acme", contains: "ACME/api", valid: true},
		{name: "organization", scope: Scope{Organization: "acme"}, effective: Scope{Organization: "acme"}, owner: "acme", contains: "acme/web", valid: true},
		{name: "repository wins", scope: Scope{Organization: "acme", Repository: "acme/api"}, effective: Scope{Repository: "acme/api"}, owner: "acme", contains: "acme/api", valid: true},
		{name: "malformed repository", scope: Scope{Repository: "acme"}, effective: Scope{Repository: "acme"}, owner: "acme"},
		{name: "empty", scope: Scope{}, effective: Scope{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.scope.Effective()).To(Equal(tt.effective))
			g.Expect(tt.scope.Owner()).To(Equal(tt.owner))
			g.Expect(tt.scope.Validate() == nil).To(Equal(tt.valid))
			if tt.contains != "" {
				g.Expect(tt.scope.Contains(tt.contains)).To(BeTrue())
			}
		})
	}
	NewWithT(t).Expect(Scope{Repository: "acme/api"}.Contains("acme/web")).To(BeFalse())
}

func TestErrorClassification(t *testing.T) {
	g := NewWithT(t)
	reset := time.Unix(1700000000, 0)
	cause := errors.New("API rate limit exceeded")
	err := fmt.Errorf("registering: %w", &Error{Class: ErrRateLimited, Op: "generate JIT config", StatusCode: 403, RetryAt: reset, Err: cause})

	g.Expect(err).To(MatchError(ErrRateLimited))
	g.Expect(err).To(MatchError(cause))
	g.Expect(err).NotTo(MatchError(ErrTransient))
	g.Expect(IsRetryable(err)).To(BeTrue())
	at, ok := RetryAt(err)
	g.Expect(ok).To(BeTrue())
	g.Expect(at).To(Equal(reset))
	g.Expect(IsRetryable(&Error{Class: ErrUnauthorized, Err: cause})).To(BeFalse())

	g.Expect(WebhookHTTPStatus(nil)).To(Equal(http.StatusOK))
	g.Expect(WebhookHTTPStatus(fmt.Errorf("%w: x", ErrInvalidSignature))).To(Equal(http.StatusUnauthorized))
	g.Expect(WebhookHTTPStatus(fmt.Errorf("%w: x", ErrMalformedWebhook))).To(Equal(http.StatusBadRequest))
}
