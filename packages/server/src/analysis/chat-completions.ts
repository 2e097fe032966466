/*
 * One call to an OpenAI-compatible chat-completions endpoint (`POST {base}/chat/completions`).
 * Every way it can go wrong is an outcome with a reason fit to store and show: the reason never
 * contains the API key, the prompt or the endpoint's answer body.
 */

export interface ChatEndpoint {
  /** e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  baseUrl: string;
  model: string;
  apiKey: string | undefined;
  timeoutMs: number;
}

export interface ChatMessage {
  role: 'system' | 'user';
  content: string;
}

export type ChatOutcome = { ok: true; content: string } | { ok: false; reason: string };

/** Answers larger than this are refused rather than read into memory. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export function chatCompletionsUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/chat/completions`;
}

/** Reads a response body up to `limit` bytes; undefined past it. */
async function readBounded(response: Response, limit: number): Promise<string | undefined> {
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function contentOf(answer: unknown): string | undefined {
  if (typeof answer !== 'object' || answer === null) return undefined;
  const choices = (answer as { choices?: unknown }).choices;
  if (!Array.isArray(choices) || choices.length === 0) return undefined;
  const message = (choices[0] as { message?: unknown } | null)?.message;
  if (typeof message !== 'object' || message === null) return undefined;
  const content = (message as { content?: unknown }).content;
  return typeof content === 'string' && content.trim().length > 0 ? content : undefined;
}

/** Asks for one completion; never throws. `signal` aborts it early (shutdown). */
export async function requestChatCompletion(
  endpoint: ChatEndpoint,
  messages: ChatMessage[],
  signal: AbortSignal,
): Promise<ChatOutcome> {
  const timeout = AbortSignal.timeout(endpoint.timeoutMs);
  try {
    const response = await fetch(chatCompletionsUrl(endpoint.baseUrl), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        ...(endpoint.apiKey ? { authorization: `Bearer ${endpoint.apiKey}` } : {}),
      },
      body: JSON.stringify({ model: endpoint.model, messages, temperature: 0.2 }),
      signal: AbortSignal.any([timeout, signal]),
      redirect: 'error',
    });
    if (!response.ok) {
      await response.body?.cancel().catch(() => {});
      return { ok: false, reason: `the endpoint answered HTTP ${response.status}` };
    }
    const text = await readBounded(response, MAX_ANSWER_BYTES);
    if (text === undefined)
      return { ok: false, reason: `the answer is larger than ${MAX_ANSWER_BYTES} bytes` };
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      return { ok: false, reason: 'the answer is not JSON' };
    }
    const content = contentOf(answer);
    if (content === undefined)
      return { ok: false, reason: 'the answer has no choices[0].message.content text' };
    return { ok: true, content };
  } catch (error) {
    if (timeout.aborted)
      return {
        ok: false,
        reason: `no answer within ANALYSIS_LLM_TIMEOUT_MS (${endpoint.timeoutMs} ms)`,
      };
    if (signal.aborted) return { ok: false, reason: 'the worker stopped before the answer' };
    const cause = (error as { cause?: { code?: unknown } }).cause;
    const code = typeof cause?.code === 'string' ? ` (${cause.code})` : '';
    return { ok: false, reason: `the request failed${code}` };
  }
}
