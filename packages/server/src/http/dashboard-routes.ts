import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { DashboardSignIn } from '../auth/dashboard-sign-in.js';

/**
 * What the dashboard's pages may do, and nothing more: scripts, styles and requests to this
 * origin only; no inline script or style element, no plugin, no framing by another page, no
 * form posting elsewhere. What agents write is shown as text (the dashboard never interprets
 * it as HTML); this is the second line, should that ever fail. Signing in through an OpenID
 * Connect provider adds that provider's origin to `connect-src` (its discovery document and
 * token endpoint, fetched by the page), and nothing else.
 */
export function dashboardCsp(signIn: DashboardSignIn): string {
  const connect = signIn.signIn === 'oidc' ? `'self' ${new URL(signIn.issuer).origin}` : "'self'";
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect}`,
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

function secure(reply: FastifyReply, csp: string): void {
  reply.header('content-security-policy', csp);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('referrer-policy', 'no-referrer');
  reply.header('x-frame-options', 'DENY');
  reply.header('cross-origin-opener-policy', 'same-origin');
}

/** Where the built dashboard is (`npm run build` makes it), or undefined when it was not built. */
export function dashboardAssetsDir(): string | undefined {
  try {
    const manifest = createRequire(import.meta.url).resolve('@flightlog/dashboard/package.json');
    const dist = join(dirname(manifest), 'dist');
    return existsSync(join(dist, 'index.html')) ? dist : undefined;
  } catch {
    return undefined;
  }
}

export interface DashboardRoutesOptions {
  assetsDir: string;
  signIn: DashboardSignIn;
  /**
   * Where finished runs are anchored and by whom (the anchoring key's address), for the proof's
   * explorer link and `verify --signer`; null when anchoring is off.
   */
  anchoring: { cluster: string; address: string } | null;
}

/**
 * The web dashboard, from this process: its page at `/` and at each deep link (`/agents/:id`,
 * `/agents/new`, `/agents/:id/settings`,
 * `/runs/:id`, `/compare?a=&b=`, `/shared/:token` (a run's public page), and `/auth/callback` where an OpenID Connect provider sends the
 * browser back: the page reads the address), its assets under `/assets/`, and how it signs in
 * (`/v1/dashboard/config`). Nothing here needs a credential: the page signs in and calls the
 * read and live API like any other client.
 */
export const dashboardRoutes: FastifyPluginAsync<DashboardRoutesOptions> = async (app, options) => {
  const csp = dashboardCsp(options.signIn);
  await app.register(fastifyStatic, {
    root: options.assetsDir,
    prefix: '/assets/',
    index: false,
    wildcard: false,
    // not content-hashed names: the browser asks again, a 304 is cheap
    cacheControl: true,
    maxAge: 0,
    setHeaders: (reply) => secure(reply, csp),
  });
  const page = async (_request: unknown, reply: FastifyReply) => {
    secure(reply, csp);
    reply.header('cache-control', 'no-cache');
    return reply.sendFile('index.html');
  };
  const hidden = { schema: { hide: true } };
  app.get('/', hidden, page);
  app.get('/agents/:agentId', hidden, page);
  app.get('/agents/:agentId/settings', hidden, page);
  app.get('/runs/:traceId', hidden, page);
  app.get('/compare', hidden, page);
  app.get('/auth/callback', hidden, page);
  // a run's public page: for anyone with the link, kept out of search engines; the token stays
  // in the page (no-referrer above), and the log says /shared/[token]
  app.get('/shared/:token', hidden, async (request, reply) => {
    reply.header('x-robots-tag', 'noindex, nofollow');
    return page(request, reply);
  });
  app.get(
    '/v1/dashboard/config',
    {
      schema: {
        summary:
          "How the dashboard signs in (a pasted token, or this server's OpenID Connect provider), " +
          'and where and by whom runs are anchored (`anchoring`: cluster, address; null when off)',
        tags: ['dashboard'],
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-cache');
      return {
        ...options.signIn,
        anchoring: options.anchoring,
      };
    },
  );
};
