/**
 * Query parameters whose value is a credential by the look of their name (`api_key`, `token`,
 * `access_token`, `X-Amz-Signature`, `password`, `sig`, `session`…): their values never reach a
 * log line.
 */
const SECRET_PARAMETER = /key|token|secret|pass|pwd|auth|sig|cred|session/i;
/** A URL inside free text: a scheme, `://`, and everything up to whitespace or a quote. */
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>]+/gi;
/** Its userinfo (`user:password@`), up to the last `@` of the authority as URL parsers read it. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#\s]*@/i;
const PARAMETER = /([?&;])([^=&#;]*)=([^&#;]*)/g;

function redactUrl(url: string): string {
  return url
    .replace(USERINFO, '$1***@')
    .replace(PARAMETER, (whole, separator: string, name: string) =>
      SECRET_PARAMETER.test(name) ? `${separator}${name}=***` : whole,
    );
}

/**
 * `text` with every URL in it stripped of its credentials: the userinfo becomes `***@` and the
 * values of secret-looking query parameters `***`; the rest (scheme, host, port, path, other
 * parameters) stays, so the line still says which address it was about. Works on text that is not
 * a valid URL too (a mistyped `ingestUrl` is the likeliest one to be logged).
 */
export function redactUrls(text: string): string {
  return text.includes('://') ? text.replace(URL_IN_TEXT, redactUrl) : text;
}

/** A userinfo-like run (`user:password@`) anywhere before the query, however the address is mistyped. */
const LOOSE_USERINFO = /[^/?#\s]*@/g;

/**
 * `address` (one value that was meant to be a URL, such as a refused `ingestUrl`) stripped of
 * anything that may be a credential, however malformed it is: `admin:pw@host`, `http//u:pw@host`
 * and `http:/u:pw@host` have no `://` for {@link redactUrls} to go by, yet `new URL` reads a
 * password in the last one. Every run of characters that ends in `@` before the query becomes
 * `***@`, and secret-looking query parameters lose their values.
 */
export function redactAddress(address: string): string {
  const query = address.search(/[?#]/);
  const head = query < 0 ? address : address.slice(0, query);
  const tail = query < 0 ? '' : address.slice(query);
  return (
    head.replace(LOOSE_USERINFO, '***@') +
    tail.replace(PARAMETER, (whole, separator: string, name: string) =>
      SECRET_PARAMETER.test(name) ? `${separator}${name}=***` : whole,
    )
  );
}
