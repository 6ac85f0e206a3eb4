// Package fakegitlab is a stateful, in-process fake of the parts of GitLab that HyperFleet and
// gitlab-runner use: the REST API v4 subset for runners (create with a runner authentication
// token, list, delete), jobs and group projects, with scoped personal access tokens,
// pagination and rate limits; the runner's job protocol (request a job, update its state) with
// GitLab's tag, run_untagged, protected-ref and scope matching; and Job Hook webhooks sent as
// GitLab sends them. It speaks the real wire format, so the unmodified GitLab Go client and a
// gitlab-runner-like program work against it.
package fakegitlab
