import type { LlmCallPayload } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import { llmCallPayload, type LlmCallRecord, type LlmObserveOptions } from './llm-payload.js';
import { beginStep, type ObservedStep } from './observed-step.js';
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
  let step: ObservedStep<LlmCallPayload> | undefined;
  try {
    record = reader.request(args[0]);
    // The payloads are llmCallPayload's fresh objects: recorded without a copy.
    step = beginStep(session, 'llm_call', true);
  } catch {
    step = undefined;
  }
  if (step === undefined || record === undefined) return Reflect.apply(original, thisArg, args);
  const call = record;
  // The event is recorded a turn after the call ends; a `costUsd` of the host's is asked when it
  // ends all the same (seeing its state and its request as they were then).
  const started = options.costUsd === undefined ? step : builtAtEnd(step);
  const payload = (): LlmCallPayload => llmCallPayload(call, options);
  let result: unknown;
  try {
    result = Reflect.apply(original, thisArg, args);
  } catch (error) {
    started.fail(payload, error);
    throw error;
  }
  try {
    const watched = observeStainlessResult(
      result,
      (value) => {
        if (call.streamed) watchStream(started, reader.stream(call), value, options);
        else {
          const failure = reader.response(call, value);
          if (failure === undefined) started.ok(payload);
          else started.fail(payload, new Error(failure));
        }
      },
      (error) => {
        if (isAbortError(error)) call.aborted = true;
        started.fail(payload, error);
      },
    );
    if (!watched) {
      call.finishReason = 'unknown';
      started.ok(payload);
    }
  } catch {
    // An instrumentation bug costs the event, never the host's call.
  }
  return result;
}

/** `step`, whose payload is built the moment it ends rather than when it is recorded. */
function builtAtEnd<P>(step: ObservedStep<P>): ObservedStep<P> {
  const now = (build: () => P): (() => P) => {
    try {
      const payload = build();
      return () => payload;
    } catch (error) {
      // Thrown again when the step is recorded: refused then, as any builder that throws.
      return () => {
        throw error;
      };
    }
  };
  return {
    get eventId() {
      return step.eventId;
    },
    get ended() {
      return step.ended;
    },
    ok: (build) => {
      if (!step.ended) step.ok(now(build));
    },
    fail: (build, error) => {
      if (!step.ended) step.fail(now(build), error);
    },
  };
}

function watchStream(
  step: ObservedStep<LlmCallPayload>,
  reader: StreamReader,
  stream: unknown,
  options: LlmObserveOptions,
): void {
  const payload = () => llmCallPayload(reader.result(), options);
  const abortedPayload = () => {
    const record = reader.result();
    record.aborted = true;
    return llmCallPayload(record, options);
  };
  const watched = observeStream(
    stream,
    (item) => reader.add(item),
    (end: StreamEnd) => {
      if (end.kind === 'error') {
        step.fail(isAbortError(end.error) ? abortedPayload : payload, end.error);
      } else if (
        !reader.finished &&
        // Read to its end without saying how it finished: the SDK ends an aborted stream
        // quietly, so its controller tells (asked only then).
        (end.kind === 'aborted' || streamAborted(stream))
      ) {
        step.fail(abortedPayload, new Error('the stream was aborted before it finished'));
      } else if (reader.failure !== undefined) {
        step.fail(payload, new Error(reader.failure));
      } else step.ok(payload);
    },
    () => streamAborted(stream),
  );
  if (!watched) step.ok(payload);
}

function streamAborted(stream: unknown): boolean {
  try {
    const controller = (stream as { controller?: { signal?: { aborted?: unknown } } }).controller;
    return controller?.signal?.aborted === true;
  } catch {
    return false;
  }
}
