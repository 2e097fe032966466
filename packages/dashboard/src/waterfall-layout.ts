import type { Event } from '@flightlog/protocol';

/** One row of a run's waterfall: an event at its nesting depth, its bar as fractions of the run. */
export interface WaterfallRow {
  event: Event;
  depth: number;
  offset: number;
  width: number;
}

const endOf = (event: Event): number => {
  const start = Date.parse(event.startedAt);
  if (event.endedAt) return Date.parse(event.endedAt);
  return start + (event.durationMs ?? 0);
};

/**
 * Orders events as a tree (children under their `parentEventId`, each level by sequence) and
 * places each on the run's time axis. An event whose parent is not in the run stays at the top
 * level; a cycle of parents cannot hang it (each event is placed once).
 */
export function layoutWaterfall(events: readonly Event[]): WaterfallRow[] {
  if (events.length === 0) return [];
  const starts = events.map((e) => Date.parse(e.startedAt));
  const begin = Math.min(...starts);
  const end = Math.max(begin + 1, ...events.map(endOf));
  const span = end - begin;
  const ids = new Set(events.map((e) => e.id));
  const children = new Map<string | null, Event[]>();
  for (const event of [...events].sort((a, b) => a.sequence - b.sequence)) {
    const parent =
      event.parentEventId && ids.has(event.parentEventId) && event.parentEventId !== event.id
        ? event.parentEventId
        : null;
    const list = children.get(parent) ?? [];
    list.push(event);
    children.set(parent, list);
  }
  const rows: WaterfallRow[] = [];
  const placed = new Set<string>();
  const visit = (parent: string | null, depth: number) => {
    for (const event of children.get(parent) ?? []) {
      if (placed.has(event.id)) continue;
      placed.add(event.id);
      const start = Date.parse(event.startedAt);
      rows.push({
        event,
        depth,
        offset: (start - begin) / span,
        width: Math.max(0, (endOf(event) - start) / span),
      });
      visit(event.id, depth + 1);
    }
  };
  visit(null, 0);
  // events only reachable through a cycle of parents: shown at the top level, in sequence
  for (const event of events)
    if (!placed.has(event.id)) {
      placed.add(event.id);
      rows.push({
        event,
        depth: 0,
        offset: (Date.parse(event.startedAt) - begin) / span,
        width: 0,
      });
    }
  return rows;
}

/** What a person calls the step: the tool, the model, the MCP tool, the custom name. */
export function stepName(event: Event): string {
  const p = event.payload as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === 'string' && value ? value : undefined);
  if (event.payloadEncrypted) return `${event.type} (encrypted)`;
  switch (event.type) {
    case 'tool_call':
      return text(p.name) ?? 'tool call';
    case 'llm_call':
      return text(p.model) ?? 'model call';
    case 'mcp_call':
      return (
        [text(p.server), text(p.tool) ?? text(p.method)].filter(Boolean).join(' · ') || 'MCP call'
      );
    case 'chain_tx':
      return text(p.instruction) ?? 'transaction';
    case 'x402_payment':
      return text(p.resource) ?? 'payment';
    case 'custom':
      return text(p.name) ?? 'custom';
    default:
      return event.type;
  }
}

/**
 * The step to look at first in a failed run: the earliest failing step that is not failing only
 * because a step inside it failed (a wrapper's "child step failed" says less than its child's
 * own error).
 */
export function firstFailure(events: readonly Event[]): Event | undefined {
  const failing = events.filter((e) => e.status === 'error');
  const failingParents = new Set(failing.map((e) => e.parentEventId).filter(Boolean));
  return (
    [...failing].sort((a, b) => a.sequence - b.sequence).find((e) => !failingParents.has(e.id)) ??
    failing[0]
  );
}
