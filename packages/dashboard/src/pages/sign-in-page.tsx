import { useState } from 'preact/hooks';
import { issuerHost, loadSignInConfig, startOidcSignIn } from '../oidc-sign-in.js';
import { signIn } from '../session.js';
import { useAsync } from '../use-async.js';

export function SignInPage(props: { expired: boolean; onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [leaving, setLeaving] = useState(false);
  const [failure, setFailure] = useState<string | null>(null);
  const config = useAsync((signal) => loadSignInConfig(signal), []);
  const oidc = config.state === 'done' && config.value.signIn === 'oidc' ? config.value : null;
  return (
    <main class="sign-in">
      <h1>Sign in to Flightlog</h1>
      {props.expired && (
        <p class="banner warning" role="alert">
          Your session has ended (the token expired or was refused). Sign in again.
        </p>
      )}
      {oidc && (
        <section class="sign-in-provider" aria-label="Identity provider">
          <button
            type="button"
            class="button primary"
            disabled={leaving}
            onClick={() => {
              setLeaving(true);
              setFailure(null);
              // back to this very page (a deep link) once signed in
              startOidcSignIn(oidc, location.pathname + location.search).catch((error: unknown) => {
                setLeaving(false);
                setFailure(error instanceof Error ? error.message : String(error));
              });
            }}
          >
            Sign in with {issuerHost(oidc)}
          </button>
          {failure && (
            <p class="banner warning" role="alert">
              {failure}
            </p>
          )}
        </section>
      )}
      <p>
        {oidc ? 'Or paste' : 'Paste'} your identity token, or open the sign-in link that{' '}
        <code>flightlog dashboard-link --user YOUR_ID</code> prints.
      </p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (!token.trim()) return;
          signIn(token);
          props.onSignedIn();
        }}
      >
        <label for="token">Identity token (JWT)</label>
        <textarea
          id="token"
          rows={4}
          spellcheck={false}
          autocomplete="off"
          value={token}
          onInput={(event) => setToken((event.target as HTMLTextAreaElement).value)}
        />
        <button type="submit" class={oidc ? 'button' : 'button primary'}>
          Sign in
        </button>
      </form>
      <p class="muted small">
        The token stays in this browser tab; it is sent only to this server.
      </p>
    </main>
  );
}
