import { useState } from 'preact/hooks';
import { shortId } from '../format.js';

/** An id shortened, whole on hover, with a button that copies it whole. */
export function CopyId(props: { id: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <span class="copy-id">
      <code title={props.id}>{shortId(props.id)}</code>
      <button
        type="button"
        class="icon-button"
        aria-label={`Copy ${props.id}`}
        onClick={() => {
          void navigator.clipboard?.writeText(props.id).then(() => {
            setCopied(true);
            setTimeout(() => setCopied(false), 1200);
          });
        }}
      >
        {copied ? 'copied' : 'copy'}
      </button>
    </span>
  );
}
