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
