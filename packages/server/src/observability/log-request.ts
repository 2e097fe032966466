import type { FastifyRequest } from 'fastify';

/** Whatever follows `/shared/` in an address (the public page's token, or a guess at one). */
const SHARED_PAGE_TOKEN = /(\/shared\/)[^/?#]*/gi;
/** A share token wherever else it stands (a query string, another path, percent-encoded). */
const SHARE_TOKEN = /fls_[A-Za-z0-9_%-]{8,}/gi;

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

export function redactSharedPath(url: string): string {
  return url.replace(SHARED_PAGE_TOKEN, '$1[token]').replace(SHARE_TOKEN, 'fls_[token]');
}
