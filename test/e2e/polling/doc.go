// Package polling runs the local fleet with a GitHub pool whose demand comes from polling the
// GitHub API only (spec.platform.github.demand: Polling): the manager has no /webhooks/github
// route and the fake GitHub sends no webhook, as at a site with outbound HTTPS only. Every job
// runs once on its own VM and the pool goes back to its floor.
package polling
