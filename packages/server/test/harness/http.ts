import { gzipSync } from 'node:zlib';

export interface HttpResult {
  status: number;
  headers: Headers;
  /** Parsed JSON body, or the raw text when it is not JSON, or undefined when empty. */
  body: any;
  text: string;
}

export interface SendOptions {
  method?: string;
  token?: string;
  headers?: Record<string, string>;
  /** Gzip the JSON body and send Content-Encoding: gzip. */
  gzip?: boolean;
  /** The client's deadline for the whole exchange, in ms: past it the request fails. */
  timeoutMs?: number;
}

/** Sends a request over a real socket and reads the whole answer. */
export async function send(
  baseUrl: string,
  path: string,
  body?: unknown,
  options: SendOptions = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let payload: RequestInit['body'];
  if (body !== undefined) {
    headers['content-type'] ??= 'application/json';
    const raw = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    if (options.gzip) {
      payload = gzipSync(raw);
      headers['content-encoding'] = 'gzip';
    } else payload = raw as RequestInit['body'];
  }
  const response = await fetch(baseUrl + path, {
    method: options.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    ...(payload === undefined ? {} : { body: payload }),
    ...(options.timeoutMs === undefined ? {} : { signal: AbortSignal.timeout(options.timeoutMs) }),
  });
  const text = await response.text();
  let parsed: unknown = undefined;
  if (text.length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** POST /v1/traces/batch with an agent key. */
export function postBatch(
  baseUrl: string,
  apiKey: string,
  batch: unknown,
  options: SendOptions = {},
) {
  return send(baseUrl, '/v1/traces/batch', batch, { ...options, token: apiKey });
}

/** Asserts nothing; returns whether a response is an RFC 9457 problem of `status`. */
export function isProblem(result: HttpResult, status: number): boolean {
  return (
    result.status === status &&
    (result.headers.get('content-type') ?? '').startsWith('application/problem+json') &&
    typeof result.body === 'object' &&
    result.body !== null &&
    result.body.status === status &&
    typeof result.body.type === 'string' &&
    typeof result.body.title === 'string' &&
    typeof result.body.detail === 'string'
  );
}
