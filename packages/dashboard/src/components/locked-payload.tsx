import { useEffect, useState } from 'preact/hooks';
import {
  payloadKeyVersion,
  onPayloadKeyChange,
  openPayload,
  setPayloadKey,
  type OpenOutcome,
} from '../payload-key.js';
import { JsonView } from './json-view.js';

/** An encrypted payload: locked, until the user gives the key (which never leaves the page). */
export function LockedPayload(props: { envelope: unknown }) {
  const [outcome, setOutcome] = useState<OpenOutcome | null>(null);
  const [keyText, setKeyText] = useState('');
  const [keyError, setKeyError] = useState<string | null>(null);
  const [, setVersion] = useState(0);

  useEffect(() => onPayloadKeyChange(() => setVersion((v) => v + 1)), []);
  const version = payloadKeyVersion();
  useEffect(() => {
    let current = true;
    setOutcome(null);
    if (version > 0)
      void openPayload(props.envelope).then((result) => current && setOutcome(result));
    return () => {
      current = false;
    };
  }, [props.envelope, version]);

  if (outcome?.kind === 'opened')
    return <JsonView label="payload (opened in this browser)" value={outcome.payload} />;
  return (
    <div class="locked">
      <p>
        <span aria-hidden="true">🔒</span> Encrypted payload: the server never saw it in clear.
        {outcome?.kind === 'locked' && outcome.reason === 'wrong-key' && (
          <strong class="error-text"> This key does not open it.</strong>
        )}
      </p>
      <form
        class="key-form"
        onSubmit={(event) => {
          event.preventDefault();
          void setPayloadKey(keyText).then((error) => {
            setKeyError(error);
            if (!error) setKeyText('');
          });
        }}
      >
        <label for="payload-key">Payload key (base64; used in this browser only, never sent)</label>
        <input
          id="payload-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={keyText}
          onInput={(event) => setKeyText((event.target as HTMLInputElement).value)}
        />
        <button type="submit" class="button">
          Open
        </button>
        {keyError && <span class="error-text">{keyError}</span>}
      </form>
    </div>
  );
}
