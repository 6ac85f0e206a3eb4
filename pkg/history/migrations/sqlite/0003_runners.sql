-- What recorders learn about a runner's VM (VM, template, identity, the VM's times) before the job
-- the runner takes is known: kept per runner and laid over that job's record once it names the
-- runner. Facts are a JSON job record holding only those fields.
CREATE TABLE runners (
    namespace  TEXT NOT NULL,
    runner     TEXT NOT NULL,
    facts      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, runner)
);

CREATE INDEX runners_updated ON runners (updated_at);
CREATE INDEX jobs_runner ON jobs (namespace, runner);
