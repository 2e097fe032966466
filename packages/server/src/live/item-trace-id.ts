const PREFIX = '{"trace":{';

/**
 * The trace id of one live message's data (the JSON of a BufferBatchItem), without parsing its
 * events: every writer (ingest's itemDocument, the complete endpoint, the sweeper, a rebuilt
 * replay) puts the trace first, so only that object is read, however many megabytes of events
 * follow. Anything else is parsed whole. Undefined when the data holds no trace id.
 */
export function itemTraceId(data: string): string | undefined {
  const leading = leadingTraceId(data);
  if (leading !== undefined) return leading;
  try {
    const item = JSON.parse(data) as { trace?: { id?: unknown } } | null;
    return typeof item?.trace?.id === 'string' ? item.trace.id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The trace id of data that starts with its trace, read from `head`, any leading part of the
 * data (cut anywhere, even inside a character); undefined when the head does not hold the whole
 * trace object (then the whole data must be read).
 */
export function leadingTraceId(head: string): string | undefined {
  if (!head.startsWith(PREFIX)) return undefined;
  const end = objectEnd(head, PREFIX.length - 1);
  return end > 0 ? idOf(head.slice(PREFIX.length - 1, end)) : undefined;
}

function idOf(json: string): string | undefined {
  try {
    const trace = JSON.parse(json) as { id?: unknown } | null;
    return typeof trace?.id === 'string' ? trace.id : undefined;
  } catch {
    return undefined;
  }
}

/** The index just past the JSON object opening at `start` (0 when it does not close). */
function objectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return 0;
}
