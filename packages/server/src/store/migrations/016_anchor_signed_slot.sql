-- The slot an anchoring transaction's blockhash was read at (issue 25, part 3): past its
-- lifetime, a transaction the RPC does not know is taken as never landed only when the RPC's
-- history reaches back to that slot; otherwise signing the tree anew could anchor it twice.
-- Runs unchanged on PGlite and PostgreSQL.
ALTER TABLE anchor_batches ADD COLUMN signed_slot numeric;
