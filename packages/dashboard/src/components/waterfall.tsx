import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { formatDuration } from '../format.js';
import { stepName, type WaterfallRow } from '../waterfall-layout.js';

/** Every row is this tall: a run of 10,000 steps is a scroll height, not 10,000 elements. */
const ROW_PX = 28;
const OVERSCAN = 12;

/**
 * A run's steps as a timeline, one row per event: its nesting, its name, its bar on the run's
 * time axis, its duration. Only the rows in view (and a few around them) are in the page, so a
 * run of any size opens and scrolls as fast as a small one.
 */
export function Waterfall(props: {
  rows: WaterfallRow[];
  selected: string | null;
  onSelect: (eventId: string) => void;
}) {
  const { rows, selected, onSelect } = props;
  const box = useRef<HTMLOListElement>(null);
  const [view, setView] = useState({ top: 0, height: 600 });

  useLayoutEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const measure = () => setView({ top: element.scrollTop, height: element.clientHeight || 600 });
    measure();
    element.addEventListener('scroll', measure, { passive: true });
    addEventListener('resize', measure);
    return () => {
      element.removeEventListener('scroll', measure);
      removeEventListener('resize', measure);
    };
  }, []);

  // the selected step is brought into view (a failed run opens at its first failure)
  useEffect(() => {
    const element = box.current;
    const index = rows.findIndex((row) => row.event.id === selected);
    if (!element || index < 0) return;
    const top = index * ROW_PX;
    if (top < element.scrollTop || top + ROW_PX > element.scrollTop + element.clientHeight)
      element.scrollTop = Math.max(0, top - element.clientHeight / 3);
  }, [selected, rows]);

  const first = Math.max(0, Math.floor(view.top / ROW_PX) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((view.top + view.height) / ROW_PX) + OVERSCAN);
  const shown = rows.slice(first, last);

  const move = (by: number) => {
    const index = rows.findIndex((row) => row.event.id === selected);
    const next = rows[Math.min(rows.length - 1, Math.max(0, index + by))];
    if (next) onSelect(next.event.id);
  };

  return (
    <ol
      ref={box}
      class="waterfall"
      aria-label="Steps of the run"
      data-rows={rows.length}
      tabIndex={0}
      onKeyDown={(event) => {
        if (event.key === 'ArrowDown' || event.key === 'j') move(1);
        else if (event.key === 'ArrowUp' || event.key === 'k') move(-1);
        else return;
        event.preventDefault();
      }}
    >
      <li aria-hidden="true" class="spacer-row" style={{ height: `${first * ROW_PX}px` }} />
      {shown.map((row) => (
        <li
          key={row.event.id}
          id={`step-${row.event.id}`}
          data-event-id={row.event.id}
          data-depth={row.depth}
          class={`step ${row.event.status === 'error' ? 'step-error' : ''} ${row.event.id === selected ? 'selected' : ''}`}
        >
          <button
            type="button"
            class="step-button"
            tabIndex={-1}
            onClick={() => onSelect(row.event.id)}
          >
            <span class="step-label" style={{ paddingLeft: `${Math.min(row.depth, 20) * 16}px` }}>
              {row.event.status === 'error' && <span aria-label="failed">✕ </span>}
              <span class={`type type-${row.event.type}`}>{row.event.type}</span>{' '}
              {stepName(row.event)}
            </span>
            <span class="step-track">
              <span
                class="step-bar"
                style={{
                  left: `${(row.offset * 100).toFixed(3)}%`,
                  width: `max(2px, ${(row.width * 100).toFixed(3)}%)`,
                }}
              />
            </span>
            <span class="step-duration num">{formatDuration(row.event.durationMs)}</span>
          </button>
        </li>
      ))}
      <li
        aria-hidden="true"
        class="spacer-row"
        style={{ height: `${(rows.length - last) * ROW_PX}px` }}
      />
    </ol>
  );
}
