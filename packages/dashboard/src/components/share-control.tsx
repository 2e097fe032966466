import { useState } from 'preact/hooks';
import { ApiError, shareRun, unshareRun } from '../api.js';

/** The public address of a shared run, on this dashboard's origin. */
export const sharedRunUrl = (shareToken: string) =>
  `${location.origin}/shared/${encodeURIComponent(shareToken)}`;

/**
 * Sharing a run from its page: a button that makes its public link, then the link to copy and
 * a button that ends it. Owners and editors may; a viewer is told so by the API's refusal.
 */
export function ShareControl(props: {
  traceId: string;
  shareToken: string | null;
  onChange: (shareToken: string | null) => void;
}) {
  const { traceId, shareToken, onChange } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);
  const act = (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    work()
      .catch((e: unknown) =>
        setError(
          e instanceof ApiError && e.status === 403
            ? 'Only owners and editors of this agent share its runs.'
            : `Could not change the link: ${e instanceof Error ? e.message : String(e)}`,
        ),
      )
      .finally(() => setBusy(false));
  };
  return (
    <span class="share-control">
      {shareToken === null ? (
        <button
          type="button"
          class="button"
          disabled={busy}
          onClick={() =>
            act(async () => {
              const link = await shareRun(traceId);
              onChange(link.shareToken);
            })
          }
        >
          Share
        </button>
      ) : (
        <>
          <input
            class="share-url"
            aria-label="Public link of this run"
            readOnly
            value={sharedRunUrl(shareToken)}
            onFocus={(event) => event.currentTarget.select()}
          />
          <button
            type="button"
            class="button"
            onClick={() => {
              void navigator.clipboard?.writeText(sharedRunUrl(shareToken)).then(() => {
                setCopied(true);
                setTimeout(() => setCopied(false), 1200);
              });
            }}
          >
            {copied ? 'Copied' : 'Copy link'}
          </button>
          <button
            type="button"
            class="button danger"
            disabled={busy}
            onClick={() =>
              act(async () => {
                await unshareRun(traceId);
                onChange(null);
              })
            }
          >
            Stop sharing
          </button>
        </>
      )}
      {error && (
        <span class="error-text" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}
