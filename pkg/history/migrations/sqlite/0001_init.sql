-- Job records and the audit log. Times are microseconds since the Unix epoch, UTC.

CREATE TABLE jobs (
    id                    TEXT PRIMARY KEY,
    namespace             TEXT NOT NULL DEFAULT '',
    pool                  TEXT NOT NULL DEFAULT '',
    platform              TEXT NOT NULL DEFAULT '',
    job_id                TEXT NOT NULL DEFAULT '',
    job_url               TEXT NOT NULL DEFAULT '',
    repository            TEXT NOT NULL DEFAULT '',
    labels                TEXT,
    runner                TEXT NOT NULL DEFAULT '',
    vm_provider           TEXT NOT NULL DEFAULT '',
    vm_hypervisor_cluster TEXT NOT NULL DEFAULT '',
    vm_host               TEXT NOT NULL DEFAULT '',
    vm_id                 TEXT NOT NULL DEFAULT '',
    vm_name               TEXT NOT NULL DEFAULT '',
    template_name         TEXT NOT NULL DEFAULT '',
    template_id           TEXT NOT NULL DEFAULT '',
    template_digest       TEXT NOT NULL DEFAULT '',
    spiffe_id             TEXT NOT NULL DEFAULT '',
    svid_serial           TEXT NOT NULL DEFAULT '',
    svid_fingerprint      TEXT NOT NULL DEFAULT '',
    tpm_ek_hash           TEXT NOT NULL DEFAULT '',
    queued_at             INTEGER,
    vm_requested_at       INTEGER,
    cloned_at             INTEGER,
    booted_at             INTEGER,
    attested_at           INTEGER,
    job_started_at        INTEGER,
    job_finished_at       INTEGER,
    vm_destroyed_at       INTEGER,
    outcome               TEXT NOT NULL DEFAULT '',
    failure_reason        TEXT NOT NULL DEFAULT '',
    envelope              BLOB,
    -- queued_at, or else the earliest time known: what listings sort, filter and page by.
    sort_at               INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE INDEX jobs_namespace_sort ON jobs (namespace, sort_at DESC, id DESC);
CREATE INDEX jobs_updated ON jobs (updated_at);

-- A signed record is never changed.
CREATE TRIGGER jobs_sealed BEFORE UPDATE ON jobs
WHEN OLD.envelope IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'job record is sealed');
END;

CREATE TABLE audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            INTEGER NOT NULL,
    actor_subject TEXT NOT NULL,
    actor_groups  TEXT,
    actor_kind    TEXT NOT NULL,
    action        TEXT NOT NULL,
    api_version   TEXT NOT NULL DEFAULT '',
    kind          TEXT NOT NULL DEFAULT '',
    namespace     TEXT NOT NULL DEFAULT '',
    name          TEXT NOT NULL DEFAULT '',
    result        TEXT NOT NULL DEFAULT '',
    reason        TEXT NOT NULL DEFAULT '',
    detail        TEXT NOT NULL DEFAULT ''
);

CREATE INDEX audit_namespace ON audit (namespace, id);
CREATE INDEX audit_at ON audit (at);

-- The audit log is append-only: no entry is ever updated, and entries are deleted only by the
-- store's retention, which holds a row in audit_prune for the length of its own transaction.
CREATE TABLE audit_prune (pruning INTEGER NOT NULL);

CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit entries are append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
WHEN NOT EXISTS (SELECT 1 FROM audit_prune)
BEGIN
    SELECT RAISE(ABORT, 'audit entries are append-only: only retention deletes them');
END;
