/** Durations as a person reads them: `840 ms`, `2.4 s`, `3 min`, `2 h 5 min`. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** `3 min ago`, `2 h ago`, `5 d ago`; the exact time goes in a title beside it. */
export function formatRelative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  if (!Number.isFinite(seconds)) return iso;
  if (seconds < 5) return 'just now';
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

export const exactTime = (iso: string | null | undefined): string =>
  iso ? new Date(iso).toLocaleString(undefined, { hour12: false }) : '';

/**
 * A decimal string (`totalCostUsd`, `totalLamports`) grouped by thousands, from its digits:
 * never through a float, so lamports stay exact however large.
 */
export function formatDecimal(value: string | null | undefined): string {
  if (value === null || value === undefined || value === '') return '—';
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(value);
  if (!match) return value;
  const [, sign, whole = '0', fraction] = match;
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${grouped}${fraction ? `.${fraction}` : ''}`;
}

/** USD from its decimal string: `$0.0042`, `$12.50`; exact digits kept (at most 6 shown). */
export function formatUsd(value: string | null | undefined): string {
  if (!value) return '—';
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(value);
  if (!match) return value;
  const [, sign, whole = '0', fraction = ''] = match;
  const shown = fraction.replace(/0+$/, '').slice(0, 6).padEnd(2, '0');
  return `${sign}$${formatDecimal(whole)}.${shown}`;
}

/** An id shortened for a table (the whole one goes in a title and the copy button). */
export const shortId = (id: string): string =>
  id.length > 12 ? `${id.slice(0, 6)}…${id.slice(-4)}` : id;

/** `1 event`, `2 events`, `10,000 tokens`: a count with its noun in the number it takes. */
export function formatCount(count: number, noun: string, plural = `${noun}s`): string {
  return `${count.toLocaleString()} ${count === 1 ? noun : plural}`;
}
