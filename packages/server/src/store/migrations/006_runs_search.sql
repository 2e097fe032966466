-- The runs list's filters (GET /v1/agents/:id/traces?tag=&q=&from=&to=), indexed so that they
-- stay fast on an agent with 100,000 runs. Runs unchanged on PGlite and PostgreSQL.
--
-- `q` is a case-insensitive substring search (ILIKE '%…%') over the three texts of a run; only a
-- trigram index serves that, so pg_trgm is created when it can be: in `public` when we may (one
-- copy a database's schemas share, which dropping one Flightlog schema cannot take with it),
-- else in the current schema. Where it cannot be created at all (not installed on the server,
-- no privilege) the search still answers, by scanning the agent's runs, and a notice says why.
-- The operator class is named with the extension's schema, which need not be on the search path.
DO $$
DECLARE
  trgm_schema text;
BEGIN
  SELECT n.nspname INTO trgm_schema
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
  WHERE e.extname = 'pg_trgm';
  IF trgm_schema IS NULL THEN
    BEGIN
      CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
    EXCEPTION WHEN OTHERS THEN
      BEGIN
        CREATE EXTENSION IF NOT EXISTS pg_trgm;
      EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'pg_trgm is not available (%): the runs text search is not indexed', SQLERRM;
      END;
    END;
    SELECT n.nspname INTO trgm_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pg_trgm';
  END IF;
  IF trgm_schema IS NOT NULL THEN
    EXECUTE format(
      'CREATE INDEX traces_text_trgm_idx ON traces USING gin ('
      'input_summary %1$I.gin_trgm_ops, output_summary %1$I.gin_trgm_ops, '
      'error_message %1$I.gin_trgm_ops)',
      trgm_schema);
  END IF;
END
$$;

-- `tag`: runs whose tags contain it (tags @> ARRAY[tag]).
CREATE INDEX traces_tags_idx ON traces USING gin (tags);
