import type { X402PaymentPayload } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import { field, text, type ObserveOptions } from './llm-payload.js';
import { currentStepOf } from '../step-scope.js';
import { startTimer, type Stopwatch } from '../timing.js';
import { beginStep, instrumentCall, isNativePromise, watchPromise } from './observed-step.js';

export type { ObserveOptions } from './llm-payload.js';

/** Options of {@link observeX402Fetch}. */
export type ObserveX402Options = ObserveOptions;

/** A fetch function: what x402's `wrapFetchWithPayment` takes and returns. */
export type FetchFunction = (
  input: string | URL | Request,
  init?: RequestInit,
) => Promise<Response>;

/** Settlement headers of x402 v2 and v1. */
const RESPONSE_HEADERS = ['payment-response', 'x-payment-response'];

/** Responses already recorded as a payment: an outer wrapper does not record them again. */
const recorded = new WeakSet<object>();

/**
 * Records x402 payments as `x402_payment` events in `session`. Wrap the fetch that x402's
 * client pays through — the one you hand to `wrapFetchWithPayment` — so that every paid request
 * is seen with its payment:
 *
 * ```ts
 * const fetchWithPayment = wrapFetchWithPayment(observeX402Fetch(fetch, session), client);
 * ```
 *
 * A request carrying a payment (`PAYMENT-SIGNATURE`, or v1's `X-PAYMENT`) is one event: the
 * resource, the amount in the asset's atomic units, the asset, network, scheme and payee from
 * the payment, and from the server's `PAYMENT-RESPONSE` the settlement transaction
 * (`txSignature`), the payer and `settled`. A paid request answered with 402 again, or a
 * settlement that failed, is an error event; a request without payment passes unrecorded.
 * Wrapping the paying fetch itself (`observeX402Fetch(fetchWithPayment, session)`) records what
 * its final response tells (settlement, network, payer; amount and asset `unknown` unless the
 * settlement names them). Responses, errors and the request are the fetch's own. Never throws.
 */
export function observeX402Fetch<F extends FetchFunction>(
  fetchFunction: F,
  session: FlightlogSession,
  options?: ObserveX402Options,
): F {
  if (typeof fetchFunction !== 'function') return fetchFunction;
  let capture = true;
  try {
    capture = field(options, 'capture') !== false;
  } catch {
    capture = true;
  }
  return new Proxy(fetchFunction, {
    apply: (original, thisArg, args: unknown[]) =>
      recordFetch(session, capture, original, thisArg, args),
  });
}

interface SentPayment {
  resource: string;
  /** The decoded payment header, or undefined when the request carries none. */
  payment: unknown;
  version: 1 | 2 | undefined;
}

function headerOf(headers: Headers, names: readonly string[]): string | null {
  for (const name of names) {
    const value = headers.get(name);
    if (value !== null) return value;
  }
  return null;
}

function decodeBase64Json(value: string | null): unknown {
  if (value === null) return undefined;
  try {
    return JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}

function sentPayment(input: unknown, init: unknown): SentPayment {
  const resource =
    typeof input === 'string'
      ? input
      : input instanceof URL
        ? input.href
        : text(field(input, 'url'), 'unknown');
  const initHeaders = field(init, 'headers');
  const requestHeaders = field(input, 'headers');
  const headers = new Headers(
    (initHeaders ??
      (requestHeaders instanceof Headers ? requestHeaders : undefined)) as ConstructorParameters<
      typeof Headers
    >[0],
  );
  const v2 = headers.get('payment-signature');
  const v1 = v2 === null ? headers.get('x-payment') : null;
  return {
    resource,
    payment: decodeBase64Json(v2 ?? v1),
    version: v2 !== null ? 2 : v1 !== null ? 1 : undefined,
  };
}

/** What the payment header says was paid: v2's `accepted` requirements, or v1's payload. */
function paidTerms(
  sent: SentPayment,
): Pick<X402PaymentPayload, 'amount' | 'asset'> & Record<string, unknown> {
  const payment = sent.payment;
  const accepted = field(payment, 'accepted');
  const terms: Pick<X402PaymentPayload, 'amount' | 'asset'> & Record<string, unknown> = {
    amount: 'unknown',
    asset: 'unknown',
  };
  if (accepted !== undefined) {
    terms.amount = text(
      field(accepted, 'amount'),
      text(field(accepted, 'maxAmountRequired'), 'unknown'),
    );
    terms.asset = text(field(accepted, 'asset'), 'unknown');
    const network = field(accepted, 'network');
    if (typeof network === 'string') terms.network = network;
    const payTo = field(accepted, 'payTo');
    if (typeof payTo === 'string') terms.payTo = payTo;
    const scheme = field(accepted, 'scheme');
    if (typeof scheme === 'string') terms.scheme = scheme;
  } else {
    const network = field(payment, 'network');
    if (typeof network === 'string') terms.network = network;
    const scheme = field(payment, 'scheme');
    if (typeof scheme === 'string') terms.scheme = scheme;
    const authorization = field(field(payment, 'payload'), 'authorization');
    const value = field(authorization, 'value');
    if (typeof value === 'string') terms.amount = value;
    const to = field(authorization, 'to');
    if (typeof to === 'string') terms.payTo = to;
  }
  if (sent.version !== undefined) terms.x402Version = sent.version;
  return terms;
}

function recordFetch(
  session: FlightlogSession,
  capture: boolean,
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
): unknown {
  let sent: SentPayment | undefined;
  try {
    sent = sentPayment(args[0], args[1]);
  } catch {
    sent = undefined;
  }
  if (sent === undefined) return Reflect.apply(original, thisArg, args);
  const paying = sent.version !== undefined;
  const payment = sent;
  const build = (response: unknown, settlement: unknown) => (): X402PaymentPayload => {
    const terms = paidTerms(payment);
    const payload: X402PaymentPayload = { resource: payment.resource, ...terms };
    if (settlement !== undefined) {
      const transaction = field(settlement, 'transaction');
      payload.txSignature =
        typeof transaction === 'string' && transaction !== '' ? transaction : null;
      payload.settled = field(settlement, 'success') === true;
      const network = field(settlement, 'network');
      if (typeof network === 'string' && payload.network === undefined) payload.network = network;
      const payer = field(settlement, 'payer');
      if (typeof payer === 'string') payload.payer = payer;
      const amount = field(settlement, 'amount');
      if (typeof amount === 'string' && amount !== '') payload.amount = amount;
      const reason = field(settlement, 'errorReason');
      if (typeof reason === 'string') payload.errorReason = reason;
    } else {
      payload.txSignature = null;
      payload.settled = false;
    }
    const status = field(response, 'status');
    if (typeof status === 'number') payload.httpStatus = status;
    if (!capture) {
      payload.resource = stripQuery(payload.resource);
      payload.captured = false;
    }
    return payload;
  };
  const verdict = (response: unknown, settlement: unknown): Error | undefined => {
    if (field(response, 'status') === 402) return new Error('the payment was refused (402)');
    if (settlement !== undefined && field(settlement, 'success') === false)
      return new Error(
        `the payment was not settled: ${text(field(settlement, 'errorReason'), 'unknown reason')}`,
      );
    return undefined;
  };
  if (!paying) return watchUnpaid(session, build, verdict, original, thisArg, args);
  return instrumentCall(
    () => beginStep(session, 'x402_payment'),
    () => Reflect.apply(original, thisArg, args),
    (step, result) => {
      if (!isNativePromise(result)) return;
      watchPromise(
        result,
        (response) => {
          if (typeof response === 'object' && response !== null) recorded.add(response);
          const settlement = settlementOf(response);
          const error = verdict(response, settlement);
          if (error === undefined) step.ok(build(response, settlement));
          else step.fail(build(response, settlement), error);
        },
        (error) => step.fail(build(undefined, undefined), error),
      );
    },
    (step, error) => step.fail(build(undefined, undefined), error),
  );
}

/**
 * A request without payment, through a fetch that pays by itself (the paying fetch wrapped):
 * its final response tells whether a payment was settled on the way. Recorded then only, and
 * only if an inner wrapper did not record that response already.
 */
function watchUnpaid(
  session: FlightlogSession,
  build: (response: unknown, settlement: unknown) => () => X402PaymentPayload,
  verdict: (response: unknown, settlement: unknown) => Error | undefined,
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
): unknown {
  let timer: Stopwatch | undefined;
  let parentEventId: string | null = null;
  try {
    timer = startTimer();
    parentEventId = currentStepOf(session.traceId);
  } catch {
    timer = undefined;
  }
  const result: unknown = Reflect.apply(original, thisArg, args);
  if (timer === undefined || !isNativePromise(result)) return result;
  const started = timer;
  watchPromise(
    result,
    (response) => {
      const settlement = settlementOf(response);
      if (settlement === undefined || typeof response !== 'object' || response === null) return;
      if (recorded.has(response)) return;
      recorded.add(response);
      const error = verdict(response, settlement);
      session.x402Payment(build(response, settlement)(), {
        ...started.stop(),
        parentEventId,
        status: error === undefined ? 'ok' : 'error',
        errorMessage: error?.message ?? null,
      });
    },
    () => undefined,
  );
  return result;
}

function settlementOf(response: unknown): unknown {
  const headers = field(response, 'headers');
  if (!(headers instanceof Headers)) return undefined;
  return decodeBase64Json(headerOf(headers, RESPONSE_HEADERS));
}

function stripQuery(resource: string): string {
  const at = resource.search(/[?#]/);
  return at === -1 ? resource : resource.slice(0, at);
}
