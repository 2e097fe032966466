-- Runs wait to be anchored in the order they were last written (issue 25, part 3), not by id: a
-- run's id is its client's choice, and a tenant whose ids sort first kept every other tenant's
-- runs out of the trees for as long as it sent more than a tree's worth. The index the gatherer
-- reads is rebuilt on that order. Runs unchanged on PGlite and PostgreSQL.
DROP INDEX traces_unanchored_idx;
CREATE INDEX traces_unanchored_idx ON traces (updated_at, id)
  WHERE trace_hash IS NOT NULL AND anchored_hash IS DISTINCT FROM trace_hash;
