import type { Trace } from '@flightlog/protocol';
import { useEffect, useRef, useState } from 'preact/hooks';
import { agentPath, navigate, type RunFilters } from '../router.js';

const STATUSES = ['running', 'completed', 'errored', 'timeout'];
const SEARCH_DELAY_MS = 300;

/** Whether a run the live stream brings belongs in a list narrowed by `filters` (as the API does). */
export function matches(trace: Trace, filters: RunFilters): boolean {
  if (filters.status && trace.status !== filters.status) return false;
  if (filters.tag && !trace.tags.includes(filters.tag)) return false;
  if (filters.from && trace.startedAt < new Date(filters.from).toISOString()) return false;
  if (filters.to && trace.startedAt >= new Date(filters.to).toISOString()) return false;
  if (filters.q) {
    const needle = filters.q.toLocaleLowerCase();
    const haystack = [trace.inputSummary, trace.outputSummary, trace.errorMessage];
    if (!haystack.some((text) => text?.toLocaleLowerCase().includes(needle))) return false;
  }
  return true;
}

/** An ISO instant as a `datetime-local` value (the user's time zone), and back. */
const toLocalInput = (iso: string) => {
  if (!iso) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const fromLocalInput = (value: string) => (value ? new Date(value).toISOString() : '');

/**
 * The runs list's filters: status, tag, start time and a text search over summaries and errors.
 * Each change goes into the address (a deep link); the search waits for a pause in typing.
 * `/` focuses the search box.
 */
export function FilterBar(props: { agentId: string; filters: RunFilters }) {
  const { agentId, filters } = props;
  const [q, setQ] = useState(filters.q);
  const [tag, setTag] = useState(filters.tag);
  const search = useRef<HTMLInputElement>(null);
  const apply = (change: Partial<RunFilters>, replace = false) =>
    navigate(agentPath(agentId, { ...filters, ...change }), replace);

  useEffect(() => setQ(filters.q), [filters.q]);
  useEffect(() => setTag(filters.tag), [filters.tag]);
  useEffect(() => {
    if (q === filters.q) return undefined;
    const timer = setTimeout(() => apply({ q }, true), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [q]);
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      if (event.key !== '/' || target?.closest('input, textarea, select')) return;
      event.preventDefault();
      search.current?.focus();
    };
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);

  return (
    <form class="filters" role="search" onSubmit={(event) => event.preventDefault()}>
      <label>
        Search{' '}
        <input
          ref={search}
          type="search"
          placeholder="summaries and errors  ( / )"
          maxLength={200}
          value={q}
          onInput={(event) => setQ((event.target as HTMLInputElement).value)}
        />
      </label>
      <label>
        Status{' '}
        <select
          value={filters.status}
          onChange={(event) => apply({ status: (event.target as HTMLSelectElement).value })}
        >
          <option value="">all</option>
          {STATUSES.map((s) => (
            <option value={s} key={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Tag{' '}
        <input
          type="text"
          size={10}
          value={tag}
          onInput={(event) => setTag((event.target as HTMLInputElement).value)}
          onChange={() => apply({ tag: tag.trim() })}
        />
      </label>
      <TimeInput label="From" value={filters.from} onChange={(from) => apply({ from })} />
      <TimeInput label="To" value={filters.to} onChange={(to) => apply({ to })} />
      {(filters.status || filters.tag || filters.from || filters.to || filters.q) && (
        <button type="button" class="button" onClick={() => navigate(agentPath(agentId))}>
          Clear filters
        </button>
      )}
    </form>
  );
}

/** A start-time bound, shown in the user's time zone and kept as an ISO instant. */
function TimeInput(props: { label: string; value: string; onChange: (iso: string) => void }) {
  return (
    <label>
      {props.label}{' '}
      <input
        type="datetime-local"
        value={toLocalInput(props.value)}
        onChange={(event) =>
          props.onChange(fromLocalInput((event.target as HTMLInputElement).value))
        }
      />
    </label>
  );
}
