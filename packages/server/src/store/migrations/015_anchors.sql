-- Anchoring finished runs on Solana (issue 25, part 3). Finished runs' fingerprints are gathered
-- into Merkle trees; each tree is one `anchor_batches` row whose root goes on chain in one memo
-- transaction, and each run in it one `anchor_leaves` row with its audit path. A batch moves
-- gathered → signed → anchored. Its transaction is signed and kept (`signature`, `wire`) before
-- it is ever sent, so that a crash after sending finds it on chain by its signature instead of
-- anchoring the tree a second time; it is signed anew only once the old one can no longer land
-- (its blockhash expired at `last_valid_block_height`). Runs unchanged on PGlite and PostgreSQL.
CREATE TABLE anchor_batches (
  id                      bigserial PRIMARY KEY,
  cluster                 text NOT NULL,
  root                    text NOT NULL,
  size                    integer NOT NULL,
  memo                    text NOT NULL,
  state                   text NOT NULL DEFAULT 'gathered'
                          CHECK (state IN ('gathered', 'signed', 'anchored')),
  signature               text UNIQUE,
  wire                    text,
  last_valid_block_height numeric,
  slot                    numeric,
  attempts                integer NOT NULL DEFAULT 0,
  last_error              text,
  -- when the batch is next worked on (a backoff after a failure); a claim moves it a lease ahead
  due_at                  timestamptz NOT NULL DEFAULT now(),
  gathered_at             timestamptz NOT NULL DEFAULT now(),
  anchored_at             timestamptz
);
CREATE INDEX anchor_batches_due_idx ON anchor_batches (due_at) WHERE state <> 'anchored';

CREATE TABLE anchor_leaves (
  batch_id    bigint NOT NULL REFERENCES anchor_batches (id) ON DELETE CASCADE,
  leaf_index  integer NOT NULL,
  trace_id    text NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
  trace_hash  text NOT NULL,
  -- the run's merkleProof (protocol's anchor-proof.ts), fixed when the tree is gathered
  proof       text NOT NULL,
  PRIMARY KEY (batch_id, leaf_index),
  -- a fingerprint is anchored once
  UNIQUE (trace_id, trace_hash)
);

-- The fingerprint of the run last put in a tree: a run whose `trace_hash` differs is waiting to
-- be anchored (a partial index finds those without reading every run).
ALTER TABLE traces ADD COLUMN anchored_hash text;
CREATE INDEX traces_unanchored_idx ON traces (id)
  WHERE trace_hash IS NOT NULL AND anchored_hash IS DISTINCT FROM trace_hash;
