// Package gitlab is HyperFleet's GitLab CI platform: it verifies Job Hook webhooks (the
// X-Gitlab-Token compared in constant time), maps every GitLab job status onto demand, held, in
// progress or completed, matches jobs to pools by GitLab's rules (tags, run_untagged, protected
// refs, instance/group/project scope), creates a runner with its own glrt- authentication token
// per VM (deleted when the VM goes), and repairs missed webhooks by listing pending and running
// jobs. It talks to GitLab through gitlab.com/gitlab-org/api/client-go, with 429s turned into
// classified errors instead of retries.
package gitlab
