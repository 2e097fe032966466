import { useState } from 'preact/hooks';
import { signIn } from '../session.js';

export function SignInPage(props: { expired: boolean; onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  return (
    <main class="sign-in">
      <h1>Sign in to Flightlog</h1>
      {props.expired && (
        <p class="banner warning" role="alert">
          Your session has ended (the token expired or was refused). Sign in again.
        </p>
      )}
      <p>
        Paste your identity token, or open the sign-in link that{' '}
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
        <button type="submit" class="button primary">
          Sign in
        </button>
      </form>
      <p class="muted small">
        The token stays in this browser tab; it is sent only to this server.
      </p>
    </main>
  );
}
