// Package fakebuildkite is a stateful, in-process fake of the parts of Buildkite that HyperFleet
// and buildkite-agent use, speaking the real wire format so that Buildkite's own clients
// (go-buildkite, and buildkite-agent's api package) work against it unmodified; the
// conformance tests run both.
//
// Implemented:
//   - REST API v2 (https://buildkite.com/docs/apis/rest-api) with Bearer API tokens and their
//     scopes: organizations (list, get), pipelines (list, get), builds (list all, by
//     organization, by pipeline, get, with their jobs; state, branch and commit filters as
//     one value or a Rails array, "finished", branch wildcards), agents (list connected, get,
//     stop), the cluster (get) and its agent tokens (create, list, get, delete).
//   - Pagination by page and per_page (default 30, at most 100) with the Link header, and a
//     per-minute budget per token with the RateLimit-Scope/-Limit/-Remaining/-Reset headers
//     and Buildkite's 429 body.
//   - Errors as Buildkite sends them: JSON {"message": ...} with 401 (no or unknown token,
//     checked before the organization is looked up), 403 (missing scope), 404 (unknown organization, cluster,
//     pipeline, build, agent or token) and 422 (validation); any path or method no endpoint
//     serves is a JSON 404 {"message": "No route found"}; GET / is the documented schema probe.
//   - Agent API v3 (/v3): register with an agent token; with the access token connect,
//     heartbeat, ping (a job matching the agent's tags, or {"action": "disconnect"} after a
//     stop), accept, start, job state, finish, disconnect; and the metrics endpoint.
//   - Webhooks: job.scheduled, job.started, job.finished, job.activated and ping (SendPing),
//     with X-Buildkite-Token or X-Buildkite-Signature ("timestamp=...,signature=..." over
//     "<timestamp>.<body>"), recorded in Deliveries.
//   - Test seams: CreateJob, Release, Cancel, faults (InjectFault) and request counters, and
//     unauthenticated helpers under /_fake/.
//
// Deliberately not implemented, each answered with the JSON 404 above (so a client sees an
// absent feature, never a silent success): the GraphQL API; REST writes other than cluster
// tokens and stopping an agent (creating, canceling or rebuilding builds, retrying or unblocking
// jobs, pipeline changes, pausing agents); job logs, environments, artifacts and annotations;
// clusters other than the one (list, queues); users, teams, access-token and meta endpoints;
// the agent API's job acquire, log chunks, header times, meta-data, artifacts, pipeline upload,
// OIDC and secrets; build.* and agent.* webhooks. The per-user limit (RateLimit-User-*) is not
// modelled: the one budget is per token. A page or per_page that is not a positive number is
// a 400, since Buildkite documents no answer for it.
package fakebuildkite
