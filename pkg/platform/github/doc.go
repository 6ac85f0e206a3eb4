// Package github implements platform.Platform for GitHub Actions with go-github and a GitHub
// App (ghinstallation): it verifies and parses workflow_job webhooks, registers just-in-time
// runners, lists and removes them, and queries queued jobs for the repair loop. It works
// against github.com, GitHub Enterprise Server and HyperFleet's fake GitHub alike.
package github
