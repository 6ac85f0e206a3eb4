// Package recorder writes job records and audit entries to the history store without ever making
// the job, the webhook or the controller that learned them wait: pieces are queued in memory and
// one writer applies them in order, retrying an unavailable store with backoff and keeping the rest
// queued behind the piece it retries, so an outage delays records and loses none (up to
// Options.MaxPending pieces, beyond which new pieces are dropped and counted). A job's record is
// sealed with the installation's signature once the job has finished and its VM is gone.
package recorder
