-- Public share links of runs (issue 25, part 1): at most one per run. The token itself is never
-- stored: `token_hash` (SHA-256, hex) is what a request's token is looked up by, and
-- `sealed_token` is the token encrypted with a key derived from the server's secret, so that the
-- run's team can be shown its current link while a copy of the database alone opens nothing.
-- A deleted run takes its link with it. Runs unchanged on PGlite and PostgreSQL.
CREATE TABLE trace_shares (
  trace_id     text PRIMARY KEY REFERENCES traces (id) ON DELETE CASCADE,
  token_hash   text NOT NULL UNIQUE,
  sealed_token text NOT NULL,
  shared_by    text NOT NULL,
  shared_at    timestamptz NOT NULL DEFAULT now()
);
