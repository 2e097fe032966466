import http from 'node:http';
import https from 'node:https';
import { redactUrls } from './redact.js';
import { parseRetryAfter } from './retry-policy.js';
import { timerDelay } from './timer-delay.js';

/** Problem bodies are small; a wrong `ingestUrl` may answer with anything, so reads are capped. */
const MAX_ERROR_BODY = 16 * 1024;

/** How a request ended. Never an exception: I/O outcomes are values. */
export type TransportOutcome =
  | {
      kind: 'ok';
      status: number;
      /** `Idempotent-Replayed: true`: the service had this batch already. */
      replayed: boolean;
      /** `Flightlog-Verify` header, when the service looked at a verify token. */
      verify: string | null;
    }
  | { kind: 'retryable'; reason: string; retryAfterMs?: number }
  | {
      kind: 'failed';
      status: number;
      detail: string;
      /**
       * The problem body's field errors (RFC 9457 `errors`), each naming a JSON pointer into the
       * request body (`/items/3/trace/id`); empty when the answer had none.
       */
      fieldErrors?: FieldError[];
    };

/** One entry of a problem body's `errors`: which part of the request, and what is wrong. */
export interface FieldError {
  pointer: string;
  detail: string;
}

/**
 * Sends requests to the ingest service, one attempt per call (the client retries `retryable`
 * outcomes itself). Implemented over HTTP; tests may substitute one. A call never throws or
 * rejects, ends soon after `signal` aborts, and should not keep the process alive by itself.
 */
export interface Transport {
  /** POST /v1/traces/batch with an already gzip-compressed JSON body. */
  sendBatch(body: Buffer, signal: AbortSignal): Promise<TransportOutcome>;
  /** POST /v1/traces/:id/complete with a JSON body. */
  complete(traceId: string, body: object, signal: AbortSignal): Promise<TransportOutcome>;
  /** Releases connections once the client is closed. */
  close?(): void;
}

/**
 * Where and how the HTTP transport sends. The client builds it from its settings; build one
 * yourself only to wrap the default transport (to observe every outcome, say) and pass the
 * wrapper as `ClientDependencies.transport`.
 */
export interface HttpTransportOptions {
  /** The service's base address, as the `ingestUrl` setting. */
  ingestUrl: string;
  /** Sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Deadline of each request, in ms; a request past it is `retryable`. */
  timeoutMs: number;
  /** The `User-Agent` header. */
  userAgent: string;
}

/** The field errors of an RFC 9457 problem body (at most 1,000), or none. */
function problemFieldErrors(text: string): FieldError[] {
  try {
    const problem = JSON.parse(text) as { errors?: unknown };
    if (!Array.isArray(problem.errors)) return [];
    const out: FieldError[] = [];
    for (const entry of problem.errors.slice(0, 1_000) as unknown[]) {
      if (typeof entry !== 'object' || entry === null) continue;
      const { pointer, detail } = entry as { pointer?: unknown; detail?: unknown };
      if (typeof pointer === 'string')
        out.push({ pointer, detail: typeof detail === 'string' ? detail : '' });
    }
    return out;
  } catch {
    return [];
  }
}

/** The `detail` of an RFC 9457 problem body (and its first field error), or the raw text. */
function problemDetail(text: string, status: number): string {
  try {
    const problem = JSON.parse(text) as { detail?: unknown; errors?: unknown };
    if (typeof problem.detail === 'string') {
      const first = Array.isArray(problem.errors) ? (problem.errors[0] as unknown) : undefined;
      const field =
        typeof first === 'object' && first !== null
          ? (first as { pointer?: unknown; detail?: unknown })
          : undefined;
      return typeof field?.pointer === 'string' && typeof field.detail === 'string'
        ? `${problem.detail} (${field.pointer}: ${field.detail})`
        : problem.detail;
    }
  } catch {
    // not a problem body
  }
  const trimmed = text.trim().slice(0, 200);
  return trimmed === '' ? `HTTP ${status}` : trimmed;
}

/** Statuses worth trying again with the same request: the service or a proxy was busy or down. */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * The client's HTTP transport over `node:http`/`node:https`, on a keep-alive agent of its own.
 * Not `fetch`: undici's fetch spends 1-2 ms of the event loop building each request on a small
 * core (WHATWG Request, Headers and streams), a stall on every flush; a plain request costs a
 * fraction of that. Its sockets never keep the process alive, idle (Node unrefs those) or busy
 * (unref'd here): a request to a service that never answers must not hold a host that has
 * finished, and whoever waits on the host's behalf (an awaited call, the exit flush) holds the
 * process with a timer of its own, for as long as it promised. Each request has its own deadline
 * (an unref'd timer) and can be aborted by the caller. Redirects are not followed: a POST
 * redirected to GET would be lost silently.
 */
export class HttpTransport implements Transport {
  private readonly base: URL;
  /** The host to connect to: an IPv6 literal without the brackets the URL writes it with. */
  private readonly hostname: string;
  private readonly agent: http.Agent;

  constructor(private readonly options: HttpTransportOptions) {
    this.base = new URL(options.ingestUrl);
    // `new URL('http://[::1]:8080').hostname` is `[::1]`; given that, Node looks the name up in
    // DNS and fails with ENOTFOUND (the Host header gets its brackets back from Node).
    this.hostname = this.base.hostname.replace(/^\[(.*)\]$/, '$1');
    const agentOptions = { keepAlive: true, maxSockets: 2, timeout: 30_000 };
    this.agent =
      this.base.protocol === 'https:'
        ? new https.Agent(agentOptions)
        : new http.Agent(agentOptions);
  }

  sendBatch(body: Buffer, signal: AbortSignal): Promise<TransportOutcome> {
    return this.post('/v1/traces/batch', body, { 'content-encoding': 'gzip' }, signal);
  }

  close(): void {
    this.agent.destroy();
  }

  complete(traceId: string, body: object, signal: AbortSignal): Promise<TransportOutcome> {
    return this.post(
      `/v1/traces/${encodeURIComponent(traceId)}/complete`,
      Buffer.from(JSON.stringify(body), 'utf8'),
      {},
      signal,
    );
  }

  private post(
    path: string,
    body: Buffer,
    headers: Record<string, string>,
    signal: AbortSignal,
  ): Promise<TransportOutcome> {
    if (signal.aborted) return Promise.resolve({ kind: 'retryable', reason: 'aborted' });
    return new Promise<TransportOutcome>((resolve) => {
      let settled = false;
      const finish = (outcome: TransportOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const request = (this.base.protocol === 'https:' ? https : http).request({
        protocol: this.base.protocol,
        hostname: this.hostname,
        port: this.base.port,
        path: this.base.pathname.replace(/\/$/, '') + path,
        method: 'POST',
        agent: this.agent,
        headers: {
          authorization: `Bearer ${this.options.apiKey}`,
          'content-type': 'application/json',
          'content-length': String(body.byteLength),
          'user-agent': this.options.userAgent,
          ...headers,
        },
      });
      const timer = setTimeout(() => {
        request.destroy();
        finish({ kind: 'retryable', reason: `no answer within ${this.options.timeoutMs} ms` });
      }, timerDelay(this.options.timeoutMs));
      timer.unref();
      const onAbort = () => {
        request.destroy();
        finish({ kind: 'retryable', reason: 'aborted' });
      };
      signal.addEventListener('abort', onAbort, { once: true });
      // After the agent's own ref() of a reused socket (it runs before this event).
      request.on('socket', (socket) => socket.unref());
      request.on('error', (error) => finish({ kind: 'retryable', reason: networkReason(error) }));
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          // read everything (so the socket can be reused), keep at most MAX_ERROR_BODY
          if (size < MAX_ERROR_BODY) chunks.push(chunk);
          size += chunk.byteLength;
        });
        response.on('error', (error) =>
          finish({ kind: 'retryable', reason: networkReason(error) }),
        );
        response.on('end', () => {
          const text = Buffer.concat(chunks).subarray(0, MAX_ERROR_BODY).toString('utf8');
          finish(classify(response.statusCode ?? 0, response.headers, text));
        });
      });
      request.end(body);
    });
  }
}

function header(headers: http.IncomingHttpHeaders, name: string): string | null {
  const value = headers[name];
  return typeof value === 'string' ? value : Array.isArray(value) ? (value[0] ?? null) : null;
}

/** What an answer means for the request: done, worth another try, or refused. */
function classify(
  status: number,
  headers: http.IncomingHttpHeaders,
  text: string,
): TransportOutcome {
  if (status >= 200 && status < 300)
    return {
      kind: 'ok',
      status,
      replayed: header(headers, 'idempotent-replayed') === 'true',
      verify: header(headers, 'flightlog-verify'),
    };
  if (isRetryableStatus(status)) {
    const retryAfterMs = parseRetryAfter(header(headers, 'retry-after'));
    return {
      kind: 'retryable',
      reason: `HTTP ${status}: ${problemDetail(text, status)}`,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  }
  if (status >= 300 && status < 400)
    return {
      kind: 'failed',
      status,
      detail: `redirected to ${redactUrls(header(headers, 'location') ?? '?')}; set ingestUrl to the final address`,
    };
  return {
    kind: 'failed',
    status,
    detail: problemDetail(text, status),
    fieldErrors: problemFieldErrors(text),
  };
}

/** A network error as `CODE: message` (ECONNREFUSED, ECONNRESET, …). */
function networkReason(error: Error): string {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && !error.message.includes(code)
    ? `${code}: ${error.message}`
    : error.message;
}
