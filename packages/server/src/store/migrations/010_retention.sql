-- Retention (issue 24, item 1): how long an agent's runs are kept. Runs unchanged on PGlite and
-- PostgreSQL. Null takes RETENTION_DAYS (unset: forever), 0 keeps them forever, else days. The
-- sweeper finds an agent's expired runs through traces_agent_started_idx (oldest first).
ALTER TABLE agents ADD COLUMN retention_days integer CHECK (retention_days >= 0);
