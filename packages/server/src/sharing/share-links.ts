import type { Event, FieldError, Trace } from '@flightlog/protocol';
import type { KeyGuessLimiter } from '../auth/key-guess-limiter.js';
import { toAnalysisLookup, type AnalysisLookup } from '../read/analysis-reader.js';
import { eventPageOf, type EventPageQuery } from '../read/trace-reader.js';
import type { Store } from '../store/open-store.js';
import {
  generateShareToken,
  isShareToken,
  shareTokenHash,
  type ShareTokenSeal,
} from './share-token.js';

/*
 * Public share links of runs (issue 25, part 1). An owner or editor of a run's agent shares it;
 * whoever holds the link then reads that one run — the trace, its events, its autopsy — and
 * nothing else: the link names no trace (the token is the only key), so no request made with it
 * can reach another run, an agent, or a member. Every read looks the token up in the store, so
 * unsharing (or deleting the run) ends the link at once, on every instance.
 */

/** Where the public page of a shared run is, below the service's origin. */
export const SHARED_PAGE_PREFIX = '/shared/';

export interface ShareLinksOptions {
  store: Store;
  /** Seals tokens for showing them to the team; undefined: sharing is off (no secret). */
  seal: ShareTokenSeal | undefined;
  /** Failed token checks per address (guessing costs what guessing an API key costs). */
  guesses: KeyGuessLimiter;
}

/** Who shares or unshares: a dashboard user (an owner or editor of the run's agent), or the admin. */
export type Sharer = { kind: 'user'; userId: string } | { kind: 'admin' };

export type ShareOutcome =
  | { kind: 'shared'; shareToken: string; path: string; created: boolean }
  | { kind: 'not-found' }
  | { kind: 'forbidden' }
  /** No secret to seal tokens with: the server cannot share. */
  | { kind: 'unavailable' };

export type UnshareOutcome =
  { kind: 'unshared'; hadLink: boolean } | { kind: 'not-found' } | { kind: 'forbidden' };

/** How a request's share token was taken. */
export type SharedAccess =
  | { kind: 'granted'; tokenHash: string; traceId: string }
  /** Not a token, or one that shares nothing: the same answer, a 404. */
  | { kind: 'not-found' }
  /** The address made too many failed attempts: wait this long. */
  | { kind: 'too-many'; retryAfterSeconds: number };

export type SharedTraceOutcome =
  | { kind: 'found'; trace: Trace; events: Event[]; nextCursor: string | null }
  | { kind: 'not-found' }
  | { kind: 'invalid'; errors: FieldError[] };

const pathOf = (token: string) => `${SHARED_PAGE_PREFIX}${token}`;

/** Valid tokens remembered per instance (about 100 bytes each). */
const SEEN_VALID_MAX = 10_000;

export class ShareLinks {
  constructor(private readonly options: ShareLinksOptions) {}

  /**
   * Shares a run (owners and editors of its agent): its current link when it has one, else a new
   * one. A link sealed under another secret than this server's cannot be shown: it is replaced.
   */
  async share(sharer: Sharer, traceId: string): Promise<ShareOutcome> {
    const { store, seal } = this.options;
    const access = await this.editorAccess(sharer, traceId);
    if (access !== 'granted') return { kind: access };
    if (seal === undefined) return { kind: 'unavailable' };
    for (let attempt = 0; attempt < 3; attempt++) {
      const current = await store.shares.shareOf(traceId);
      if (current) {
        const token = seal.open(current.sealedToken);
        if (token !== undefined)
          return { kind: 'shared', shareToken: token, path: pathOf(token), created: false };
        await store.shares.remove(traceId);
      }
      const token = generateShareToken();
      const written = await store.shares.put(
        { traceId, tokenHash: shareTokenHash(token), sealedToken: seal.seal(token) },
        sharer.kind === 'admin' ? 'admin' : `user:${sharer.userId}`,
      );
      if (written.kind === 'no-trace') return { kind: 'not-found' };
      if (written.kind === 'stored')
        return { kind: 'shared', shareToken: token, path: pathOf(token), created: true };
      // a concurrent request stored its link first: show that one (next round)
    }
    return { kind: 'not-found' };
  }

  /** Ends a run's link at once (owners and editors); a run without one is left as it is. */
  async unshare(sharer: Sharer, traceId: string): Promise<UnshareOutcome> {
    const access = await this.editorAccess(sharer, traceId);
    if (access !== 'granted') return { kind: access };
    return { kind: 'unshared', hadLink: await this.options.store.shares.remove(traceId) };
  }

  /**
   * The current share token of a run, for its team (the read API's `trace.shareToken`): null when
   * it is not shared, or its link was sealed under another secret.
   */
  async currentToken(traceId: string): Promise<string | null> {
    const { store, seal } = this.options;
    if (seal === undefined) return null;
    const current = await store.shares.shareOf(traceId);
    return current ? (seal.open(current.sealedToken) ?? null) : null;
  }

  /**
   * Checks a request's share token, counted against its address as a failure until it turns out
   * to share a run, so that concurrent guesses cannot outrun the limit.
   */
  async access(token: string | undefined, address: string): Promise<SharedAccess> {
    const { guesses, store } = this.options;
    // no token, no guess (as a request without an API key)
    if (token === undefined) return { kind: 'not-found' };
    const tokenHash = shareTokenHash(token);
    // A token this instance saw valid is no guess: it is looked up again (only whether it was
    // ended is in question), so a reader behind the same address as a guesser keeps reading.
    const known = this.seenValid.has(tokenHash);
    const wait = guesses.retryAfterSeconds(address);
    if (wait > 0 && !known) return { kind: 'too-many', retryAfterSeconds: wait };
    if (!isShareToken(token)) {
      guesses.recordFailure(address);
      return { kind: 'not-found' };
    }
    if (!known) guesses.recordFailure(address);
    let traceId: string | undefined;
    try {
      traceId = await store.shares.traceIdOf(tokenHash);
    } catch (error) {
      if (!known) guesses.withdrawFailure(address); // the store failed, not the token
      throw error;
    }
    if (traceId === undefined) {
      this.seenValid.delete(tokenHash);
      return { kind: 'not-found' };
    }
    if (!known) guesses.withdrawFailure(address);
    this.rememberValid(tokenHash);
    return { kind: 'granted', tokenHash, traceId };
  }

  /** Hashes of tokens found valid on this instance, the oldest dropped past SEEN_VALID_MAX. */
  private readonly seenValid = new Set<string>();

  private rememberValid(tokenHash: string): void {
    this.seenValid.delete(tokenHash);
    this.seenValid.add(tokenHash);
    if (this.seenValid.size > SEEN_VALID_MAX) {
      const oldest = this.seenValid.values().next();
      if (!oldest.done) this.seenValid.delete(oldest.value);
    }
  }

  /** The shared run and one page of its events (the read API's paging). */
  async readTrace(tokenHash: string, query: EventPageQuery = {}): Promise<SharedTraceOutcome> {
    const page = eventPageOf(query);
    if ('errors' in page) return { kind: 'invalid', errors: page.errors };
    const found = await this.options.store.shares.sharedTrace(tokenHash, page);
    if (!found) return { kind: 'not-found' };
    // the link is the team's to show, not the public's: a shared page never shows its own token
    return { kind: 'found', ...found, trace: { ...found.trace, shareToken: null } };
  }

  /**
   * The autopsy of the shared run's latest finalisation (`access` found the run; the statement
   * checks the link again, so one ended meanwhile shows nothing).
   */
  async readAnalysis(access: { tokenHash: string; traceId: string }): Promise<AnalysisLookup> {
    const { store } = this.options;
    return toAnalysisLookup(await store.analysis.latestForShare(access.traceId, access.tokenHash));
  }

  private async editorAccess(
    sharer: Sharer,
    traceId: string,
  ): Promise<'granted' | 'not-found' | 'forbidden'> {
    const { shares } = this.options.store;
    if (sharer.kind === 'admin') return (await shares.runExists(traceId)) ? 'granted' : 'not-found';
    const role = await shares.roleOnRun(sharer.userId, traceId);
    if (role === undefined) return 'not-found';
    return role === 'viewer' ? 'forbidden' : 'granted';
  }
}
