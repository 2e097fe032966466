-- Flightlog schema, version 1. Runs unchanged on PGlite and PostgreSQL.

CREATE TABLE agents (
  id          text PRIMARY KEY,
  name        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  verified_at timestamptz
);

-- Only the SHA-256 of a key is stored: keys are 256-bit random values, so a fast hash is enough.
CREATE TABLE api_keys (
  id         text PRIMARY KEY,
  agent_id   text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  key_hash   text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_agent_idx ON api_keys (agent_id);

CREATE TABLE verify_tokens (
  token_hash  text PRIMARY KEY,
  agent_id    text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  consumed_at timestamptz
);
CREATE INDEX verify_tokens_agent_idx ON verify_tokens (agent_id);

CREATE TABLE members (
  agent_id   text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  user_id    text NOT NULL,
  role       text NOT NULL CHECK (role IN ('owner', 'editor', 'viewer')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, user_id)
);
CREATE INDEX members_user_idx ON members (user_id);

CREATE TABLE traces (
  id                text PRIMARY KEY,
  agent_id          text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  status            text NOT NULL CHECK (status IN ('running', 'completed', 'errored', 'timeout')),
  started_at        timestamptz NOT NULL,
  ended_at          timestamptz,
  duration_ms       double precision,
  input_summary     text NOT NULL,
  output_summary    text,
  error_message     text,
  tags              text[] NOT NULL,
  event_count       bigint NOT NULL,
  total_tokens      bigint NOT NULL,
  -- numeric keeps the exact decimal string the client sent (scale included).
  total_cost_usd    numeric NOT NULL,
  total_lamports    numeric NOT NULL,
  chain_tx_count    bigint NOT NULL,
  tools_called      text[] NOT NULL,
  anchor_signature  text,
  anchor_slot       numeric,
  merkle_proof      text,
  trace_hash        text,
  share_token       text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX traces_agent_started_idx ON traces (agent_id, started_at DESC, id DESC);
CREATE INDEX traces_agent_status_started_idx ON traces (agent_id, status, started_at DESC, id DESC);

CREATE TABLE events (
  id                text PRIMARY KEY,
  trace_id          text NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
  agent_id          text NOT NULL,
  sequence          bigint NOT NULL,
  type              text NOT NULL,
  started_at        timestamptz NOT NULL,
  ended_at          timestamptz,
  duration_ms       double precision,
  status            text NOT NULL,
  -- json, not jsonb: it keeps the payload as sent, including escapes jsonb refuses (\u0000).
  payload           json NOT NULL,
  payload_encrypted boolean NOT NULL,
  parent_event_id   text,
  error_message     text,
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_trace_sequence_idx ON events (trace_id, sequence);

-- Idempotency keys: one row per accepted batch, per agent.
CREATE TABLE accepted_batches (
  agent_id       text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  batch_id       text NOT NULL,
  trace_id       text NOT NULL,
  verify_outcome text,
  item_count     integer NOT NULL,
  event_count    integer NOT NULL,
  accepted_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (agent_id, batch_id)
);

CREATE TABLE analysis_jobs (
  id           bigserial PRIMARY KEY,
  trace_id     text NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
  agent_id     text NOT NULL,
  state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
  attempts     integer NOT NULL DEFAULT 0,
  run_after    timestamptz NOT NULL DEFAULT now(),
  locked_until timestamptz,
  last_error   text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
-- At most one job waiting per trace: a repeated finalisation refreshes it instead of adding one.
CREATE UNIQUE INDEX analysis_jobs_one_pending_idx ON analysis_jobs (trace_id) WHERE state = 'pending';
CREATE INDEX analysis_jobs_runnable_idx ON analysis_jobs (run_after) WHERE state = 'pending';
