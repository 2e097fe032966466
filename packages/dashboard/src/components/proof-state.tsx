import type { Event, Trace } from '@flightlog/protocol';
import { useEffect, useState } from 'preact/hooks';
import { loadSignInConfig } from '../oidc-sign-in.js';
import { safeHref } from './markdown-view.js';

/*
 * A run's proof: whether its fingerprint (traceHash) is on chain yet, where, and the run with its
 * proof to download — the file `flightlog verify` checks anywhere, against the chain.
 */

/**
 * Where and by whom runs are anchored, asked once per page load: null when anchoring is off.
 */
let anchoring: Promise<{ cluster: string; address: string } | null> | undefined;
const anchoringOf = () => {
  anchoring ??= loadSignInConfig().then((config) => config.anchoring ?? null);
  // unknown is not "off": a failed read is asked again by the next page
  anchoring.catch(() => (anchoring = undefined));
  return anchoring;
};

const FINISHED = ['completed', 'errored'];

/** The run and its events as the read API gives them, events by sequence then id: verify's input. */
function downloadRun(trace: Trace, events: Event[]): void {
  const ordered = [...events].sort((a, b) =>
    a.sequence !== b.sequence ? a.sequence - b.sequence : a.id < b.id ? -1 : a.id > b.id ? 1 : 0,
  );
  // the file is made to be handed on: it carries no share link (not part of the fingerprint)
  const run = { trace: { ...trace, shareToken: null }, events: ordered };
  const blob = new Blob([JSON.stringify(run, null, 2)], {
    type: 'application/json',
  });
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = proofFileName(trace.id);
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 1_000);
}

export const proofFileName = (traceId: string) => `flightlog-run-${traceId}.json`;

/** The explorer's page of a transaction on `cluster`. */
export const explorerTxUrl = (signature: string, cluster: string) =>
  safeHref(
    `https://explorer.solana.com/tx/${encodeURIComponent(signature)}${cluster === 'mainnet' ? '' : `?cluster=${encodeURIComponent(cluster)}`}`,
  );

export function ProofState(props: { trace: Trace; events: Event[]; complete: boolean }) {
  const { trace, events, complete } = props;
  const [cluster, setCluster] = useState<string | null | undefined>(undefined);
  const [signer, setSigner] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    anchoringOf().then(
      (found) => {
        if (!live) return;
        setCluster(found?.cluster ?? null);
        setSigner(found?.address ?? null);
      },
      () => {}, // stays unknown: the state says pending, not off
    );
    return () => {
      live = false;
    };
  }, []);

  const finished = FINISHED.includes(trace.status);
  const anchored = Boolean(trace.anchorSignature);
  let state: string;
  let detail: string;
  if (!finished) {
    state = 'Not finished';
    detail = 'A run is fingerprinted, then anchored on chain, once it has finished.';
  } else if (!trace.traceHash) {
    state = 'Fingerprint pending';
    detail = 'The run is fingerprinted with its autopsy, in a moment.';
  } else if (anchored) {
    state = 'Anchored';
    detail = `Its fingerprint is in a tree whose root went on chain at slot ${trace.anchorSlot ?? '?'}.`;
  } else if (cluster === undefined) {
    // where the server anchors is not known (yet): say only what the run shows
    state = 'Fingerprinted';
    detail = 'Not anchored yet.';
  } else if (cluster === null) {
    state = 'Fingerprinted';
    detail = 'Not anchored: anchoring is off on this server.';
  } else {
    state = 'Pending';
    detail = `Fingerprinted; waiting for the next tree to go on chain (${cluster}).`;
  }
  const explorer =
    anchored && trace.anchorSignature && cluster
      ? explorerTxUrl(trace.anchorSignature, cluster)
      : undefined;
  const verifyCommand =
    `flightlog verify ${proofFileName(trace.id)}` +
    (anchored && cluster ? ` --cluster ${cluster}${signer ? ` --signer ${signer}` : ''}` : '');
  return (
    <section class="proof" aria-label="Proof">
      <h2>
        Proof <span class={`proof-state proof-${state.split(' ')[0]?.toLowerCase()}`}>{state}</span>
      </h2>
      <p class="muted">{detail}</p>
      {trace.traceHash && (
        <dl class="proof-facts">
          <dt>traceHash</dt>
          <dd>
            <code>{trace.traceHash}</code>
          </dd>
          {anchored && (
            <>
              <dt>Transaction</dt>
              <dd>
                {explorer ? (
                  <a href={explorer} target="_blank" rel="noopener noreferrer">
                    <code>{trace.anchorSignature}</code>
                  </a>
                ) : (
                  <code>{trace.anchorSignature}</code>
                )}
              </dd>
              {signer && (
                <>
                  <dt>Signed by</dt>
                  <dd>
                    <code>{signer}</code>
                  </dd>
                </>
              )}
            </>
          )}
        </dl>
      )}
      {trace.traceHash && (
        <p class="proof-actions">
          <button
            type="button"
            class="button"
            // a file without every event would not give its traceHash
            disabled={!complete}
            title={complete ? undefined : 'Loading the run’s events…'}
            onClick={() => downloadRun(trace, events)}
          >
            {anchored ? 'Download run and proof' : 'Download run'}
          </button>{' '}
          <span class="muted small">
            check it anywhere: <code>{verifyCommand}</code>
          </span>
        </p>
      )}
    </section>
  );
}
