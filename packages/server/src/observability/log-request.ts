import type { FastifyRequest } from 'fastify';

/** Whatever follows a leading `/shared/` (the public page's token, or a guess at one). */
const SHARED_PAGE_TOKEN = /^(\/+shared\/)[^/?#]*/i;
/** A share token wherever else it stands (a query string, another path). */
const SHARE_TOKEN = /fls_[A-Za-z0-9_-]{8,}/gi;
/** Percent-encoding undone at most this often (a token encoded twice is still one). */
const DECODINGS = 3;

/** What a request log line says of its request. */
export interface LoggedRequest {
  [field: string]: unknown;
  method: string;
  url: string;
  remoteAddress: string | undefined;
}

/**
 * The request as logged: method, address and client, with a share token in the address
 * replaced, so that no log holds a key to a shared run (the token's other way in, the
 * `Authorization` header, is never logged).
 */
export function serializeRequest(request: FastifyRequest): LoggedRequest {
  return {
    method: request.method,
    url: redactSharedPath(request.url),
    remoteAddress: request.ip,
  };
}

/**
 * The address with share tokens replaced. The tokens are looked for in the address as the
 * server reads it (percent-encoding undone: `/%73hared/%66ls_…` is the public page too); an
 * address with none is logged exactly as sent, one with some in its decoded form, redacted.
 */
export function redactSharedPath(url: string): string {
  let decoded = url;
  for (let i = 0; i < DECODINGS; i++) {
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      break;
    }
    if (next === decoded) break;
    decoded = next;
  }
  const redacted = decoded
    .replace(SHARED_PAGE_TOKEN, '$1[token]')
    .replace(SHARE_TOKEN, 'fls_[token]');
  return redacted === decoded ? url : redacted;
}
