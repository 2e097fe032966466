import { describe, expect, it } from 'vitest';
import type {
  LiveBus,
  LiveListener,
  LiveMessage,
  Replay,
  Subscription,
} from '../../src/live/live-bus.js';
import { openLiveStream, type LiveSink } from '../../src/live/live-stream.js';

/**
 * openLiveStream's hand-off logic against a scripted in-memory bus (no I/O): each replay waits
 * until the test answers it, and the test plays the bus's real-time messages and status.
 */
function scriptedBus() {
  const replays: {
    afterId: string | undefined;
    maxBatches: number | undefined;
    resolve: (replay: Replay) => void;
    reject: (error: Error) => void;
  }[] = [];
  let listener: LiveListener | undefined;
  let unsubscribed = false;
  const bus: LiveBus = {
    engine: 'memory',
    publish: async () => [],
    replay: (_agentId, afterId, maxBatches) =>
      new Promise<Replay>((resolve, reject) =>
        replays.push({ afterId, maxBatches, resolve, reject }),
      ),
    subscribe: async (_agentId, l): Promise<Subscription> => {
      listener = l;
      return {
        unsubscribe() {
          unsubscribed = true;
          listener = undefined;
        },
      };
    },
    forget: async () => {},
    forgetTraces: async () => {},
    backlog: () => ({ batches: 0, bytes: 0 }),
    ready: async () => true,
    close: async () => {},
  };
  return {
    bus,
    replays,
    get unsubscribed() {
      return unsubscribed;
    },
    /** The bus's listener (set once subscribe resolved). */
    get listener(): LiveListener {
      if (!listener) throw new Error('not subscribed');
      return listener;
    },
    get subscribed() {
      return listener !== undefined;
    },
    /** Waits until the stream has asked for replay number `n` (1-based). */
    async replayAsked(n: number) {
      for (let i = 0; i < 100 && replays.length < n; i++) await tick();
      if (replays.length < n) throw new Error(`replay ${n} was never asked for`);
      return replays[n - 1]!;
    },
  };
}

function recordingSink() {
  const sent: string[] = [];
  let warnings = 0;
  let overflows = 0;
  let ended = false;
  const sink: LiveSink = {
    message: (m) => {
      sent.push(m.id);
      return true;
    },
    drained: async () => {},
    warning: () => void warnings++,
    overflow: () => void overflows++,
    ended: () => ended,
  };
  return {
    sink,
    sent,
    /** The client leaves. */
    leave: () => (ended = true),
    get warnings() {
      return warnings;
    },
    get overflows() {
      return overflows;
    },
  };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
const message = (id: string): LiveMessage => ({ id, data: '{}' });
const down = () => new Error('bus down');
/** Opens the stream and waits until it subscribed (openLiveStream then awaits its replay). */
async function open(
  scripted: ReturnType<typeof scriptedBus>,
  sink: LiveSink,
  lastEventId?: string,
  maxHeld = 1000,
  retryMs?: number,
) {
  const opening = openLiveStream(scripted.bus, 'agent', lastEventId, sink, {
    maxHeld,
    ...(retryMs !== undefined ? { retryMs } : {}),
  });
  for (let i = 0; i < 100 && !scripted.subscribed; i++) await tick();
  return opening;
}

describe('openLiveStream hand-off (scripted bus)', () => {
  it('holds real-time messages during the replay and drops the ones the replay already sent', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    const first = await scripted.replayAsked(1);
    expect(first.afterId).toBeUndefined();
    for (const id of ['2-0', '3-0', '3-0-1', '4-0']) scripted.listener.message(message(id));
    first.resolve({ messages: ['1-0', '2-0', '3-0'].map(message), resumed: false, complete: true });
    await opening;
    expect(out.sent).toEqual(['1-0', '2-0', '3-0', '3-0-1', '4-0']);
    scripted.listener.message(message('5-0'));
    expect(out.sent.at(-1)).toBe('5-0');
  });

  it('reads a long replay page by page, the next page asked after the last message of the one before while it is sent', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, '1-0');
    const first = await scripted.replayAsked(1);
    expect(first.afterId).toBe('1-0');
    expect(first.maxBatches).toBe(100);
    scripted.listener.message(message('5-0'));
    first.resolve({
      messages: ['2-0', '2-0-1', '3-0'].map(message),
      resumed: true,
      complete: false,
    });
    const second = await scripted.replayAsked(2);
    expect(second.afterId).toBe('3-0');
    expect(out.sent).toEqual(['2-0', '2-0-1', '3-0']);
    // the held real-time message waits until the last page, which also has it: sent once
    second.resolve({ messages: ['4-0', '5-0'].map(message), resumed: true, complete: true });
    await opening;
    expect(out.sent).toEqual(['2-0', '2-0-1', '3-0', '4-0', '5-0']);
    expect(scripted.replays).toHaveLength(2);
  });

  it('a page that fails warns, and on `connected` the replay goes on after the last message sent', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    (await scripted.replayAsked(1)).resolve({
      messages: ['1-0', '2-0'].map(message),
      resumed: false,
      complete: false,
    });
    (await scripted.replayAsked(2)).reject(down());
    await opening;
    expect(out.sent).toEqual(['1-0', '2-0']);
    expect(out.warnings).toBe(1);
    scripted.listener.message(message('4-0'));
    expect(out.sent).toEqual(['1-0', '2-0']);

    scripted.listener.status('connected');
    const third = await scripted.replayAsked(3);
    expect(third.afterId).toBe('2-0');
    third.resolve({ messages: ['3-0'].map(message), resumed: true, complete: true });
    for (let i = 0; i < 10; i++) await tick();
    expect(out.sent).toEqual(['1-0', '2-0', '3-0', '4-0']);
  });

  it('after a failed replay, replays again when the bus is back, after the client’s Last-Event-ID, then goes live', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, '5-0-1');
    // the bus is down: it says so to the new listener, and the replay fails
    scripted.listener.status('interrupted');
    (await scripted.replayAsked(1)).reject(down());
    await opening;
    expect(out.sent).toEqual([]);
    expect(out.warnings).toBe(1);

    scripted.listener.status('connected');
    const second = await scripted.replayAsked(2);
    expect(second.afterId).toBe('5-0-1');
    // real-time messages during that replay wait behind it; what it also has is sent once
    for (const id of ['7-0', '8-0', '8-0-1']) scripted.listener.message(message(id));
    expect(out.sent).toEqual([]);
    second.resolve({
      messages: ['5-0-2', '6-0', '7-0'].map(message),
      resumed: true,
      complete: true,
    });
    for (let i = 0; i < 5; i++) await tick();
    expect(out.sent).toEqual(['5-0-2', '6-0', '7-0', '8-0', '8-0-1']);
    scripted.listener.message(message('9-0'));
    expect(out.sent.at(-1)).toBe('9-0');

    // a later outage warns again, but needs no replay (nothing was missed on this connection)
    scripted.listener.status('interrupted');
    expect(out.warnings).toBe(2);
    scripted.listener.status('connected');
    for (let i = 0; i < 5; i++) await tick();
    expect(scripted.replays).toHaveLength(2);
  });

  it('waits for the next `connected` when the replay fails again, and resumes after Last-Event-ID then', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, '1-0');
    scripted.listener.status('interrupted');
    (await scripted.replayAsked(1)).reject(down());
    await opening;
    scripted.listener.status('connected');
    const second = await scripted.replayAsked(2);
    // the bus goes down again during this replay, which fails
    scripted.listener.status('interrupted');
    second.reject(down());
    for (let i = 0; i < 5; i++) await tick();
    expect(out.warnings).toBe(2);
    expect(scripted.replays).toHaveLength(2);

    scripted.listener.status('connected');
    const third = await scripted.replayAsked(3);
    expect(third.afterId).toBe('1-0');
    third.resolve({ messages: ['2-0', '3-0'].map(message), resumed: true, complete: true });
    for (let i = 0; i < 5; i++) await tick();
    expect(out.sent).toEqual(['2-0', '3-0']);
  });

  it('a `connected` that arrives while the failing replay is in flight still brings a replay', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    const first = await scripted.replayAsked(1);
    scripted.listener.status('interrupted');
    scripted.listener.status('connected');
    first.reject(down());
    // asked again at once, still as part of opening
    const second = await scripted.replayAsked(2);
    second.resolve({ messages: [message('1-0')], resumed: false, complete: true });
    await opening;
    expect(out.sent).toEqual(['1-0']);
  });

  it('sends one warning per outage, not one for the bus and one for the replay', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    scripted.listener.status('interrupted');
    scripted.listener.status('interrupted');
    (await scripted.replayAsked(1)).reject(down());
    await opening;
    expect(out.warnings).toBe(1);
  });

  it('a replay that fails while the bus stays up is asked again on the stream’s own backoff, from where it stopped', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, undefined, 1000, 20);
    (await scripted.replayAsked(1)).resolve({
      messages: ['1-0'].map(message),
      resumed: false,
      complete: false,
    });
    // this agent's batches could not be read; the bus reports nothing (other agents are fine)
    (await scripted.replayAsked(2)).reject(down());
    await opening;
    expect(out.warnings).toBe(1);
    expect(scripted.replays).toHaveLength(2);
    await new Promise((resolve) => setTimeout(resolve, 60)); // the 20 ms backoff
    const third = await scripted.replayAsked(3);
    expect(third.afterId).toBe('1-0');
    third.resolve({ messages: ['2-0'].map(message), resumed: true, complete: true });
    for (let i = 0; i < 5; i++) await tick();
    expect(out.sent).toEqual(['1-0', '2-0']);
    scripted.listener.message(message('3-0'));
    expect(out.sent.at(-1)).toBe('3-0');
  });

  it('stops reading the replay once its client has left, before its opener could unsubscribe', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    const first = await scripted.replayAsked(1);
    out.leave();
    first.resolve({ messages: ['1-0', '2-0'].map(message), resumed: false, complete: false });
    await opening;
    for (let i = 0; i < 5; i++) await tick();
    // before: every page of the agent's buffer was read for nobody
    expect(scripted.replays).toHaveLength(1);
    expect(out.sent).toEqual([]);
  });

  it('a replay that fails without the bus reporting an outage still warns', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    (await scripted.replayAsked(1)).reject(down());
    await opening;
    expect(out.warnings).toBe(1);
  });

  it('counts held real-time messages in batches: one batch of 1500 items does not overflow', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, undefined, 1000);
    const first = await scripted.replayAsked(1);
    const items = ['7-0', ...Array.from({ length: 1499 }, (_, k) => `7-0-${k + 1}`)];
    for (const id of items) scripted.listener.message(message(id));
    expect(out.overflows).toBe(0);
    first.resolve({ messages: [message('6-0')], resumed: false, complete: true });
    await opening;
    expect(out.overflows).toBe(0);
    expect(out.sent).toEqual(['6-0', ...items]);
  });

  it('gives up on the client once more than maxHeld batches wait behind the replay', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink, undefined, 3);
    const first = await scripted.replayAsked(1);
    for (const id of ['7-0', '7-0-1', '8-0', '9-0']) scripted.listener.message(message(id));
    expect(out.overflows).toBe(0);
    scripted.listener.message(message('10-0'));
    expect(out.overflows).toBe(1);
    scripted.listener.message(message('11-0'));
    expect(out.overflows).toBe(1);
    first.resolve({ messages: [message('6-0')], resumed: false, complete: true });
    await opening;
  });

  it('after unsubscribe, a pending replay delivers nothing', async () => {
    const scripted = scriptedBus();
    const out = recordingSink();
    const opening = open(scripted, out.sink);
    scripted.listener.status('interrupted');
    (await scripted.replayAsked(1)).reject(down());
    const subscription = await opening;
    scripted.listener.status('connected');
    const second = await scripted.replayAsked(2);
    subscription.unsubscribe();
    expect(scripted.unsubscribed).toBe(true);
    second.resolve({ messages: [message('1-0')], resumed: false, complete: true });
    for (let i = 0; i < 5; i++) await tick();
    expect(out.sent).toEqual([]);
  });
});
