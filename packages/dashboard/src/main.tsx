import { Fragment, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { onUnauthorized } from './api.js';
import { Link } from './components/link.js';
import { AgentSettingsPage } from './pages/agent-settings-page.js';
import { AgentsPage } from './pages/agents-page.js';
import { NewAgentPage } from './pages/new-agent-page.js';
import { AuthCallbackPage } from './pages/auth-callback-page.js';
import { ComparePage } from './pages/compare-page.js';
import { RunPage } from './pages/run-page.js';
import { RunsPage } from './pages/runs-page.js';
import { SignInPage } from './pages/sign-in-page.js';
import { navigate, parseRoute, useRoute } from './router.js';
import { currentToken, signOut, takeTokenFromFragment, tokenClaims } from './session.js';

function App() {
  const [token, setToken] = useState(currentToken);
  const [expired, setExpired] = useState(false);
  const route = useRoute();

  // a sign-in link followed in a tab that is already open: same document, a new fragment
  useEffect(() => {
    const onHash = () => {
      if (!takeTokenFromFragment()) return;
      setExpired(false);
      setToken(currentToken());
    };
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  useEffect(
    () =>
      onUnauthorized(() => {
        signOut();
        setExpired(true);
        setToken(null);
      }),
    [],
  );

  // a token that expires while the page is open: a clear "sign in again", not a broken page
  useEffect(() => {
    const exp = token ? tokenClaims(token).exp : undefined;
    if (exp === undefined) return undefined;
    const timer = setTimeout(
      () => {
        signOut();
        setExpired(true);
        setToken(null);
      },
      Math.max(0, Math.min(exp * 1000 - Date.now(), 2 ** 31 - 1)),
    );
    return () => clearTimeout(timer);
  }, [token]);

  // a share link's page: that one run, for anyone, signed in or not (nothing else of the
  // dashboard: no header, no agents, no sign-in)
  if (route.page === 'shared')
    return (
      <>
        <header class="top">
          <span class="brand">Flightlog</span>
        </header>
        <RunPage source={{ kind: 'shared', token: route.token }} />
      </>
    );
  // the identity provider sent the browser back: complete that sign-in first
  if (route.page === 'auth-callback')
    return (
      <AuthCallbackPage
        onSignedIn={(returnTo) => {
          setExpired(false);
          setToken(currentToken());
          navigate(returnTo, true);
        }}
      />
    );
  if (!token)
    return (
      <SignInPage
        expired={expired}
        onSignedIn={() => {
          setExpired(false);
          setToken(currentToken());
        }}
      />
    );
  const user = tokenClaims(token).sub;
  return (
    <>
      <header class="top">
        <Link href="/" class="brand">
          Flightlog
        </Link>
        <span class="spacer" />
        {user && <span class="muted">{user}</span>}
        <button
          type="button"
          class="button"
          onClick={() => {
            signOut();
            setToken(null);
          }}
        >
          Sign out
        </button>
      </header>
      {/* a new token (another sign-in link) reads every page again */}
      <Fragment key={token}>
        {route.page === 'agents' && <AgentsPage />}
        {route.page === 'new-agent' && <NewAgentPage />}
        {route.page === 'agent-settings' && <AgentSettingsPage agentId={route.agentId} />}
        {route.page === 'runs' && <RunsPage agentId={route.agentId} filters={route.filters} />}
        {route.page === 'run' && <RunPage source={{ kind: 'member', traceId: route.traceId }} />}
        {route.page === 'compare' && <ComparePage left={route.left} right={route.right} />}
        {route.page === 'not-found' && (
          <main>
            <p>No such page.</p>
            <Link href="/">Agents</Link>
          </main>
        )}
      </Fragment>
    </>
  );
}

takeTokenFromFragment();
// a shared run's page is public, and kept out of search engines (the server says so too)
if (parseRoute(new URL(location.href)).page === 'shared') {
  const robots = document.createElement('meta');
  robots.name = 'robots';
  robots.content = 'noindex, nofollow';
  document.head.append(robots);
}
render(<App />, document.getElementById('app')!);
