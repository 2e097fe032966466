import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createInProcessBus } from '../../src/live/in-process-bus.js';
import {
  LIVE_BUFFER,
  compareMessageIds,
  isMessageId,
  type BusStatus,
  type LiveBus,
  type LiveListener,
  type LiveMessage,
  type Subscription,
} from '../../src/live/live-bus.js';
import { createRedisBus } from '../../src/live/redis-bus.js';
import { describeBuses, redisUrl, type BusName } from '../harness/engines.js';
import { newId } from '../fixtures/batches.js';

/** How long a test waits for a delivery it expects, or to be sure one it forbids did not come. */
const DELIVERY_MS = 3_000;
/** The Redis reader blocks this long per read (the harness uses the same). */
const BLOCK_MS = 200;
/** Long enough for a message the bus should not deliver to have arrived on either engine. */
const QUIET_MS = 3 * BLOCK_MS + 200;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function until(predicate: () => boolean, what: string, timeoutMs = DELIVERY_MS) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** A listener that records what it is given. */
function recorder(): LiveListener & { messages: LiveMessage[]; statuses: BusStatus[] } {
  const messages: LiveMessage[] = [];
  const statuses: BusStatus[] = [];
  return {
    messages,
    statuses,
    message: (m) => messages.push(m),
    status: (s) => statuses.push(s),
  };
}

const data = (label: string) => JSON.stringify({ label, at: newId() });
const labels = (messages: LiveMessage[]) =>
  messages.map((m) => (JSON.parse(m.data) as { label: string }).label);
const agent = () => `agent-${newId()}`;

function expectIncreasing(ids: string[]): void {
  for (const id of ids) expect(isMessageId(id), `${id} is a stream id`).toBe(true);
  for (let i = 1; i < ids.length; i++)
    expect(
      compareMessageIds(ids[i] as string, ids[i - 1] as string),
      `${ids[i]} after ${ids[i - 1]}`,
    ).toBeGreaterThan(0);
}

describeBuses('LiveBus contract [%s]', (engine: BusName) => {
  const created: LiveBus[] = [];
  const newBus = async (): Promise<LiveBus> => {
    const bus =
      engine === 'memory'
        ? createInProcessBus()
        : createRedisBus({
            url: redisUrl(),
            keyPrefix: `flightlog-test:contract:${randomBytes(6).toString('hex')}:`,
            blockMs: BLOCK_MS,
            ttlSeconds: 600,
          });
    created.push(bus);
    // the Redis bus connects in the background (a Redis that is down must not stop the
    // service); ready() says when it can publish
    expect(await bus.ready(5_000)).toBe(true);
    return bus;
  };
  let bus: LiveBus;
  const subscriptions: Subscription[] = [];
  const subscribe = async (agentId: string, listener: LiveListener) => {
    const subscription = await bus.subscribe(agentId, listener);
    subscriptions.push(subscription);
    return subscription;
  };

  beforeAll(async () => {
    bus = await newBus();
    expect(bus.engine).toBe(engine);
  });
  afterAll(async () => {
    for (const s of subscriptions) s.unsubscribe();
    await Promise.all(created.map((b) => b.close()));
  });

  it('once ready, publishes at once, and ready stays true', async () => {
    const own = await newBus();
    expect(await own.ready(0)).toBe(true);
    const [id] = await own.publish(agent(), [data('first')]);
    expect(isMessageId(id as string)).toBe(true);
    expect(await own.ready(100)).toBe(true);
  });

  it('forget drops what an agent has buffered (deleted): no replay shows it again, other agents keep theirs', async () => {
    const [doomed, kept] = [agent(), agent()];
    await bus.publish(doomed, [data('secret-1')]);
    await bus.publish(doomed, [data('secret-2'), data('secret-3')]);
    await bus.publish(kept, [data('kept')]);
    await bus.forget(doomed);
    expect((await bus.replay(doomed)).messages).toEqual([]);
    expect(labels((await bus.replay(kept)).messages)).toEqual(['kept']);
    // an agent created again under the same id starts with nothing of the old one
    await bus.publish(doomed, [data('new')]);
    expect(labels((await bus.replay(doomed)).messages)).toEqual(['new']);
    expect(bus.backlog()).toEqual({ batches: 0, bytes: 0 });
  });

  it('publish resolves with one id per message, increasing within and across calls', async () => {
    const a = agent();
    const first = await bus.publish(a, [data('m1'), data('m2'), data('m3')]);
    const second = await bus.publish(a, [data('m4')]);
    const third = await Promise.all([bus.publish(a, [data('m5')]), bus.publish(a, [data('m6')])]);
    expect(first).toHaveLength(3);
    expect(second).toHaveLength(1);
    expectIncreasing([...first, ...second, ...third.flat().sort(compareMessageIds)]);
    // every id is the one replay shows for that message
    const replay = await bus.replay(a);
    expect(replay.messages.map((m) => m.id)).toEqual([
      ...first,
      ...second,
      ...third.flat().sort(compareMessageIds),
    ]);
  });

  it('replay returns every buffered message oldest first, as published', async () => {
    const a = agent();
    const published: LiveMessage[] = [];
    for (const batch of [['m1', 'm2'], ['m3'], ['m4', 'm5', 'm6']]) {
      const payloads = batch.map(data);
      const ids = await bus.publish(a, payloads);
      ids.forEach((id, i) => published.push({ id, data: payloads[i] as string }));
    }
    await bus.publish(agent(), [data('another agent')]);
    const replay = await bus.replay(a);
    expect(replay).toEqual({ messages: published, resumed: false, complete: true });
    expect(labels(replay.messages)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6']);
  });

  it('replays text of any script exactly as published (multi-byte and astral characters)', async () => {
    const a = agent();
    const texts = [
      JSON.stringify({ note: 'señal → 送金 完了', emoji: '🚀🪙', mixed: 'a\u0000b' }),
      JSON.stringify({ long: '€'.repeat(5_000) }),
    ];
    const ids = await bus.publish(a, texts);
    const replay = await bus.replay(a);
    expect(replay.messages).toEqual(ids.map((id, i) => ({ id, data: texts[i] })));
  });

  it('replay of an agent with nothing buffered is empty', async () => {
    expect(await bus.replay(agent())).toEqual({ messages: [], resumed: false, complete: true });
    expect(await bus.replay(agent(), '1-1')).toEqual({
      messages: [],
      resumed: false,
      complete: true,
    });
  });

  it('replay(afterId) returns exactly what came after that id, resumed', async () => {
    const a = agent();
    const ids = await bus.publish(a, ['m1', 'm2', 'm3', 'm4', 'm5'].map(data));
    const afterSecond = await bus.replay(a, ids[1]);
    expect(afterSecond.resumed).toBe(true);
    expect(afterSecond.messages.map((m) => m.id)).toEqual(ids.slice(2));
    expect(labels(afterSecond.messages)).toEqual(['m3', 'm4', 'm5']);

    const afterFirst = await bus.replay(a, ids[0]);
    expect(afterFirst).toMatchObject({ resumed: true });
    expect(labels(afterFirst.messages)).toEqual(['m2', 'm3', 'm4', 'm5']);

    // the newest id: nothing missed
    expect(await bus.replay(a, ids[4])).toEqual({ messages: [], resumed: true, complete: true });
  });

  it('replay(afterId) of an unknown id returns everything buffered, not resumed', async () => {
    const a = agent();
    const ids = await bus.publish(a, ['m1', 'm2', 'm3'].map(data));
    const [ms, seq] = (ids[2] as string).split('-').map(Number) as [number, number];
    const everything = ['m1', 'm2', 'm3'];
    // ids of the stream id form (isMessageId) that were never this agent's: older, just newer,
    // far in the future
    const unknownIds = ['1-1', '0-0', `${ms}-${seq + 7}`, `${ms + 3_600_000}-0`];
    for (const unknown of unknownIds) {
      expect(isMessageId(unknown)).toBe(true);
      const replay = await bus.replay(a, unknown);
      expect(replay.resumed, unknown).toBe(false);
      expect(labels(replay.messages), unknown).toEqual(everything);
      expect(replay.messages.map((m) => m.id)).toEqual(ids);
    }
  });

  it('does not take ids past 2^64 - 1 a side for message ids (no stream can hold them)', () => {
    for (const tooLarge of ['99999999999999999999-0', '18446744073709551616-1'])
      expect(isMessageId(tooLarge), tooLarge).toBe(false);
    expect(isMessageId('18446744073709551615-18446744073709551615')).toBe(true);
    expect(isMessageId('1795336422100-0')).toBe(true);
  });

  it('compares ids part by part, a missing third part counting as 0', () => {
    const ordered = ['1-1', '1-1-1', '1-1-2', '1-1-10', '1-2', '1-10', '2-0', '10-0-5'];
    for (let i = 1; i < ordered.length; i++) {
      expect(compareMessageIds(ordered[i]!, ordered[i - 1]!), ordered[i]).toBeGreaterThan(0);
      expect(compareMessageIds(ordered[i - 1]!, ordered[i]!), ordered[i]).toBeLessThan(0);
    }
    expect(compareMessageIds('5-3', '5-3-0')).toBe(0);
    expect(compareMessageIds('5-3-7', '5-3-7')).toBe(0);
    // exact beyond 2^53, as Redis ids may be
    expect(compareMessageIds('9007199254740993-0', '9007199254740992-0')).toBeGreaterThan(0);
    expect([...ordered].reverse().sort(compareMessageIds)).toEqual(ordered);
  });

  it('takes the id of an item after the first of a batch (three parts), nothing else', () => {
    for (const valid of ['1-2-3', '1795336422100-0-999', '1-1-18446744073709551615'])
      expect(isMessageId(valid), valid).toBe(true);
    for (const invalid of ['1-2-3-4', '1-2-', '1--3', '1-2-x', '1-1-18446744073709551616', '-1-2'])
      expect(isMessageId(invalid), invalid).toBe(false);
  });

  it(`keeps the newest ${LIVE_BUFFER} batches: 1001 published, the oldest is gone`, async () => {
    const a = agent();
    const payloads = Array.from({ length: LIVE_BUFFER + 1 }, (_, i) =>
      JSON.stringify({ label: `m${i}` }),
    );
    // one batch per publish, so the cap holds for a stream that grows publish by publish
    const ids: string[] = [];
    for (const payload of payloads) ids.push(...(await bus.publish(a, [payload])));
    expect(ids).toHaveLength(LIVE_BUFFER + 1);
    expectIncreasing(ids);

    const replay = await bus.replay(a);
    expect(replay.resumed).toBe(false);
    expect(replay.messages).toHaveLength(LIVE_BUFFER);
    expect(replay.messages[0]).toEqual({ id: ids[1], data: payloads[1] });
    expect(replay.messages.at(-1)).toEqual({ id: ids[LIVE_BUFFER], data: payloads[LIVE_BUFFER] });
    expect(replay.messages.map((m) => m.id)).toEqual(ids.slice(1));

    // the evicted id is unknown now: everything buffered, not resumed
    const evicted = await bus.replay(a, ids[0]);
    expect(evicted.resumed).toBe(false);
    expect(evicted.messages).toHaveLength(LIVE_BUFFER);
    expect(evicted.messages[0]?.id).toBe(ids[1]);
    // the oldest one still buffered resumes
    const oldest = await bus.replay(a, ids[1]);
    expect(oldest.resumed).toBe(true);
    expect(oldest.messages.map((m) => m.id)).toEqual(ids.slice(2));

    // one more pushes out the next oldest
    const [newest] = await bus.publish(a, [JSON.stringify({ label: 'newest' })]);
    const after = await bus.replay(a);
    expect(after.messages).toHaveLength(LIVE_BUFFER);
    expect(after.messages[0]?.id).toBe(ids[2]);
    expect(after.messages.at(-1)?.id).toBe(newest);
  });

  it('replay with maxBatches reads page by page: each page after the last message of the one before, the same messages in all', async () => {
    const a = agent();
    // batches of 1, 2 and 3 items
    for (let i = 0; i < 250; i++)
      await bus.publish(
        a,
        Array.from({ length: 1 + (i % 3) }, (_, k) => data(`p${i}.${k}`)),
      );
    const whole = await bus.replay(a);
    expect(whole.complete).toBe(true);

    const paged: LiveMessage[] = [];
    let afterId: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await bus.replay(a, afterId, 100);
      pages++;
      if (afterId !== undefined) expect(page.resumed).toBe(true);
      // a page is at most 100 batches (a batch's first item starts one)
      expect(page.messages.filter((m) => m.id.split('-').length === 2).length).toBeLessThanOrEqual(
        100,
      );
      paged.push(...page.messages);
      if (page.complete) break;
      expect(page.messages.length).toBeGreaterThan(0);
      afterId = page.messages.at(-1)?.id;
    }
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(pages).toBeLessThanOrEqual(4);
    expect(paged).toEqual(whole.messages);

    // resuming in the middle of a batch: its rest, then at most maxBatches more
    const third = await bus.publish(a, [data('x0'), data('x1'), data('x2')]);
    await bus.publish(a, [data('y0')]);
    await bus.publish(a, [data('z0')]);
    const mid = await bus.replay(a, third[0], 1);
    expect(mid.resumed).toBe(true);
    expect(mid.complete).toBe(false);
    expect(mid.messages.map((m) => m.id)).toEqual([third[1], third[2], expect.any(String)]);
    const last = await bus.replay(a, mid.messages.at(-1)?.id, 1);
    expect(last.messages.map((m) => JSON.parse(m.data).label)).toEqual(['z0']);
  });

  it('replay while batches are being published returns an unbroken run from the oldest, with every batch published before it', async () => {
    const a = agent();
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) ids.push(...(await bus.publish(a, [data(`before${i}`)])));
    const publishing = (async () => {
      for (let i = 0; i < 200; i++) ids.push(...(await bus.publish(a, [data(`during${i}`)])));
    })();
    const replay = await bus.replay(a);
    await publishing;
    const replayed = replay.messages.map((m) => m.id);
    expect(replayed.length).toBeGreaterThanOrEqual(300);
    // a prefix of everything published: nothing skipped between pages, nothing twice
    expect(replayed).toEqual(ids.slice(0, replayed.length));
  });

  it('a batch is one buffer entry: its items have ids E, E-1, E-2, and resume item by item', async () => {
    const a = agent();
    const [single] = await bus.publish(a, [data('single')]);
    const batch = await bus.publish(a, ['b0', 'b1', 'b2'].map(data));
    const entry = batch[0] as string;
    // the first item's id is the entry's id, of the same form as a single-item batch's
    expect(entry).toMatch(/^\d+-\d+$/);
    expect(single).toMatch(/^\d+-\d+$/);
    expect(batch).toEqual([entry, `${entry}-1`, `${entry}-2`]);
    // a listener joining now gets nothing of that batch, only what follows
    const late = recorder();
    await subscribe(a, late);
    const later = [
      ...(await bus.publish(a, [data('l0')])),
      ...(await bus.publish(a, [data('l1')])),
    ];
    expectIncreasing([single as string, ...batch, ...later]);

    const afterSecond = await bus.replay(a, `${entry}-1`);
    expect(afterSecond.resumed).toBe(true);
    expect(afterSecond.messages.map((m) => m.id)).toEqual([`${entry}-2`, ...later]);
    expect(labels(afterSecond.messages)).toEqual(['b2', 'l0', 'l1']);
    const afterFirst = await bus.replay(a, entry);
    expect(afterFirst.resumed).toBe(true);
    expect(labels(afterFirst.messages)).toEqual(['b1', 'b2', 'l0', 'l1']);
    const afterLastItem = await bus.replay(a, `${entry}-2`);
    expect(afterLastItem).toMatchObject({ resumed: true });
    expect(afterLastItem.messages.map((m) => m.id)).toEqual(later);
    // an item the batch does not have was never an id: the full replay
    const beyond = await bus.replay(a, `${entry}-3`);
    expect(beyond.resumed).toBe(false);
    expect(labels(beyond.messages)).toEqual(['single', 'b0', 'b1', 'b2', 'l0', 'l1']);

    await until(() => late.messages.length >= 2, 'the later batches');
    await sleep(QUIET_MS);
    expect(late.messages.map((m) => m.id)).toEqual(later);
  });

  it(`a batch of ${LIVE_BUFFER} items does not evict the batches before it`, async () => {
    const a = agent();
    const earlier: string[] = [];
    for (let i = 0; i < 5; i++) earlier.push(...(await bus.publish(a, [data(`e${i}`)])));
    const big = await bus.publish(
      a,
      Array.from({ length: LIVE_BUFFER }, (_, i) => data(`big${i}`)),
    );
    expect(big).toHaveLength(LIVE_BUFFER);
    const replay = await bus.replay(a);
    expect(replay.messages).toHaveLength(5 + LIVE_BUFFER);
    expect(replay.messages.map((m) => m.id)).toEqual([...earlier, ...big]);
    expect(labels(replay.messages.slice(0, 6))).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'big0']);
    // and the cap still counts batches: 996 more single-item batches evict exactly the first 2
    for (let i = 0; i < LIVE_BUFFER - 4; i++) await bus.publish(a, [data(`f${i}`)]);
    const capped = await bus.replay(a);
    expect(capped.messages).toHaveLength(3 + LIVE_BUFFER + LIVE_BUFFER - 4);
    expect(labels(capped.messages.slice(0, 4))).toEqual(['e2', 'e3', 'e4', 'big0']);
  });

  it('subscribe delivers, in order, only what is published after it resolves, to every listener of that agent and no other', async () => {
    const a = agent();
    const b = agent();
    await bus.publish(a, [data('before')]);
    const first = recorder();
    const second = recorder();
    const otherAgent = recorder();
    await subscribe(a, first);
    await subscribe(a, second);
    await subscribe(b, otherAgent);

    const published: LiveMessage[] = [];
    const publish = async (agentId: string, names: string[]) => {
      const payloads = names.map(data);
      const ids = await bus.publish(agentId, payloads);
      if (agentId === a)
        ids.forEach((id, i) => published.push({ id, data: payloads[i] as string }));
      return ids;
    };
    for (let i = 0; i < 10; i++) await publish(a, [`m${i}`]);
    await publish(a, ['m10', 'm11', 'm12']);
    const [forB] = await publish(b, ['for b']);
    // concurrent publishes still reach listeners in id order
    await Promise.all(Array.from({ length: 10 }, (_, i) => publish(a, [`c${i}`])));
    published.sort((x, y) => compareMessageIds(x.id, y.id));

    await until(() => first.messages.length >= published.length, 'the first listener');
    await until(() => second.messages.length >= published.length, 'the second listener');
    await until(() => otherAgent.messages.length >= 1, "the other agent's listener");
    await sleep(QUIET_MS);
    expect(first.messages).toEqual(published);
    expect(second.messages).toEqual(published);
    expect(otherAgent.messages.map((m) => m.id)).toEqual([forB]);
    expect(labels(otherAgent.messages)).toEqual(['for b']);
  });

  it('a listener joining an agent that is already watched gets nothing published before it joined', async () => {
    const a = agent();
    const early = recorder();
    await subscribe(a, early);
    const missed: string[] = [];
    const late: ReturnType<typeof recorder>[] = [];
    // repeated, so a race between the join and a delivery in flight shows up
    for (let i = 0; i < 10; i++) {
      missed.push(...(await bus.publish(a, [data(`before-${i}`)])));
      const listener = recorder();
      await subscribe(a, listener);
      late.push(listener);
    }
    const [after] = await bus.publish(a, [data('after')]);
    for (const listener of late) await until(() => listener.messages.length >= 1, 'delivery');
    await until(() => early.messages.length >= 11, 'the early listener');
    await sleep(QUIET_MS);
    expect(early.messages.map((m) => m.id)).toEqual([...missed, after]);
    late.forEach((listener, i) => {
      const expected = [...missed.slice(i + 1), after];
      expect(
        listener.messages.map((m) => m.id),
        `listener that joined after ${i + 1}`,
      ).toEqual(expected);
    });
  });

  it('unsubscribe stops delivery to that listener only, and is idempotent', async () => {
    const a = agent();
    const leaving = recorder();
    const staying = recorder();
    const leave = await subscribe(a, leaving);
    const stay = await subscribe(a, staying);
    const [m1] = await bus.publish(a, [data('m1')]);
    await until(() => leaving.messages.length === 1 && staying.messages.length === 1, 'm1');

    leave.unsubscribe();
    leave.unsubscribe();
    const [m2] = await bus.publish(a, [data('m2')]);
    await until(() => staying.messages.length === 2, 'm2 to the listener that stayed');
    await sleep(QUIET_MS);
    expect(leaving.messages.map((m) => m.id)).toEqual([m1]);
    expect(staying.messages.map((m) => m.id)).toEqual([m1, m2]);

    // the last listener leaves: nothing is delivered, and a new subscription starts afresh
    stay.unsubscribe();
    stay.unsubscribe();
    await bus.publish(a, [data('m3')]);
    const next = recorder();
    await subscribe(a, next);
    const [m4] = await bus.publish(a, [data('m4')]);
    await until(() => next.messages.length === 1, 'm4 to the new listener');
    await sleep(QUIET_MS);
    expect(leaving.messages.map((m) => m.id)).toEqual([m1]);
    expect(staying.messages.map((m) => m.id)).toEqual([m1, m2]);
    expect(next.messages.map((m) => m.id)).toEqual([m4]);
    // the buffer is not affected by who listens
    expect(labels((await bus.replay(a)).messages)).toEqual(['m1', 'm2', 'm3', 'm4']);
  });

  it('close is idempotent, prompt with subscriptions open, and safe to call concurrently', async () => {
    const own = await newBus();
    const a = agent();
    const listener = recorder();
    const subscription = await own.subscribe(a, listener);
    await own.publish(a, [data('m1')]);
    await until(() => listener.messages.length === 1, 'm1');
    const started = Date.now();
    await Promise.all([own.close(), own.close()]);
    await own.close();
    expect(Date.now() - started).toBeLessThan(1_000);
    subscription.unsubscribe();
    subscription.unsubscribe();
  });
});
