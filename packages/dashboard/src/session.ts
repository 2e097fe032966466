/**
 * The signed-in user's identity token. It lives in this tab's sessionStorage only (gone with the
 * tab), never in a cookie, a query string or localStorage. A sign-in link carries it in the URL
 * fragment (`#token=…`), which browsers never send to a server; it is taken out of the address
 * bar at once, so it does not stay in the history or get copied along with a deep link.
 */
const KEY = 'flightlog.token';

/** True when the address carried a token (now kept, and gone from the address). */
export function takeTokenFromFragment(): boolean {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const token = fragment.get('token');
  if (!token) return false;
  sessionStorage.setItem(KEY, token);
  history.replaceState(history.state, '', location.pathname + location.search);
  return true;
}

export function currentToken(): string | null {
  return sessionStorage.getItem(KEY);
}

export function signIn(token: string): void {
  sessionStorage.setItem(KEY, token.trim());
}

export function signOut(): void {
  sessionStorage.removeItem(KEY);
}

/** The `sub` and `exp` of a JWT, read without verifying (the server verifies). */
export function tokenClaims(token: string): { sub?: string; exp?: number } {
  try {
    const part = token.split('.')[1] ?? '';
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
    const claims = JSON.parse(json) as { sub?: unknown; exp?: unknown };
    return {
      ...(typeof claims.sub === 'string' ? { sub: claims.sub } : {}),
      ...(typeof claims.exp === 'number' ? { exp: claims.exp } : {}),
    };
  } catch {
    return {};
  }
}
