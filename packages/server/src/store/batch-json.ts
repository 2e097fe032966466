import type { BufferBatchItem } from '@flightlog/protocol';

/**
 * One item of a batch serialised once, in the pieces both of its uses need: the batch
 * statement reads the events apart from their payloads (see WRITE_BATCH in trace-store.ts),
 * and the live stream carries the whole item (itemDocument). Payloads are the bulk of a
 * batch, so each is turned into JSON exactly once.
 */
export interface ItemJson {
  /** The trace snapshot. */
  trace: string;
  /** Each event, without its payload. */
  events: string[];
  /** Each event's payload. */
  payloads: string[];
}

export function toItemJson(item: BufferBatchItem): ItemJson {
  const events: string[] = [];
  const payloads: string[] = [];
  for (const event of item.events) {
    // undefined leaves the key out (a copy without the key is slower to build)
    events.push(JSON.stringify({ ...event, payload: undefined }));
    payloads.push(JSON.stringify(event.payload));
  }
  return { trace: JSON.stringify(item.trace), events, payloads };
}

/**
 * The item as one JSON document, as `JSON.stringify(item)` writes it except that each event's
 * `payload` comes last: each event's JSON (an object with at least its id) gets its payload
 * added before its closing brace.
 */
export function itemDocument(json: ItemJson): string {
  const events = json.events.map(
    (event, i) => `${event.slice(0, -1)},"payload":${json.payloads[i] as string}}`,
  );
  return `{"trace":${json.trace},"events":[${events.join(',')}]}`;
}

/** Characters of JSON a batch's statement carries (about its bytes). */
export function jsonBytes(json: readonly ItemJson[]): number {
  let size = 0;
  for (const item of json) {
    size += item.trace.length;
    for (const event of item.events) size += event.length;
    for (const payload of item.payloads) size += payload.length;
  }
  return size;
}
