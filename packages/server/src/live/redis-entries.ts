import {
  REPLAY_PAGE_BYTES,
  isMessageId,
  messageId,
  splitMessageId,
  type LiveMessage,
} from './live-bus.js';
import type { Entry, LiveScripts } from './redis-scripts.js';

/** Entries per page of a replay. */
export const REPLAY_PAGE = 100;

/**
 * An entry is one batch, its items stored as repeated `d` fields, in order (its publish's token
 * is in the agent's token stream, under the same id); or one `r` field, a resync notice. An `x`
 * field is an item of a deleted trace (see redis-scripts.ts FORGET_ITEMS): it keeps its place,
 * so the items after it keep their ids, and shows nothing.
 */
export function messagesOf([id, fields]: Entry): LiveMessage[] {
  const messages: LiveMessage[] = [];
  let item = 0;
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === 'd')
      messages.push({ id: messageId(id, item++), data: fields[i + 1] as string });
    else if (fields[i] === 'r')
      messages.push({
        id: messageId(id, item++),
        data: fields[i + 1] as string,
        event: 'resync',
      });
    else if (fields[i] === 'x') item++;
  return messages;
}

/** Items an entry was written with (its `d`, `r` and `x` fields). */
export function itemCount([, fields]: Entry): number {
  let count = 0;
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === 'd' || fields[i] === 'r' || fields[i] === 'x') count++;
  return count;
}

/** The size a token-stream entry gives its batch (see redis-scripts.ts). */
export function twinBytes(fields: string[]): number {
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i] === 'b') return Number(fields[i + 1]) || 0;
  return 0;
}

/**
 * Up to `max` of the stream's entries from `start` (an entry id, inclusive, or `-`) on, and
 * whether that was all. Read in pages of at most REPLAY_PAGE entries and about
 * REPLAY_PAGE_BYTES, so that no reply holds the shared connection for long however big the
 * agent's batches are (a page of 100 entries of 5 MiB each once outlasted the command timeout
 * and took every other agent's publishes with it). Entries added while paging are read too
 * (their ids dedupe them against live delivery).
 */
async function entriesFrom(
  scripts: LiveScripts,
  agentId: string,
  start: string,
  max: number,
  untilCut: boolean,
) {
  const entries: Entry[] = [];
  let from = start;
  while (entries.length < max) {
    const count = Math.min(REPLAY_PAGE, max - entries.length);
    const page = await scripts.read(agentId, from, count, REPLAY_PAGE_BYTES);
    entries.push(...page.entries);
    const last = page.entries.at(-1);
    if (page.complete || last === undefined) return { entries, complete: true };
    // a page cut by bytes ends the call: the caller sends it before asking for more
    if (untilCut && page.entries.length < count) return { entries, complete: false };
    from = `(${last[0]}`;
  }
  return { entries, complete: false };
}

/** Everything after `afterId` when its entry is still in the stream, else everything. */
export async function replayFrom(
  scripts: LiveScripts,
  agentId: string,
  afterId: string | undefined,
  maxBatches: number,
  paged: boolean,
) {
  if (afterId !== undefined && isMessageId(afterId)) {
    const { entryId, index } = splitMessageId(afterId);
    // one read from that entry on: if its first entry is that one, the client resumes
    const from = await entriesFrom(scripts, agentId, entryId, maxBatches + 1, paged);
    const first = from.entries[0];
    if (first?.[0] === entryId) {
      const items = messagesOf(first);
      if (index < itemCount(first)) {
        const messages = [
          // by item index, not position: items of deleted traces may be gone from the entry
          ...items.filter((m) => splitMessageId(m.id).index > index),
          ...from.entries.slice(1).flatMap(messagesOf),
        ];
        if (messages.length > 0 || from.complete)
          return { messages, resumed: true, complete: from.complete };
        // the page was that entry alone (cut by bytes) and it was all sent: go on after it
        const after = await entriesFrom(scripts, agentId, `(${entryId}`, maxBatches, paged);
        return {
          messages: after.entries.flatMap(messagesOf),
          resumed: true,
          complete: after.complete,
        };
      }
    }
  }
  const all = await entriesFrom(scripts, agentId, '-', maxBatches, paged);
  return { messages: all.entries.flatMap(messagesOf), resumed: false, complete: all.complete };
}
