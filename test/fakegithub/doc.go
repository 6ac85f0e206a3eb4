// Package fakegithub is a stateful, in-process fake of the parts of the GitHub REST API that
// HyperFleet uses: GitHub App installation tokens, just-in-time runner registration, runner
// listing and removal, and workflow job and run lookups. It speaks the real wire format so the
// unmodified go-github and ghinstallation clients work against it, and sends signed workflow_job
// webhooks.
//
// Its encoded_jit_config has the shape actions/runner reads (the .runner, .credentials and
// .credentials_rsaparams files, the runner's own RSA key in the last), and a runner
// authenticates as actions/runner does, exchanging a JWT client assertion signed with that key
// for an access token (jitconfig.go, runnerproto.go).
//
// Not implemented: the Actions service a real runner talks to once it holds its token (the
// broker's sessions and message long-poll, the run service's job acquisition, logs, artifacts,
// caches). In their place a small runner protocol under /_fake/, authenticated with the runner's
// access token, lets tests take one job, finish it and delete the ephemeral runner, as the real
// service does. Requests the fake does not serve answer GitHub's JSON 404.
package fakegithub
