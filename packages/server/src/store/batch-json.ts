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
 * added before its closing brace. Made by one `join`, whose result is a flat string: wrapping the
 * joined events in the item's braces afterwards made a rope, which the live bus then copied
 * whole once more to take its bytes.
 */
export function itemDocument(json: ItemJson): string {
  const count = json.events.length;
  const head = `{"trace":${json.trace},"events":[`;
  if (count === 0) return `${head}]}`;
  const parts = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    const event = json.events[i] as string;
    parts[i] = `${event.slice(0, -1)},"payload":${json.payloads[i] as string}}`;
  }
  parts[0] = head + (parts[0] as string);
  parts[count - 1] += ']}';
  return parts.join(',');
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
