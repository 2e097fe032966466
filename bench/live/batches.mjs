// Synthetic data: the ingest benchmark's batches (1 trace + N llm_call events).

import { gzipSync } from 'node:zlib';
import { createItemFactory } from '../support.mjs';
import { CFG } from './config.mjs';

/** @type {() => string} ulidx's monotonic factory, loaded by loadBatchMaker() */
let ulid;

/** @type {ReturnType<typeof createItemFactory>} made by loadBatchMaker(), once ulid is loaded */
let makeItem;

/**
 * One batch as sent and as expected back: `traceId` finds it again when its SSE message arrives.
 * @typedef {object} Batch
 * @property {number} agentIdx the agent (and stream) it belongs to
 * @property {string} traceId
 * @property {string} itemJson the SSE data the server should deliver
 * @property {Buffer} gz the gzip request body
 * @property {number} jsonBytes
 */

/**
 * One batch for agent `agentIdx`: its item's JSON (the SSE data) and the gzip request body.
 * @param {number} agentIdx
 * @param {string} agentId
 * @returns {Batch}
 */
export function makeBatch(agentIdx, agentId) {
  const item = makeItem(agentId);
  const itemJson = JSON.stringify(item);
  const json = `{"batchId":"${ulid()}","items":[${itemJson}]}`;
  return { agentIdx, traceId: item.trace.id, itemJson, gz: gzipSync(json), jsonBytes: json.length };
}

const TRACE_ID = /^\{"trace":\{"id":"([^"]+)"/;
/**
 * The trace id of an SSE `trace` message (every batch here has a trace of its own).
 * @param {string} data
 * @returns {string | undefined}
 */
export function traceIdOf(data) {
  const match = TRACE_ID.exec(data.slice(0, 200));
  if (match) return match[1];
  try {
    return /** @type {{ trace?: { id?: string } } | null} */ (JSON.parse(data))?.trace?.id;
  } catch {
    return undefined;
  }
}

/** Loads ulidx (the bare server child does without) and makes the item factory. */
export async function loadBatchMaker() {
  const { monotonicFactory } = await import('ulidx');
  ulid = monotonicFactory();
  makeItem = createItemFactory({ ulid, eventsPerBatch: CFG.eventsPerBatch });
}
