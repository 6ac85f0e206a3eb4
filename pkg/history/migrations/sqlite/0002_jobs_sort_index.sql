-- Percentiles and unrestricted listings range over sort_at across all namespaces.
CREATE INDEX jobs_sort ON jobs (sort_at DESC, id DESC);
