// Package demand keeps each RunnerPool's job ledger: which workflow jobs are queued, running or
// done, stored in one ConfigMap per pool and updated with optimistic concurrency. Webhook
// receivers and the manager share demand only through the API server, so any replica may write,
// a restart loses nothing, and a replayed or late webhook changes nothing because only forward
// transitions are applied. The package also decides which one pool a job belongs to.
package demand
