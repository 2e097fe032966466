import { useState } from 'preact/hooks';

/**
 * A value to copy whole (a key, a token, a snippet): shown as text, never as markup, with a
 * button that copies it and says so.
 */
export function SecretValue(props: { label: string; value: string; multiline?: boolean }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="secret-value">
      <div class="secret-label">{props.label}</div>
      <div class="secret-row">
        {props.multiline ? (
          <pre class="secret-text" aria-label={props.label}>
            {props.value}
          </pre>
        ) : (
          <code class="secret-text" aria-label={props.label}>
            {props.value}
          </code>
        )}
        <button
          type="button"
          class="button"
          aria-label={`Copy ${props.label}`}
          onClick={() => {
            void navigator.clipboard?.writeText(props.value).then(() => {
              setCopied(true);
              setTimeout(() => setCopied(false), 1500);
            });
          }}
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
    </div>
  );
}
