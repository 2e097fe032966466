/**
 * A payload as indented JSON text, collapsible. Agent-written data is only ever text here: it is
 * put in the page as a text node, never interpreted as HTML.
 */
export function JsonView(props: { value: unknown; open?: boolean; label?: string }) {
  const text = JSON.stringify(props.value, null, 2) ?? 'undefined';
  return (
    <details class="json" open={props.open ?? text.length < 600}>
      <summary>
        {props.label ?? 'payload'} <span class="muted">({text.length.toLocaleString()} chars)</span>
      </summary>
      <pre>{text}</pre>
    </details>
  );
}
