import type { FastifyRequest } from 'fastify';

/** A share link's token in an address: `/shared/<token>`, as the public page is reached. */
const SHARED_PAGE_TOKEN = /(\/shared\/)[^/?#]*/g;

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
  return url.replace(SHARED_PAGE_TOKEN, '$1[token]');
}
