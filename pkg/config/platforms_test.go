package config

import (
	"flag"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	// The manager links every platform; so do its settings' tests.
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all"
)

// TestWebhookSecretsComeFromThePlatformsSettings: each platform's webhook secret is the setting its
// driver declares, read from its environment variable and overridden by its flag; a platform
// whose secret is set nowhere has none.
func TestWebhookSecretsComeFromThePlatformsSettings(t *testing.T) {
	env := map[string]string{"GITHUB_WEBHOOK_SECRET": "from-env", "GITLAB_WEBHOOK_SECRET": "gitlab-env"}
	m := &Manager{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	check := m.Bind(fs, func(k string) string { return env[k] })
	if err := fs.Parse([]string{"--gitlab-webhook-secret=gitlab-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	want := map[platform.Kind]string{platform.KindGitHub: "from-env", platform.KindGitLab: "gitlab-flag"}
	if len(m.WebhookSecrets) != len(want) {
		t.Errorf("secrets %v, want %v", m.WebhookSecrets, want)
	}
	for k, v := range want {
		if m.WebhookSecrets[k] != v {
			t.Errorf("%s: %q, want %q", k, m.WebhookSecrets[k], v)
		}
	}
	if f := fs.Lookup("webhook-secret"); f == nil || f.DefValue != "" {
		t.Errorf("the flag's help shows a secret or the flag is missing: %+v", f)
	}
}
