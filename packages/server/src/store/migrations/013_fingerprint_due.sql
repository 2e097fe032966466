-- Finished runs changed again after they were fingerprinted (a later snapshot, or late events
-- under an older one): the analysis worker fingerprints them again once `due_at` has passed
-- (issue 25, part 2). A claim moves `due_at` a lease ahead, so a worker that dies leaves the run
-- to be taken again; a change during the claim moves it again, so the run is taken again.
-- Runs unchanged on PGlite and PostgreSQL.
CREATE TABLE fingerprint_due (
  trace_id text PRIMARY KEY REFERENCES traces (id) ON DELETE CASCADE,
  due_at   timestamptz NOT NULL
);
CREATE INDEX fingerprint_due_at_idx ON fingerprint_due (due_at);
