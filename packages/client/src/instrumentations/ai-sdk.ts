import type { LlmCallPayload } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import {
  AiSdkStreamAccumulator,
  aiSdkRequestRecord,
  applyAiSdkGenerateResult,
} from './ai-sdk-records.js';
import {
  field,
  llmCallPayload,
  readLlmOptions,
  type LlmCallRecord,
  type LlmObserveOptions,
} from './llm-payload.js';
import { beginStep, guard, isNativePromise, type ObservedStep } from './observed-step.js';
import { isAbortError, type StreamReader } from './sdk-call.js';

export type { LlmCostQuery, LlmObserveOptions, LlmUsage, ObserveOptions } from './llm-payload.js';
export { MODEL_PRICES, findModelPrice, type ModelPrice, type PriceTable } from '../model-prices.js';

/** Options of {@link flightlogMiddleware}. */
export type FlightlogMiddlewareOptions = LlmObserveOptions;

/**
 * The middleware, typed structurally: it is assignable to the AI SDK's
 * `LanguageModelMiddleware` (v3, `ai` 6; `ai` 5 ignores `specificationVersion`) without this
 * package importing `ai`. `wrapGenerate` and `wrapStream` hand back what the model returned.
 */
export interface FlightlogLanguageModelMiddleware {
  readonly specificationVersion: 'v3';
  wrapGenerate: <R>(options: {
    doGenerate: () => PromiseLike<R>;
    params: unknown;
    model: unknown;
  }) => PromiseLike<R>;
  wrapStream: <S extends { stream: ReadableStream<unknown> }>(options: {
    doStream: () => PromiseLike<S>;
    params: unknown;
    model: unknown;
  }) => PromiseLike<S>;
}

/**
 * An AI SDK middleware that records every language model call made through the wrapped model —
 * `generateText`, `streamText`, `generateObject`, `streamObject`, each step of a multi-step tool
 * loop — as an `llm_call` in `session`:
 *
 * ```ts
 * const model = wrapLanguageModel({ model: openai('gpt-4o'), middleware: flightlogMiddleware(session) });
 * ```
 *
 * Results, streamed parts and errors reach the AI SDK unchanged; a failure inside the
 * middleware never does.
 */
export function flightlogMiddleware(
  session: FlightlogSession,
  options?: FlightlogMiddlewareOptions,
): FlightlogLanguageModelMiddleware {
  const read = readLlmOptions(options);
  return {
    specificationVersion: 'v3',
    wrapGenerate({ doGenerate, params, model }) {
      let record: LlmCallRecord | undefined;
      let step: ObservedStep<LlmCallPayload> | undefined;
      try {
        record = aiSdkRequestRecord('generate', params, model);
        step = beginStep(session, 'llm_call');
      } catch {
        step = undefined;
      }
      if (step === undefined || record === undefined) return doGenerate();
      const call = record;
      const started = step;
      const payload = () => llmCallPayload(call, read);
      let result: PromiseLike<unknown>;
      try {
        result = started.run(doGenerate);
      } catch (error) {
        started.fail(payload, error);
        throw error;
      }
      return settle(result, {
        ok: (value) => {
          guard(() => applyAiSdkGenerateResult(call, value));
          started.ok(payload);
        },
        error: (error) => {
          if (isAbortError(error)) call.aborted = true;
          started.fail(payload, error);
        },
      }) as ReturnType<typeof doGenerate>;
    },
    wrapStream({ doStream, params, model }) {
      let record: LlmCallRecord | undefined;
      let step: ObservedStep<LlmCallPayload> | undefined;
      try {
        record = aiSdkRequestRecord('stream', params, model);
        step = beginStep(session, 'llm_call');
      } catch {
        step = undefined;
      }
      if (step === undefined || record === undefined) return doStream();
      const call = record;
      const started = step;
      let result: PromiseLike<{ stream: ReadableStream<unknown> }>;
      try {
        result = started.run(doStream) as PromiseLike<{ stream: ReadableStream<unknown> }>;
      } catch (error) {
        started.fail(() => llmCallPayload(call, read), error);
        throw error;
      }
      return Promise.resolve(result).then(
        (value) => {
          let observed: typeof value = value;
          try {
            const reader = new AiSdkStreamAccumulator(call);
            const signal = field(params, 'abortSignal');
            observed = {
              ...value,
              stream: watchStream(
                value.stream,
                reader,
                started,
                read,
                signal instanceof AbortSignal ? signal : undefined,
              ),
            };
          } catch {
            started.ok(() => llmCallPayload(call, read));
          }
          return observed;
        },
        (error: unknown) => {
          if (isAbortError(error)) call.aborted = true;
          started.fail(() => llmCallPayload(call, read), error);
          throw error;
        },
      ) as unknown as ReturnType<typeof doStream>;
    },
  };
}

/** Watches a PromiseLike and hands back one that settles the same way. */
function settle(
  result: PromiseLike<unknown>,
  on: { ok(value: unknown): void; error(error: unknown): void },
): PromiseLike<unknown> {
  if (isNativePromise(result))
    return result.then(
      (value) => {
        guard(() => on.ok(value));
        return value;
      },
      (error: unknown) => {
        guard(() => on.error(error));
        throw error;
      },
    );
  return Promise.resolve(result).then(
    (value) => {
      guard(() => on.ok(value));
      return value;
    },
    (error: unknown) => {
      guard(() => on.error(error));
      throw error;
    },
  );
}

/**
 * The same parts, in the same order, read from `source` only as the consumer pulls them: the step
 * ends at the end of the stream, when it fails, or when the consumer cancels it or the call's
 * `abortSignal` fires (aborted).
 */
function watchStream(
  source: ReadableStream<unknown>,
  reader: StreamReader,
  step: ObservedStep<LlmCallPayload>,
  options: LlmObserveOptions,
  signal: AbortSignal | undefined,
): ReadableStream<unknown> {
  const parts = source.getReader();
  const payload = (aborted: boolean) => () =>
    llmCallPayload(aborted ? { ...reader.result(), aborted: true } : reader.result(), options);
  // A provider that honours the call's abortSignal ends its stream with an AbortError; one that
  // does not (or a consumer that simply stops reading) leaves it open: the signal tells either way.
  const onAbort = () => aborted();
  const release = () => signal?.removeEventListener('abort', onAbort);
  const ok = () => {
    release();
    step.ok(payload(false));
  };
  const failed = (error: unknown, wasAborted: boolean) => {
    release();
    step.fail(payload(wasAborted), error);
  };
  const aborted = () => {
    if (reader.finished) ok();
    else failed(new Error('the stream was aborted before it finished'), true);
  };
  if (signal?.aborted === true) aborted();
  else signal?.addEventListener('abort', onAbort, { once: true });
  return new ReadableStream<unknown>(
    {
      async pull(controller) {
        let next: Awaited<ReturnType<typeof parts.read>>;
        try {
          next = await parts.read();
        } catch (error) {
          failed(error, isAbortError(error));
          controller.error(error);
          return;
        }
        if (next.done) {
          if (reader.failure !== undefined) failed(new Error(reader.failure), false);
          else if (!reader.finished) failed(new Error('the stream ended before it finished'), true);
          else ok();
          controller.close();
          return;
        }
        guard(() => reader.add(next.value));
        controller.enqueue(next.value);
      },
      cancel(reason) {
        aborted();
        return parts.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
