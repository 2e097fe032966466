export interface KeyGuessLimiterOptions {
  /** Failed authentications one address may make within a window; the next one is refused. */
  maxFailures: number;
  /** Length of a window, from an address's first failure in it. */
  windowMs: number;
  /** Addresses tracked at most; past it the one whose window started first is dropped. */
  maxAddresses: number;
  /** A monotonic clock in ms (default `performance.now`). */
  now?: () => number;
}

interface Window {
  startedAt: number;
  failures: number;
}

/**
 * Counts failed authentications (API keys; the admin token, in a limiter of its own) per client
 * address, so that guessing a secret costs an address at most `maxFailures` attempts per
 * `windowMs`; past that, its attempts with a secret that is not valid are refused unexamined
 * (the caller answers `429` with `retryAfterSeconds`).
 *
 * A window opens at an address's first failure and closes `windowMs` later, whatever happens in
 * it: refused attempts do not extend it. Windows are computed lazily (no timers), and the map is
 * bounded: it keeps insertion order, which is the order windows opened, so the entries at its
 * front are the first to expire and the first to go when it is full. IPv6 addresses count per
 * /64, the block one subscriber usually gets; IPv4-mapped IPv6 addresses as their IPv4.
 */
export class KeyGuessLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly now: () => number;

  constructor(private readonly options: KeyGuessLimiterOptions) {
    this.now = options.now ?? (() => performance.now());
  }

  /** Seconds until `address` may try a secret that is not valid again, or 0 when it may now. */
  retryAfterSeconds(address: string): number {
    const now = this.now();
    const window = this.current(addressBucket(address), now);
    if (!window || window.failures < this.options.maxFailures) return 0;
    const remainingMs = window.startedAt + this.options.windowMs - now;
    return Math.max(1, Math.ceil(remainingMs / 1_000));
  }

  /**
   * Counts one failed authentication of `address`. Callers count a store lookup before it
   * starts, so that concurrent guesses cannot outrun the limit, and take it back with
   * {@link withdrawFailure} when the key turns out valid.
   */
  recordFailure(address: string): void {
    const bucket = addressBucket(address);
    const now = this.now();
    const window = this.current(bucket, now);
    if (window) {
      window.failures++;
      return;
    }
    this.windows.delete(bucket);
    this.dropExpired(now);
    if (this.windows.size >= this.options.maxAddresses) {
      const first = this.windows.keys().next();
      if (!first.done) this.windows.delete(first.value);
    }
    this.windows.set(bucket, { startedAt: now, failures: 1 });
  }

  /** Takes back one failure counted ahead of a lookup that found the key valid. */
  withdrawFailure(address: string): void {
    const bucket = addressBucket(address);
    const window = this.current(bucket, this.now());
    if (!window) return;
    window.failures--;
    if (window.failures <= 0) this.windows.delete(bucket);
  }

  /** Addresses (or /64 blocks) tracked now, expired windows included until they are swept. */
  get size(): number {
    return this.windows.size;
  }

  private current(bucket: string, now: number): Window | undefined {
    const window = this.windows.get(bucket);
    return window && now - window.startedAt < this.options.windowMs ? window : undefined;
  }

  /** Drops expired windows from the front (the oldest), where they gather. */
  private dropExpired(now: number): void {
    for (const [bucket, window] of this.windows) {
      if (now - window.startedAt < this.options.windowMs) return;
      this.windows.delete(bucket);
    }
  }
}

/**
 * What one client counts as: an IPv4 address as it is, an IPv6 address by its /64 prefix (one
 * subscriber usually holds a whole /64, so counting single addresses would not limit anyone),
 * an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, a dual-stack socket) as its IPv4.
 */
export function addressBucket(address: string): string {
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return mapped[1] as string;
  const [head = '', tail, extra] = (address.split('%')[0] as string).split('::');
  if (extra !== undefined) return address; // not an IPv6 address; count it as given
  const headGroups = head === '' ? [] : head.split(':');
  let groups = headGroups;
  if (tail !== undefined) {
    const tailGroups = tail === '' ? [] : tail.split(':');
    // an embedded dotted IPv4 address (the last 32 bits) takes the room of two groups
    const tailSize = tailGroups.reduce((size, group) => size + (group.includes('.') ? 2 : 1), 0);
    const missing = 8 - headGroups.length - tailSize;
    if (missing < 1) return address;
    groups = [...headGroups, ...Array<string>(missing).fill('0'), ...tailGroups];
  }
  const prefix = groups.slice(0, 4).map((group) => group.toLowerCase().replace(/^0+(?=.)/, ''));
  return `${prefix.join(':')}::/64`;
}
