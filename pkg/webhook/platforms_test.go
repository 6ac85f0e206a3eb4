package webhook_test

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// tokenParser reads a GitLab-style job hook proven by X-Gitlab-Token, compared in constant time:
// enough of a second platform to show what the receiver does with two.
type tokenParser struct{ installation string }

func (p tokenParser) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	token := []byte(header.Get("X-Gitlab-Token"))
	if len(token) == 0 || subtle.ConstantTimeCompare(token, secret) != 1 {
		return platform.Webhook{}, fmt.Errorf("%w: X-Gitlab-Token", platform.ErrInvalidSignature)
	}
	var hook struct {
		BuildID int64    `json:"build_id"`
		Status  string   `json:"build_status"`
		Tags    []string `json:"tags"`
		Project struct {
			Path string `json:"path_with_namespace"`
		} `json:"project"`
	}
	if err := json.Unmarshal(body, &hook); err != nil {
		return platform.Webhook{}, fmt.Errorf("%w: %v", platform.ErrMalformedWebhook, err)
	}
	ev := &platform.JobEvent{JobID: fmt.Sprint(hook.BuildID), State: platform.JobQueued, Labels: platform.NormalizeLabels(hook.Tags),
		Repository: hook.Project.Path, Installation: p.installation, DeliveryID: header.Get("X-Gitlab-Event-UUID")}
	return platform.Webhook{Kind: platform.WebhookJob, Event: "Job Hook", DeliveryID: ev.DeliveryID, Job: ev}, nil
}

func gitlabJob(id int, project string, tags ...string) []byte {
	b, _ := json.Marshal(map[string]any{"object_kind": "build", "build_id": id, "build_status": "pending", "tags": tags,
		"project": map[string]any{"path_with_namespace": project}})
	return b
}

func postTo(g Gomega, h *harness, kind platform.Kind, header http.Header, body []byte) int {
	url := strings.TrimSuffix(h.url, webhook.Path) + webhook.PathOf(kind)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header = header
	resp, err := h.client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}

// TestPlatformRoutesStayApart plays a sender of one platform against another's route: each route
// verifies with its own platform's parser and secret, so a GitHub-signed delivery is refused on
// /webhooks/gitlab and a GitLab token on /webhooks/github; a GitLab job whose project path and tags
// match a GitHub pool exactly never reaches that pool; a platform without a driver has no route,
// and one without a secret refuses everything.
func TestPlatformRoutesStayApart(t *testing.T) {
	g := NewWithT(t)
	d, ok := platform.Lookup(platform.KindGitHub)
	g.Expect(ok).To(BeTrue())
	h := startReceiver(t, webhook.Config{
		Secrets: map[platform.Kind][]byte{platform.KindGitHub: secret, platform.KindGitLab: []byte("gl-token")},
		Parsers: map[platform.Kind]platform.WebhookParser{
			platform.KindGitHub: d.Webhooks, platform.KindGitLab: tokenParser{installation: "gitlab.example.com"},
			platform.KindBuildkite: tokenParser{installation: "acme"},
		},
	}, true)
	pool := h.createPool(t, "linux", fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}})

	githubSigned := job{id: 41, action: "queued"}.payload()
	ghHeader := http.Header{"X-Github-Event": {"workflow_job"}, "X-Github-Delivery": {fakegithub.NewDeliveryID()},
		"X-Hub-Signature-256": {fakegithub.SignPayload(secret, githubSigned)}, "Content-Type": {"application/json"}}
	g.Expect(postTo(g, h, platform.KindGitLab, ghHeader, githubSigned)).To(Equal(http.StatusUnauthorized),
		"a GitHub signature proves nothing on GitLab's route")

	glBody := gitlabJob(41, "acme/api", "linux")
	glHeader := http.Header{"X-Gitlab-Token": {"gl-token"}, "X-Gitlab-Event": {"Job Hook"}, "X-Gitlab-Event-Uuid": {"u-1"}}
	g.Expect(postTo(g, h, platform.KindGitHub, glHeader, glBody)).To(Equal(http.StatusUnauthorized),
		"a GitLab token proves nothing on GitHub's route")
	g.Expect(postTo(g, h, platform.KindBuildkite, http.Header{}, glBody)).To(Equal(http.StatusUnauthorized),
		"a route without a secret refuses everything, even a delivery without a token")
	g.Expect(postTo(g, h, "jenkins", glHeader, glBody)).To(Equal(http.StatusNotFound))

	// A verified GitLab job for "acme/api" tagged linux: same path, same labels as the GitHub
	// pool, but not its platform.
	g.Expect(postTo(g, h, platform.KindGitLab, glHeader, glBody)).To(Equal(http.StatusAccepted))
	h.waitIdle(g)
	g.Expect(h.receiver.Stats().Unrouted).To(Equal(uint64(1)))
	g.Expect(h.snapshot(g, pool).Jobs).To(BeEmpty(), "the GitHub pool never sees a GitLab job")

	// The same job ID on GitHub's route is GitHub's job 41, and is the pool's.
	g.Expect(h.post(g, fakegithub.NewDeliveryID(), githubSigned)).To(Equal(http.StatusAccepted))
	h.waitIdle(g)
	g.Expect(h.snapshot(g, pool).Queued).To(Equal(1))
}
