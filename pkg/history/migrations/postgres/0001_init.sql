-- Job records and the audit log. IDs compare byte by byte (COLLATE "C") so that paging orders them
-- as SQLite does, whatever the database's locale.

CREATE TABLE jobs (
    id                    TEXT COLLATE "C" PRIMARY KEY,
    namespace             TEXT NOT NULL DEFAULT '',
    pool                  TEXT NOT NULL DEFAULT '',
    platform              TEXT NOT NULL DEFAULT '',
    job_id                TEXT NOT NULL DEFAULT '',
    job_url               TEXT NOT NULL DEFAULT '',
    repository            TEXT NOT NULL DEFAULT '',
    labels                JSONB,
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
    queued_at             TIMESTAMPTZ,
    vm_requested_at       TIMESTAMPTZ,
    cloned_at             TIMESTAMPTZ,
    booted_at             TIMESTAMPTZ,
    attested_at           TIMESTAMPTZ,
    job_started_at        TIMESTAMPTZ,
    job_finished_at       TIMESTAMPTZ,
    vm_destroyed_at       TIMESTAMPTZ,
    outcome               TEXT NOT NULL DEFAULT '',
    failure_reason        TEXT NOT NULL DEFAULT '',
    envelope              BYTEA,
    -- queued_at, or else the earliest time known: what listings sort, filter and page by.
    sort_at               TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL
);

CREATE INDEX jobs_namespace_sort ON jobs (namespace, sort_at DESC, id DESC);
CREATE INDEX jobs_updated ON jobs (updated_at);

-- A signed record is never changed.
CREATE FUNCTION hyperfleet_jobs_sealed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job record % is sealed', OLD.id USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER jobs_sealed BEFORE UPDATE ON jobs
FOR EACH ROW WHEN (OLD.envelope IS NOT NULL)
EXECUTE FUNCTION hyperfleet_jobs_sealed();

CREATE TABLE audit (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL,
    actor_subject TEXT NOT NULL,
    actor_groups  JSONB,
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
-- store's retention, which sets hyperfleet.audit_prune for its own transaction (SET LOCAL). This
-- guards against mistakes, not against an owner of the table, who can drop the trigger.
CREATE FUNCTION hyperfleet_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('hyperfleet.audit_prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit entries are append-only: % refused', TG_OP USING ERRCODE = 'integrity_constraint_violation';
END;
$$;

CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
FOR EACH ROW EXECUTE FUNCTION hyperfleet_audit_append_only();

CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
FOR EACH STATEMENT EXECUTE FUNCTION hyperfleet_audit_append_only();
