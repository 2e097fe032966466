/** Status by colour, icon and word together: never by colour alone. */
const LOOK: Record<string, { icon: string; label: string }> = {
  running: { icon: '●', label: 'running' },
  completed: { icon: '✓', label: 'completed' },
  errored: { icon: '✕', label: 'errored' },
  timeout: { icon: '◷', label: 'timeout' },
  ok: { icon: '✓', label: 'ok' },
  error: { icon: '✕', label: 'error' },
};

export function StatusBadge(props: { status: string }) {
  const look = LOOK[props.status] ?? { icon: '?', label: props.status };
  return (
    <span class={`status status-${props.status in LOOK ? props.status : 'unknown'}`}>
      <span aria-hidden="true">{look.icon}</span> {look.label}
    </span>
  );
}
