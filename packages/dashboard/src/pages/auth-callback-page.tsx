import { useEffect, useState } from 'preact/hooks';
import { finishOidcSignIn, loadSignInConfig, takeCallbackAnswer } from '../oidc-sign-in.js';

/** Where the identity provider sends the browser back: completes the sign-in, or says why not. */
export function AuthCallbackPage(props: { onSignedIn: (returnTo: string) => void }) {
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    const answer = takeCallbackAnswer();
    loadSignInConfig()
      .then((config) => finishOidcSignIn(config, answer))
      .then(
        (returnTo) => !cancelled && props.onSignedIn(returnTo),
        (error: unknown) =>
          !cancelled && setFailure(error instanceof Error ? error.message : String(error)),
      );
    return () => {
      cancelled = true;
    };
  }, []);
  return (
    <main class="sign-in">
      <h1>Sign in to Flightlog</h1>
      {failure === null ? (
        <p aria-live="polite">Signing you in…</p>
      ) : (
        <>
          <p class="banner warning" role="alert">
            Sign-in failed. {failure}
          </p>
          <a class="button primary" href="/">
            Sign in again
          </a>
        </>
      )}
    </main>
  );
}
