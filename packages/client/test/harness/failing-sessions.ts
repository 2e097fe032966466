import { expect } from 'vitest';
import type { FlightlogSession } from '../../src/index.js';
import type { LlmObserveOptions } from '../../src/instrumentations/llm-payload.js';
import { recordedSession } from './recorded-session.js';

/** A session on which an instrumentation's own recording fails, and how to see that it did. */
export interface FailingSession {
  name: string;
  session: FlightlogSession;
  /** Asserts the recording failed the way it should have (nothing recorded; said so if it can). */
  failedAsExpected(): void;
  /** The instrumentation's options that make it fail, when those do. */
  options?: LlmObserveOptions;
}

/**
 * Sessions that make the recording of an SDK call fail inside the instrumentation, each in its
 * own way: one the host already ended (the client refuses the event, with a warning); a wrapper
 * of the host's whose `timed` throws; and one whose every property read throws. Whatever the
 * instrumentation meets, the host's call must return (or throw) exactly what it does unwrapped.
 */
export function failingSessions(): FailingSession[] {
  const ended = recordedSession();
  ended.session.end();
  let timedCalls = 0;
  const broken = {
    traceId: '01J00000000000000000000000',
    timed() {
      timedCalls += 1;
      throw new Error('the host wrapper broke');
    },
  } as unknown as FlightlogSession;
  let reads = 0;
  const throwing = new Proxy({} as FlightlogSession, {
    get() {
      reads += 1;
      throw new Error('every read throws');
    },
  });
  return [
    {
      name: 'a session that has ended',
      session: ended.session,
      failedAsExpected() {
        expect(ended.client.stats().recordedEvents).toBe(0);
        expect(ended.logger.matching('after the session ended').length).toBeGreaterThan(0);
      },
    },
    {
      name: 'a wrapper session whose timed throws',
      session: broken,
      failedAsExpected: () => expect(timedCalls).toBeGreaterThan(0),
    },
    {
      name: 'a session whose every read throws',
      session: throwing,
      failedAsExpected: () => expect(reads).toBeGreaterThan(0),
    },
  ];
}

/**
 * A session given a price table whose entry for `model` throws when read: the payload of a call
 * to that model cannot be built, so the client refuses the event (counted as invalid, said once
 * in the log), while the host's call returns as unwrapped. `calls`: the calls the test makes.
 */
export function refusedPayloadSession(model: string, calls: number): FailingSession {
  const refusing = recordedSession();
  return {
    name: 'a payload the client refuses',
    session: refusing.session,
    options: {
      prices: {
        [model]: {
          get input(): number {
            throw new Error('no price today');
          },
          output: 1,
        },
      },
    },
    failedAsExpected() {
      expect(refusing.client.stats()).toMatchObject({ recordedEvents: 0, invalidEvents: calls });
      expect(refusing.logger.matching('describe() threw: no price today')).toHaveLength(1);
    },
  };
}
