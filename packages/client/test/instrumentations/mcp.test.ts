import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { observeMcpClient } from '../../src/instrumentations/mcp.js';
import { failingSessions } from '../harness/failing-sessions.js';
import { recordedSession } from '../harness/recorded-session.js';

/** A real MCP server and client, linked in memory. */
async function connected(more?: (server: McpServer) => void) {
  const server = new McpServer({ name: 'solana-mcp', version: '1.0.0' });
  more?.(server);
  server.registerTool(
    'get_balance',
    { description: 'Balance of a wallet', inputSchema: { wallet: z.string() } },
    async ({ wallet }) => {
      await new Promise((r) => setTimeout(r, 2));
      return { content: [{ type: 'text', text: `${wallet}: 3 SOL` }] };
    },
  );
  server.registerTool('refuse', { description: 'Always fails' }, async () => ({
    content: [{ type: 'text', text: 'wallet is locked' }],
    isError: true,
  }));
  server.registerTool('crash', { description: 'Throws' }, async () => {
    throw new Error('handler crashed');
  });
  server.registerResource('config', 'config://app', { mimeType: 'text/plain' }, async (uri) => ({
    contents: [{ uri: uri.href, text: 'cluster=devnet' }],
  }));
  server.registerPrompt('greet', { argsSchema: { who: z.string() } }, ({ who }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Hello ${who}` } }],
  }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'agent', version: '1.0.0' });
  await client.connect(clientSide);
  opened.push(client, server);
  return client;
}
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((o) => o.close()));
});

describe('observeMcpClient', () => {
  it('records a call whose payload is over maxEventBytes with a truncation marker, not dropped', async () => {
    const client = await connected((server) =>
      server.registerTool('dump', { description: 'A big answer' }, async () => ({
        content: [{ type: 'text', text: 'x'.repeat(4_000) }],
      })),
    );
    const recorded = recordedSession({ maxEventBytes: 1_024 });
    await observeMcpClient(client, recorded.session).callTool({ name: 'dump' });
    const [event, ...more] = await recorded.events();
    expect(more).toEqual([]);
    expect(event).toMatchObject({ type: 'mcp_call', status: 'ok' });
    expect(event?.payload).toMatchObject({ truncated: true });
    expect(recorded.client.stats().invalidEvents).toBe(0);
  });

  it('records the call as it happened, whatever the caller does with its objects next', async () => {
    // The event waits for the next turn of the event loop, its payload copied when the call
    // ended: the caller reusing its arguments or editing the result changes nothing recorded.
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    const request = { name: 'get_balance', arguments: { wallet: 'abc' } };
    const result = await mcp.callTool(request);
    request.arguments.wallet = 'reused';
    (result.content as { text: string }[])[0]!.text = 'edited afterwards';
    recorded.session.end();
    const [event, ...more] = await recorded.events();
    expect(more).toEqual([]);
    expect(event?.payload).toMatchObject({
      input: { wallet: 'abc' },
      output: { content: [{ type: 'text', text: 'abc: 3 SOL' }] },
    });
  });

  it('tells a call that ends after the session ended as such, though its payload would be refused', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 70; i++) deep = { d: deep };
    const call = mcp.callTool({ name: 'get_balance', arguments: { wallet: 'abc', deep } });
    recorded.session.end();
    await call.catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
    expect(recorded.logger.matching('after the session ended').length).toBeGreaterThan(0);
    expect(recorded.logger.matching('nests deeper')).toHaveLength(0);
    expect(recorded.client.stats().invalidEvents).toBe(0);
  });

  it('records a tool call as mcp_call with the same result as the unwrapped client', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    const request = { name: 'get_balance', arguments: { wallet: 'abc' } };
    const plain = await client.callTool(request);
    const wrapped = await mcp.callTool(request);
    expect(recorded.client.stats().recordedEvents).toBe(1);
    expect(wrapped).toEqual(plain);
    const events = await recorded.events();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'mcp_call', status: 'ok', parentEventId: null });
    expect(events[0]?.durationMs).toBeGreaterThanOrEqual(1);
    expect(events[0]?.payload).toEqual({
      server: 'solana-mcp',
      method: 'tools/call',
      tool: 'get_balance',
      input: { wallet: 'abc' },
      output: { content: [{ type: 'text', text: 'abc: 3 SOL' }] },
    });
  });

  it('records a tool result with isError, a throwing handler and a protocol error as errors, unchanged for the caller', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    const refused = await mcp.callTool({ name: 'refuse', arguments: {} });
    expect(refused).toEqual(await client.callTool({ name: 'refuse', arguments: {} }));
    const crashed = await mcp.callTool({ name: 'crash', arguments: {} });
    expect(crashed.isError).toBe(true);
    const plainError = await client
      .callTool({ name: 'get_balance', arguments: { wallet: 42 } })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    const wrappedError = await mcp
      .callTool({ name: 'get_balance', arguments: { wallet: 42 } })
      .then(
        (r) => r,
        (e: unknown) => e,
      );
    expect(String(wrappedError)).toBe(String(plainError));
    const unknownTool = await mcp.callTool({ name: 'nope' }).catch((e: unknown) => e);
    const events = await recorded.events();
    expect(events.map((e) => e.status)).toEqual(['error', 'error', 'error', 'error']);
    expect(events[0]?.errorMessage).toBe('wallet is locked');
    expect(events[1]?.errorMessage).toContain('handler crashed');
    if (unknownTool instanceof McpError) expect(events[3]?.errorMessage).toBe(unknownTool.message);
    else expect(events[3]?.payload).toMatchObject({ tool: 'nope' });
  });

  it('records resources, prompts and listings with their MCP method; capture: false keeps data out', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session, { server: 'wallet-server' });
    const resource = await mcp.readResource({ uri: 'config://app' });
    expect(resource.contents[0]).toMatchObject({ text: 'cluster=devnet' });
    await mcp.getPrompt({ name: 'greet', arguments: { who: 'Ada' } });
    const tools = await mcp.listTools();
    expect(tools.tools.map((t) => t.name).sort()).toEqual(['crash', 'get_balance', 'refuse']);
    const quiet = observeMcpClient(client, recorded.session, { capture: false });
    await quiet.callTool({ name: 'get_balance', arguments: { wallet: 'secret-wallet' } });
    const events = await recorded.events();
    expect(events.map((e) => (e.payload as { method: string }).method)).toEqual([
      'resources/read',
      'prompts/get',
      'tools/list',
      'tools/call',
    ]);
    expect(events[0]?.payload).toMatchObject({ server: 'wallet-server', uri: 'config://app' });
    expect(events[1]?.payload).toMatchObject({ prompt: 'greet', input: { name: 'greet' } });
    expect(events[3]?.payload).toEqual({
      server: 'solana-mcp',
      method: 'tools/call',
      tool: 'get_balance',
      captured: false,
    });
  });

  it('records concurrent calls once each, nested under the step they run in', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    await recorded.session.timed(
      'tool_call',
      () =>
        Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            mcp.callTool({ name: 'get_balance', arguments: { wallet: `w${i}` } }),
          ),
        ),
      () => ({ name: 'check wallets' }),
    );
    const events = await recorded.events();
    const outer = events.find((e) => e.type === 'tool_call');
    const calls = events.filter((e) => e.type === 'mcp_call');
    expect(calls).toHaveLength(10);
    expect(
      new Set(calls.map((e) => (e.payload as { input: { wallet: string } }).input.wallet)).size,
    ).toBe(10);
    for (const call of calls) expect(call.parentEventId).toBe(outer?.id);
  });

  it('keeps the client as it was: instanceof, other methods, the original unrecorded', async () => {
    const client = await connected();
    const recorded = recordedSession();
    const mcp = observeMcpClient(client, recorded.session);
    expect(mcp).toBeInstanceOf(Client);
    expect(mcp.getServerVersion()).toEqual(client.getServerVersion());
    await mcp.ping();
    await client.callTool({ name: 'get_balance', arguments: { wallet: 'x' } });
    expect(await recorded.events()).toEqual([]);
  });
});

describe('observeMcpClient: failures of its own', () => {
  it('never throws into the host: when its own recording fails, calls give what they give unwrapped', async () => {
    const client = await connected((server) => {
      server.registerTool(
        'depth',
        { description: 'How deep its argument nests', inputSchema: { data: z.unknown() } },
        async ({ data }) => {
          let depth = 0;
          for (
            let at: unknown = data;
            typeof at === 'object' && at !== null;
            at = Object.values(at)[0]
          )
            depth += 1;
          return { content: [{ type: 'text', text: `depth ${depth}` }] };
        },
      );
    });
    const request = { name: 'get_balance', arguments: { wallet: 'abc' } };
    const plain = await client.callTool(request);
    const plainError = await client.callTool({ name: 'missing' }).catch((e: unknown) => e);
    // Arguments nesting past the 64 levels the service stores: the client refuses the payload.
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 70; i++) deep = { level: deep };
    const deepRequest = { name: 'depth', arguments: { data: deep } };
    const plainDeep = await client.callTool(deepRequest);
    expect(plainDeep.content).toEqual([{ type: 'text', text: 'depth 71' }]);
    const refusing = recordedSession();
    const failing = [
      ...failingSessions(),
      {
        name: 'a payload the client refuses',
        session: refusing.session,
        failedAsExpected() {
          expect(refusing.client.stats()).toMatchObject({ recordedEvents: 2, invalidEvents: 1 });
          expect(refusing.logger.matching('nests deeper than 64 levels')).toHaveLength(1);
        },
      },
    ];
    for (const { name, session, failedAsExpected } of failing) {
      const mcp = observeMcpClient(client, session);
      expect(await mcp.callTool(request), name).toEqual(plain);
      expect(await mcp.callTool(deepRequest), name).toEqual(plainDeep);
      const error = await mcp.callTool({ name: 'missing' }).catch((e: unknown) => e);
      expect(error, name).toEqual(plainError);
      expect(error, name).toBeInstanceOf((plainError as object).constructor);
      failedAsExpected();
    }
  });
});
