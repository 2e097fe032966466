import { exactTime, formatRelative } from '../format.js';

export function TimeAgo(props: { iso: string | null | undefined }) {
  if (!props.iso) return <span class="muted">—</span>;
  return (
    <time dateTime={props.iso} title={exactTime(props.iso)}>
      {formatRelative(props.iso)}
    </time>
  );
}
