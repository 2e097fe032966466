import type { LlmCallPayload } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import { llmCallPayload, type LlmCallRecord, type LlmObserveOptions } from './llm-payload.js';
import { beginStep, instrumentCall, type ObservedStep } from './observed-step.js';
import { observeStainlessResult, observeStream, type StreamEnd } from './stainless-results.js';

/** How a Stainless SDK (OpenAI, Anthropic) call is read. */
export interface StainlessCallReader {
  /** The record of the call before its outcome, from the request body. */
  request(body: unknown): LlmCallRecord;
  /** Fills in a whole response; a string is an error the response carries. */
  response(record: LlmCallRecord, value: unknown): string | undefined;
  /** A reader of the streamed items. */
  stream(record: LlmCallRecord): StreamReader;
}

/** Reads the items of one stream as they go by. */
export interface StreamReader {
  add(item: unknown): void;
  /** True once the stream said how it finished. */
  readonly finished: boolean;
  /** An error the stream reported in-band. */
  readonly failure: string | undefined;
  result(): LlmCallRecord;
}

/** True for the errors an aborted request or stream ends with, in both SDKs and in fetch. */
export function isAbortError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  try {
    const name = (error as { name?: unknown }).name;
    const constructorName = (error as { constructor?: { name?: unknown } }).constructor?.name;
    return name === 'AbortError' || constructorName === 'APIUserAbortError';
  } catch {
    return false;
  }
}

/**
 * One `create` call of a Stainless SDK, recorded as an `llm_call`: the original runs with the
 * caller's `this` and arguments, and its result — the SDK's own object — is handed back. The
 * step ends when the caller has the whole response, or, streamed, when it read the stream to
 * its end (or stopped early: aborted).
 */
export function recordStainlessCall(
  session: FlightlogSession,
  options: LlmObserveOptions,
  reader: StainlessCallReader,
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
): unknown {
  let record: LlmCallRecord | undefined;
  const payloadOf = (extra?: Partial<LlmCallRecord>) => (): LlmCallPayload =>
    llmCallPayload({ ...(record as LlmCallRecord), ...extra }, options);
  return instrumentCall<LlmCallPayload, unknown>(
    () => {
      record = reader.request(args[0]);
      return beginStep(session, 'llm_call');
    },
    () => Reflect.apply(original, thisArg, args),
    (step, result) => {
      const failed = (error: unknown) =>
        step.fail(payloadOf(isAbortError(error) ? { aborted: true } : {}), error);
      const watched = observeStainlessResult(
        result,
        (value) => {
          const call = record as LlmCallRecord;
          if (call.streamed) watchStream(step, reader.stream(call), value, options);
          else {
            const failure = reader.response(call, value);
            if (failure === undefined) step.ok(payloadOf());
            else step.fail(payloadOf(), new Error(failure));
          }
        },
        failed,
      );
      if (!watched) step.ok(payloadOf({ finishReason: 'unknown' }));
    },
    (step, error) => step.fail(payloadOf(), error),
  );
}

function watchStream(
  step: ObservedStep<LlmCallPayload>,
  reader: StreamReader,
  stream: unknown,
  options: LlmObserveOptions,
): void {
  const payload = (aborted: boolean) => () =>
    llmCallPayload(aborted ? { ...reader.result(), aborted: true } : reader.result(), options);
  const watched = observeStream(
    stream,
    (item) => reader.add(item),
    (end: StreamEnd) => {
      if (end.kind === 'error') {
        step.fail(payload(isAbortError(end.error)), end.error);
      } else if (end.kind === 'aborted' && !reader.finished) {
        step.fail(payload(true), new Error('the stream was aborted before it finished'));
      } else if (reader.failure !== undefined) {
        step.fail(payload(false), new Error(reader.failure));
      } else step.ok(payload(false));
    },
    () => streamAborted(stream),
  );
  if (!watched) step.ok(payload(false));
}

function streamAborted(stream: unknown): boolean {
  const controller = (stream as { controller?: { signal?: { aborted?: unknown } } }).controller;
  return controller?.signal?.aborted === true;
}
