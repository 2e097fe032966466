-- A fingerprint for every finished run (issue 25, part 2): `traces.trace_hash` holds the run's
-- latest fingerprint; this table keeps every fingerprint the run had, oldest first, so that a
-- run changed after it was fingerprinted shows it. Runs unchanged on PGlite and PostgreSQL.
CREATE TABLE trace_hashes (
  trace_id    text NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
  -- 1 for the run's first fingerprint, then 2, 3…
  n           integer NOT NULL,
  trace_hash  text NOT NULL,
  -- the canonical form hashed (TRACE_HASH_VERSION)
  version     text NOT NULL,
  -- the run as hashed: its status and how many events it held
  status      text NOT NULL,
  event_count bigint NOT NULL,
  computed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (trace_id, n)
);
