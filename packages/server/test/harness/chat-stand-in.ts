import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the stand-in answers one request. */
export type ChatBehaviour =
  | { kind: 'answer'; content: string; delayMs?: number }
  | { kind: 'status'; status: number }
  /** Never answers (until the stand-in closes). */
  | { kind: 'hang' }
  /** A 200 with this body as sent. */
  | { kind: 'raw'; body: string };

export interface RecordedChatRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: any;
  /** The raw body size in bytes. */
  bytes: number;
}

/**
 * A local HTTP server speaking the OpenAI chat-completions format: the one stand-in the tests
 * use for the LLM analyzer's endpoint. It records every request.
 */
export interface ChatStandIn {
  /** Base URL to configure (`{base}/chat/completions` is what is called). */
  baseUrl: string;
  requests: RecordedChatRequest[];
  /** Sets how the next requests are answered. */
  behave(behaviour: ChatBehaviour): void;
  /** Resolves when `n` requests have arrived. */
  received(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startChatStandIn(initial: ChatBehaviour): Promise<ChatStandIn> {
  let behaviour = initial;
  const requests: RecordedChatRequest[] = [];
  let waiters: { n: number; resolve: () => void }[] = [];
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      body = raw.toString('utf8');
    }
    requests.push({
      method: req.method ?? '',
      path: req.url ?? '',
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      body,
      bytes: raw.byteLength,
    });
    waiters = waiters.filter((w) => (requests.length >= w.n ? (w.resolve(), false) : true));
    const current = behaviour;
    switch (current.kind) {
      case 'hang':
        return;
      case 'status':
        res.writeHead(current.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'stand-in failure' } }));
        return;
      case 'raw':
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(current.body);
        return;
      case 'answer':
        if (current.delayMs) await new Promise((r) => setTimeout(r, current.delayMs));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'chatcmpl-standin',
            object: 'chat.completion',
            created: Math.floor(Date.now() / 1000),
            model: (body as { model?: string }).model ?? 'unknown',
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: current.content },
                finish_reason: 'stop',
              },
            ],
            usage: { prompt_tokens: 100, completion_tokens: 50, total_tokens: 150 },
          }),
        );
    }
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    behave(next) {
      behaviour = next;
    },
    received(n, timeoutMs = 20_000) {
      if (requests.length >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`stand-in: ${requests.length} of ${n} requests`)),
          timeoutMs,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
