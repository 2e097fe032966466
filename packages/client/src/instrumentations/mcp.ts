import type { McpCallPayload } from '@flightlog/protocol';
import type { FlightlogSession } from '../session-types.js';
import { field, text, type ObserveOptions } from './llm-payload.js';
import { proxyTree, type Instrumented } from './method-proxy.js';
import { beginStep, instrumentCall, watchPromise, isNativePromise } from './observed-step.js';

export type { ObserveOptions } from './llm-payload.js';

/** Options of {@link observeMcpClient}. */
export interface ObserveMcpOptions extends ObserveOptions {
  /** The server's name in the events. Default: the name the server gave when connecting. */
  server?: string;
}

/** The client methods recorded, and the MCP method each sends. */
const METHODS = {
  callTool: 'tools/call',
  readResource: 'resources/read',
  getPrompt: 'prompts/get',
  complete: 'completion/complete',
  listTools: 'tools/list',
  listResources: 'resources/list',
  listResourceTemplates: 'resources/templates/list',
  listPrompts: 'prompts/list',
} as const;

/**
 * Records the requests an MCP client (`@modelcontextprotocol/sdk`'s `Client`) sends — tool
 * calls, resource reads, prompt gets, completions and listings — as `mcp_call` events in
 * `session`: `{server, method, tool?, input, output}`. A tool call whose result says `isError`
 * is recorded as an error with the result's text; a protocol error (an `McpError` thrown) too.
 * Returns a client that behaves exactly like `client` (same types, results, errors, `this`),
 * which is left unchanged. Never throws.
 *
 * ```ts
 * const mcp = observeMcpClient(client, session);
 * await mcp.callTool({ name: 'get_balance', arguments: { wallet } });
 * ```
 */
export function observeMcpClient<C extends object>(
  client: C,
  session: FlightlogSession,
  options?: ObserveMcpOptions,
): C {
  try {
    const capture = readCapture(options);
    const serverOption = readServer(options);
    const serverName = () => serverOption ?? nameOf(client);
    const methods: Record<string, Instrumented> = {};
    for (const [name, method] of Object.entries(METHODS))
      methods[name] = (original, thisArg, args) =>
        recordMcpCall(session, method, serverName, capture, original, thisArg, args);
    // The client's own methods run on the client itself (private state; callTool's request goes
    // to this.request, unrecorded): one event per call.
    return proxyTree(client, { methods });
  } catch {
    return client;
  }
}

function recordMcpCall(
  session: FlightlogSession,
  method: string,
  serverName: () => string,
  capture: boolean,
  original: CallableFunction,
  thisArg: unknown,
  args: unknown[],
): unknown {
  const params = args[0];
  const build = (output: unknown) => (): McpCallPayload => {
    const payload: McpCallPayload = { server: serverName(), method };
    const tool = method === 'tools/call' ? field(params, 'name') : undefined;
    if (typeof tool === 'string') payload.tool = tool;
    if (method === 'prompts/get') payload.prompt = text(field(params, 'name'));
    if (method === 'resources/read') payload.uri = text(field(params, 'uri'));
    if (capture) {
      const input = method === 'tools/call' ? field(params, 'arguments') : params;
      if (input !== undefined) payload.input = input;
      if (output !== undefined) payload.output = output;
    } else payload.captured = false;
    return payload;
  };
  return instrumentCall(
    () => beginStep(session, 'mcp_call'),
    () => Reflect.apply(original, thisArg, args),
    (step, result) => {
      if (!isNativePromise(result)) {
        step.ok(build(undefined));
        return;
      }
      watchPromise(
        result,
        (value) => {
          const failure = method === 'tools/call' ? toolError(value) : undefined;
          if (failure === undefined) step.ok(build(value));
          else step.fail(build(value), new Error(failure));
        },
        (error) => step.fail(build(undefined), error),
      );
    },
    (step, error) => step.fail(build(undefined), error),
  );
}

/** The message of a tool result that reports an error (`isError: true`): its text content. */
function toolError(result: unknown): string | undefined {
  if (field(result, 'isError') !== true) return undefined;
  const content = field(result, 'content');
  const message = Array.isArray(content)
    ? content
        .map((part) => (field(part, 'type') === 'text' ? text(field(part, 'text')) : ''))
        .filter((part) => part !== '')
        .join('\n')
    : '';
  return message === '' ? 'the tool reported an error' : message;
}

function nameOf(client: object): string {
  try {
    const version = (client as { getServerVersion?: () => unknown }).getServerVersion?.();
    return text(field(version, 'name'), 'unknown');
  } catch {
    return 'unknown';
  }
}

function readCapture(options: unknown): boolean {
  try {
    return field(options, 'capture') !== false;
  } catch {
    return true;
  }
}

function readServer(options: unknown): string | undefined {
  try {
    const server = field(options, 'server');
    return typeof server === 'string' && server !== '' ? server : undefined;
  } catch {
    return undefined;
  }
}
