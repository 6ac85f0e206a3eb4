// Package fakegitlab is a stateful, in-process fake of the parts of GitLab (REST API v4) that
// HyperFleet and gitlab-runner use, answering as GitLab does so that clients nobody on the
// project wrote (GitLab's Go client, python-gitlab) work against it unmodified.
//
// It implements: the current user (GET /user) and the version (GET /version); runners
// (POST /user/runners with tag_list as an array or a comma-separated string, get, delete,
// the owned, all, group and project listings with GitLab's type, status, paused, scope and
// tag_list filters); a project's jobs and a runner's jobs; groups, projects and their
// listings (newest first unless order_by and sort say otherwise) and protected refs;
// users with personal access tokens, scopes (api, read_api, read_user, create_runner,
// manage_runner) and a per-user rate limit with GitLab's RateLimit-* headers and 429;
// offset pagination (X-Total, X-Next-Page, Link, per_page at most 100); the runner's job
// protocol (verify, request a job, update it, delete itself) with GitLab's tag,
// run_untagged, protected-ref and scope matching; and Job Hook webhooks sent as GitLab sends
// them. Refusals carry GitLab's bodies: {"message":"401 Unauthorized"},
// {"message":"403 Forbidden"}, OAuth's insufficient_scope and invalid_token,
// {"message":"404 <Thing> Not Found"}, {"error":"<param> does not have a valid value"}.
//
// It deliberately does not implement, and answers with GitLab's 404 {"error":"404 Not Found"}
// for an unknown route (405 {"error":"405 Not Allowed"} with Allow for a known path with
// another method): other users (/users), memberships and permissions below owner (every user
// owns every group and project), runner updates (PUT /runners/:id), registration tokens
// (POST /runners), job logs and artifacts (PATCH /jobs/:id/trace), pipelines, keyset
// pagination, search, and the project listing's order_by values similarity and storage sizes,
// which it refuses with 400.
package fakegitlab
