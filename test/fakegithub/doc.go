// Package fakegithub is a stateful, in-process fake of the parts of the GitHub REST API that
// HyperFleet uses: GitHub App installation tokens, just-in-time runner registration, runner
// listing and removal, and workflow job and run lookups. It speaks the real wire format so the
// unmodified go-github and ghinstallation clients work against it, sends signed workflow_job
// webhooks, and offers a small runner protocol under /_fake/ so tests can "run" jobs end to end.
package fakegithub
