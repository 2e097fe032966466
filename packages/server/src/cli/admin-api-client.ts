import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { CreateAgentOutcome, CreatedAgent } from '../agents/agent-admin.js';
import type { LifecycleSettings, LifecycleSettingsChange } from '../lifecycle/agent-settings.js';
import type { MemberRole } from '../store/agent-store.js';
import type { Administration, RunShareOutcome } from './administration.js';
import { RunningServerError } from './running-server.js';

/** Longest wait for one answer: an admin request is one or two statements. */
const REQUEST_TIMEOUT_MS = 30_000;

/** What the CLI reads of a problem+json answer. */
interface Problem {
  type?: string;
  detail?: unknown;
  errors?: { pointer?: unknown; detail?: unknown }[];
}

/** The server answered something the command has no outcome for (exit 1 with its detail). */
export class AdminApiError extends Error {
  override name = 'AdminApiError';
}

/** The admin token to send, and what it is, for the message when it is refused. */
export interface AdminCredential {
  token: string;
  source: 'admin-token' | 'local-secret';
}

interface Answer {
  status: number;
  body: unknown;
  text: string;
}

/**
 * Administration through the admin API of the server running on `DATA_DIR` (node's fetch).
 * Each answer maps to the outcome the store would have given, so that the command prints the
 * same; a refused token says what to do, anything else unexpected shows the server's detail.
 */
export class AdminApiClient implements Administration {
  constructor(
    private readonly url: string,
    private readonly credential: AdminCredential,
    /** `the server running on DATA_DIR … (process N)`, for messages. */
    private readonly server: string,
  ) {}

  private async request(method: string, path: string, body?: unknown): Promise<Answer> {
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        method,
        headers: {
          authorization: `Bearer ${this.credential.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        redirect: 'error',
      });
    } catch (error) {
      throw new AdminApiError(
        `${this.server} did not answer at ${this.url}: ${(error as Error).message}`,
        { cause: error },
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed, text };
  }

  /** The error for an answer the command has no outcome for. */
  private unexpected(answer: Answer): Error {
    if (answer.status === 401)
      return new RunningServerError(
        this.credential.source === 'admin-token'
          ? `${this.server} refused ADMIN_TOKEN: set it to the server's, or stop the server`
          : `${this.server} refused the token derived from its local secret (the file changed ` +
              'since it started): restart the server',
      );
    const problem = (answer.body ?? {}) as Problem;
    const detail = typeof problem.detail === 'string' ? problem.detail : answer.text.slice(0, 200);
    const fields = (Array.isArray(problem.errors) ? problem.errors : [])
      .map((error) => `${String(error.pointer)} ${String(error.detail)}`)
      .join('; ');
    return new AdminApiError(
      `${this.server} answered ${answer.status}: ${detail}${fields ? ` (${fields})` : ''}`,
    );
  }

  /**
   * The agent's runs as NDJSON from the server's export route (`query` from
   * exportQueryString), or undefined when there is no such agent. Only the answer's head has a
   * deadline: the body streams as long as it takes.
   */
  async exportRuns(agentId: string, query: string): Promise<Readable | undefined> {
    const path = `/admin/v1/agents/${segment(agentId)}/export${query}`;
    const head = new AbortController();
    const deadline = setTimeout(
      () => head.abort(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
      REQUEST_TIMEOUT_MS,
    );
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        headers: { authorization: `Bearer ${this.credential.token}` },
        signal: head.signal,
        redirect: 'error',
      });
    } catch (error) {
      throw new AdminApiError(
        `${this.server} did not answer at ${this.url}: ${(error as Error).message}`,
        { cause: error },
      );
    } finally {
      clearTimeout(deadline);
    }
    if (response.status === 200 && response.body)
      return Readable.fromWeb(response.body as WebReadableStream);
    const text = await response.text();
    if (response.status === 404) return undefined;
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    throw this.unexpected({ status: response.status, body, text });
  }

  async createAgent(request: {
    id?: string | undefined;
    name?: string | undefined;
  }): Promise<CreateAgentOutcome> {
    const answer = await this.request('POST', '/admin/v1/agents', {
      ...(request.id === undefined ? {} : { id: request.id }),
      ...(request.name === undefined ? {} : { name: request.name }),
    });
    if (answer.status === 201) return { kind: 'created', agent: answer.body as CreatedAgent };
    if (answer.status === 409) return { kind: 'exists' };
    const problem = answer.body as Problem | undefined;
    if (answer.status === 400 && problem?.errors?.some((error) => error.pointer === '/id'))
      return { kind: 'invalid-id' };
    throw this.unexpected(answer);
  }

  /** Whether the answer is `done`, false for a 404 (no such agent, key or member). */
  private async found(done: number, method: string, path: string, body?: unknown) {
    const answer = await this.request(method, path, body);
    if (answer.status === done) return answer;
    if (answer.status === 404) return undefined;
    throw this.unexpected(answer);
  }

  async deleteAgent(agentId: string): Promise<boolean> {
    return (await this.found(204, 'DELETE', `/admin/v1/agents/${segment(agentId)}`)) !== undefined;
  }

  async createKey(agentId: string): Promise<{ keyId: string; apiKey: string } | undefined> {
    const answer = await this.found(201, 'POST', `/admin/v1/agents/${segment(agentId)}/keys`);
    return answer?.body as { keyId: string; apiKey: string } | undefined;
  }

  async revokeKey(keyId: string): Promise<boolean> {
    return (await this.found(204, 'DELETE', `/admin/v1/keys/${segment(keyId)}`)) !== undefined;
  }

  async grantMember(agentId: string, userId: string, role: MemberRole): Promise<boolean> {
    return (await this.found(200, 'PUT', memberPath(agentId, userId), { role })) !== undefined;
  }

  async revokeMember(agentId: string, userId: string): Promise<boolean> {
    return (await this.found(204, 'DELETE', memberPath(agentId, userId))) !== undefined;
  }

  async shareRun(traceId: string): Promise<RunShareOutcome> {
    const answer = await this.request('POST', `/admin/v1/traces/${segment(traceId)}/share`, {});
    if (answer.status === 200 || answer.status === 201) {
      const link = answer.body as { shareToken: string; path: string };
      return { kind: 'shared', ...link, created: answer.status === 201 };
    }
    if (answer.status === 404) return { kind: 'not-found' };
    if (
      answer.status === 503 &&
      (answer.body as Problem | undefined)?.type?.endsWith('sharing-unavailable')
    )
      return { kind: 'unavailable' };
    throw this.unexpected(answer);
  }

  async unshareRun(traceId: string): Promise<boolean> {
    return (
      (await this.found(204, 'DELETE', `/admin/v1/traces/${segment(traceId)}/share`)) !== undefined
    );
  }

  async lifecycle(
    agentId: string,
    change: LifecycleSettingsChange,
  ): Promise<LifecycleSettings | undefined> {
    const path = `/admin/v1/agents/${segment(agentId)}/lifecycle`;
    const answer =
      Object.keys(change).length === 0
        ? await this.found(200, 'GET', path)
        : await this.found(200, 'PATCH', path, change);
    return answer?.body as LifecycleSettings | undefined;
  }
}

/** One path segment: an id with `/`, `?` or spaces stays one (the server decodes it). */
function segment(value: string): string {
  return encodeURIComponent(value);
}

function memberPath(agentId: string, userId: string): string {
  return `/admin/v1/agents/${segment(agentId)}/members/${segment(userId)}`;
}
