import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FlightlogClient, HttpTransport, type Transport } from '@flightlog/client';
import {
  describeEngines,
  disposeLocation,
  freshLocation,
  RecordingLogger,
  type EngineLocation,
} from '@flightlog/test-support';
import { startRealServer, type RealServer } from './harness/real-server.js';

/** What a tool gets from the web: JSON.parse keeps `__proto__` as an own key (no prototype set). */
const fromTheWeb = () =>
  JSON.parse(
    '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "ok": 1}',
  ) as Record<string, unknown>;

describeEngines(
  '__proto__ and constructor.prototype keys in payloads, client to the real service [%s]',
  (engine) => {
    let server: RealServer;
    let location: EngineLocation;
    beforeAll(async () => {
      location = freshLocation(engine);
      // a 2 KiB threshold sends the big batch below through the body-parse workers as well
      server = await startRealServer(
        { http: { largeBodyBytes: 2_048, largeBodyWorkers: 1 } },
        location,
      );
    });
    afterAll(async () => {
      await server.close();
      await disposeLocation(location);
    });

    it('are stored as data: every event of every session arrives, the keys come back as sent, no prototype changes', async () => {
      const agent = await server.createAgent();
      const logger = new RecordingLogger();
      const client = new FlightlogClient({
        apiKey: agent.apiKey,
        ingestUrl: server.url,
        logger,
        flushIntervalMs: 60_000,
      });
      const sessions = Array.from({ length: 20 }, (_, i) =>
        client.startSession({ inputSummary: `run ${i}` }),
      );
      for (const session of sessions) session.toolCall({ name: 'fine', output: { n: 1 } });
      const odd = client.startSession({ inputSummary: 'tool output from the web' });
      odd.toolCall({ name: 'fetch', output: fromTheWeb() });
      odd.custom({ name: 'nested', data: { deep: [fromTheWeb()] } });
      odd.custom({ name: 'small', data: fromTheWeb() });
      for (const session of [...sessions, odd]) session.end();
      expect(await client.close()).toEqual({ timedOut: false });
      expect(client.stats()).toMatchObject({
        deliveredEvents: 23,
        droppedEvents: 0,
        failedBatches: 0,
      });
      expect(logger.lines).toEqual([]);

      const { status, body } = await server.readTrace(agent.agentId, odd.traceId);
      expect(status).toBe(200);
      const output = body.events[0]?.payload.output as Record<string, unknown>;
      expect(Object.keys(output)).toEqual(['__proto__', 'constructor', 'ok']);
      expect(Object.getOwnPropertyDescriptor(output, '__proto__')?.value).toEqual({
        polluted: true,
      });
      expect(Object.getPrototypeOf(output)).toBe(Object.prototype);
      expect(JSON.stringify(body.events[1]?.payload)).toBe(
        JSON.stringify({ name: 'nested', data: { deep: [fromTheWeb()] } }),
      );
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      for (const session of sessions)
        expect((await server.readTrace(agent.agentId, session.traceId)).body.events).toHaveLength(
          1,
        );
    });

    it('outside payloads they are refused with a 400 naming the field', async () => {
      const agent = await server.createAgent();
      const batch = (extra: string, where: 'event' | 'trace' | 'body', pad = 0) => {
        const id =
          '01JPROTO0000000000000000' + (where === 'event' ? 'EV' : where === 'trace' ? 'TR' : 'BD');
        const trace = `{"id":"${id}","agentId":"a","status":"running","startedAt":"2026-01-01T00:00:00Z","inputSummary":"${'x'.repeat(pad + 1)}","tags":[],"eventCount":1,"totalTokens":0,"totalCostUsd":"0","totalLamports":"0","chainTxCount":0,"toolsCalled":[]${where === 'trace' ? `,${extra}` : ''}}`;
        const event = `{"id":"${id}E1","traceId":"${id}","sequence":0,"type":"custom","startedAt":"2026-01-01T00:00:00Z","status":"ok","payloadEncrypted":false,"payload":{"name":"x"}${where === 'event' ? `,${extra}` : ''}}`;
        return `{"batchId":"01JPROTOBATCH00000000000${where === 'event' ? 'E' : where === 'trace' ? 'T' : 'B'}0","items":[{"trace":${trace},"events":[${event}]}]${where === 'body' ? `,${extra}` : ''}}`;
      };
      const post = async (text: string) => {
        const response = await fetch(`${server.url}/v1/traces/batch`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${agent.apiKey}`,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
          },
          body: gzipSync(text),
        });
        return {
          status: response.status,
          body: (await response.json()) as { type: string; errors?: { pointer: string }[] },
        };
      };
      const cases: [string, 'event' | 'trace' | 'body', string][] = [
        ['"__proto__":{"polluted":true}', 'event', '/items/0/events/0/__proto__'],
        [
          '"constructor":{"prototype":{"polluted":true}}',
          'event',
          '/items/0/events/0/constructor/prototype',
        ],
        ['"__proto__":{"polluted":true}', 'trace', '/items/0/trace/__proto__'],
        ['"__proto__":{"polluted":true}', 'body', '/__proto__'],
      ];
      // each small (parsed in line) and padded past 2 KiB (parsed by a body-parse worker)
      for (const pad of [0, 4_000])
        for (const [extra, where, pointer] of cases) {
          const answer = await post(batch(extra, where, pad));
          expect(answer.status, JSON.stringify(answer.body)).toBe(400);
          expect(answer.body.type).toBe('urn:flightlog:problem:validation-failed');
          expect(answer.body.errors?.map((e) => e.pointer)).toEqual([pointer]);
        }
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('such a 400 costs the named event only: the client drops it and the rest of the batch is stored', async () => {
      const agent = await server.createAgent();
      // Between the client and the service, one event's envelope gets a `__proto__` key on the
      // first request: what a broken proxy or an older client could send.
      const http = new HttpTransport({
        ingestUrl: server.url,
        apiKey: agent.apiKey,
        timeoutMs: 10_000,
        userAgent: 'test',
      });
      let tampered = 0;
      const transport: Transport = {
        sendBatch(body, signal) {
          if (tampered++ > 0) return http.sendBatch(body, signal);
          const text = gunzipSync(body).toString('utf8');
          const marked = text.replace(
            /("payload":\{"name":"victim")/,
            '"__proto__":{"polluted":true},$1',
          );
          expect(marked).not.toBe(text);
          return http.sendBatch(gzipSync(marked), signal);
        },
        complete: (traceId, body, signal) => http.complete(traceId, body, signal),
      };
      const logger = new RecordingLogger();
      const client = new FlightlogClient(
        { apiKey: agent.apiKey, ingestUrl: server.url, logger, flushIntervalMs: 60_000 },
        { transport },
      );
      const sessions = Array.from({ length: 5 }, (_, i) =>
        client.startSession({ inputSummary: `run ${i}` }),
      );
      for (const session of sessions) session.custom({ name: 'kept' });
      sessions[2]!.custom({ name: 'victim' });
      for (const session of sessions) session.end();
      expect(await client.close()).toEqual({ timedOut: false });
      expect(client.stats()).toMatchObject({ deliveredEvents: 5, droppedEvents: 1 });
      expect(logger.matching('with 400')).toHaveLength(1);
      for (const session of sessions) {
        const { body } = await server.readTrace(agent.agentId, session.traceId);
        expect(body.trace.status).toBe('completed');
        expect(body.events.map((e) => e.payload.name)).toEqual(['kept']);
      }
    });
  },
);
