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
		{"", JobWaiting, true},
		// An approval releases a held job: it becomes demand.
		{JobWaiting, JobQueued, true},
		// A late "waiting" after "queued" is dropped: the job stays demand.
		{JobQueued, JobWaiting, false},
		{JobInProgress, JobWaiting, false},
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
	g.Expect(JobWaiting.NeedsRunner()).To(BeFalse(), "a held job is not demand")
	g.Expect(JobWaiting.IsHeld()).To(BeTrue())
	g.Expect(JobQueued.IsHeld()).To(BeFalse())
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
		{name: "empty segment", scope: Scope{Repository: "acme//api"}, effective: Scope{Repository: "acme//api"}, owner: "acme"},
		{name: "empty", scope: Scope{}, effective: Scope{}},
		{name: "GitLab project", scope: Scope{Repository: "platform/ci/builder"}, effective: Scope{Repository: "platform/ci/builder"}, owner: "platform", contains: "Platform/CI/builder", valid: true},
		{name: "GitLab nested group", scope: Scope{Organization: "platform/ci"}, effective: Scope{Organization: "platform/ci"}, owner: "platform/ci", contains: "platform/ci/tools/lint", valid: true},
		{name: "instance", scope: Scope{Instance: true}, effective: Scope{Instance: true}, contains: "anyone/anything", valid: true},
		{name: "group wins over instance", scope: Scope{Instance: true, Organization: "platform"}, effective: Scope{Organization: "platform"}, owner: "platform", contains: "platform/x", valid: true},
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
	g := NewWithT(t)
	g.Expect(Scope{Repository: "acme/api"}.Contains("acme/web")).To(BeFalse())
	g.Expect(Scope{Organization: "acme"}.Contains("acme")).To(BeFalse())
	g.Expect(Scope{Organization: "acme"}.Contains("acmeco/api")).To(BeFalse(), "a prefix of the name is not the group")
	g.Expect(Scope{Organization: "platform/ci"}.Contains("platform/cix/tool")).To(BeFalse())
	g.Expect(Scope{Organization: "platform/ci"}.Contains("platform/tool")).To(BeFalse())
	g.Expect(Scope{}.Contains("acme/api")).To(BeFalse())
	owner, name := Scope{Repository: "platform/ci/builder"}.RepositoryParts()
	g.Expect([]string{owner, name}).To(Equal([]string{"platform/ci", "builder"}))
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
