/**
 * Fair admission between tenants (issue 15): the server works on at most `maxInFlight`
 * requests at once; past that, requests wait, and each freed slot goes to the waiting tenant
 * that holds the fewest slots (earliest in the rotation among equals). A tenant's valid but
 * numerous requests then take at most their share of the server whenever another tenant
 * wants some, whatever route they use; with nobody else waiting they may use every slot.
 *
 * Bounded in every direction: a tenant may have `maxQueuedPerTenant` requests waiting, all
 * tenants together `maxQueued`, and a request waits at most `maxWaitMs`; past any of these it
 * is refused (the caller answers `429` with `Retry-After`). Its timers are unref'd; `close`
 * refuses every waiting request and lets none wait from then on.
 */

export interface FairAdmissionOptions {
  /** Requests worked on at once, across all tenants. */
  maxInFlight: number;
  /** Requests one tenant may have waiting for a slot. */
  maxQueuedPerTenant: number;
  /** Requests all tenants together may have waiting. */
  maxQueued: number;
  /** Longest a request waits for a slot before it is refused. */
  maxWaitMs: number;
}

/** Why a request was not admitted. */
export type Refusal = 'tenant-queue-full' | 'queue-full' | 'wait-timeout' | 'closed' | 'aborted';

/** A request holding a slot. */
export interface AdmittedRequest {
  admitted: true;
  /** Frees the slot; later calls do nothing. */
  release: () => void;
}

export type Admission =
  AdmittedRequest | { admitted: false; reason: Refusal; retryAfterSeconds: number };

interface Waiter {
  tenant: Tenant;
  settle: (admission: Admission) => void;
  timer: NodeJS.Timeout | undefined;
  onAbort: (() => void) | undefined;
  signal: AbortSignal | undefined;
}

interface Tenant {
  key: string;
  inFlight: number;
  waiting: Waiter[];
}

export class FairAdmission {
  private inFlight = 0;
  private queued = 0;
  private closed = false;
  /** Tenants holding a slot or waiting for one (others are forgotten). */
  private readonly tenants = new Map<string, Tenant>();
  /** Tenants with requests waiting, in rotation order (Map keeps insertion order). */
  private readonly rotation = new Map<string, Tenant>();

  constructor(private readonly options: FairAdmissionOptions) {}

  /** Requests holding a slot now. */
  get active(): number {
    return this.inFlight;
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Admits a request of `tenant` now if a slot is free and nobody waits for one (what `admit`
   * would grant at once), else undefined: the common case without a promise, or an abort
   * signal the caller would have to set up for a wait that does not happen.
   */
  tryAdmit(tenantKey: string): AdmittedRequest | undefined {
    return this.inFlight < this.options.maxInFlight && this.queued === 0
      ? this.grant(this.tenantOf(tenantKey))
      : undefined;
  }

  /**
   * Admits a request of `tenant` now or once a slot is its turn. An `abort` while it waits
   * takes it out of the line (answered `aborted`); once admitted, the caller must call
   * `release` when the request's work is done.
   */
  admit(tenantKey: string, abort?: AbortSignal): Promise<Admission> {
    if (abort?.aborted) return Promise.resolve(refused('aborted', 0));
    // work-conserving: a free slot is taken at once when nobody is waiting for one (also once
    // closed: a request received before the shutdown began still finishes)
    if (this.inFlight < this.options.maxInFlight && this.queued === 0)
      return Promise.resolve(this.grant(this.tenantOf(tenantKey)));
    if (this.closed) return Promise.resolve(refused('closed', 1));
    const tenant = this.tenantOf(tenantKey);
    if (tenant.waiting.length >= this.options.maxQueuedPerTenant) {
      this.forgetIfIdle(tenant);
      return Promise.resolve(refused('tenant-queue-full', this.retryAfterSeconds()));
    }
    if (this.queued >= this.options.maxQueued) {
      this.forgetIfIdle(tenant);
      return Promise.resolve(refused('queue-full', this.retryAfterSeconds()));
    }
    return new Promise<Admission>((resolve) => {
      const waiter: Waiter = {
        tenant,
        settle: resolve,
        timer: undefined,
        onAbort: undefined,
        signal: abort,
      };
      waiter.timer = setTimeout(
        () => this.leave(waiter, refused('wait-timeout', this.retryAfterSeconds())),
        this.options.maxWaitMs,
      );
      waiter.timer.unref();
      if (abort) {
        waiter.onAbort = () => this.leave(waiter, refused('aborted', 0));
        abort.addEventListener('abort', waiter.onAbort, { once: true });
      }
      tenant.waiting.push(waiter);
      this.queued++;
      if (!this.rotation.has(tenant.key)) this.rotation.set(tenant.key, tenant);
    });
  }

  /**
   * Refuses every waiting request, and from now on any that would have to wait (a free slot is
   * still taken); slots held are released as usual.
   */
  close(): void {
    this.closed = true;
    for (const tenant of [...this.rotation.values()])
      for (const waiter of [...tenant.waiting]) this.leave(waiter, refused('closed', 1));
  }

  private tenantOf(key: string): Tenant {
    let tenant = this.tenants.get(key);
    if (!tenant) {
      tenant = { key, inFlight: 0, waiting: [] };
      this.tenants.set(key, tenant);
    }
    return tenant;
  }

  private grant(tenant: Tenant): AdmittedRequest {
    this.inFlight++;
    tenant.inFlight++;
    let released = false;
    return {
      admitted: true,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight--;
        tenant.inFlight--;
        this.forgetIfIdle(tenant);
        this.next();
      },
    };
  }

  /** Gives free slots to waiting tenants: fewest slots held first, then rotation order. */
  private next(): void {
    while (this.inFlight < this.options.maxInFlight && this.queued > 0) {
      let chosen: Tenant | undefined;
      for (const tenant of this.rotation.values())
        if (chosen === undefined || tenant.inFlight < chosen.inFlight) {
          chosen = tenant;
          if (chosen.inFlight === 0) break;
        }
      const waiter = chosen!.waiting[0]!;
      this.dequeue(waiter); // served: to the back of the rotation if it has more waiting
      waiter.settle(this.grant(chosen!));
    }
  }

  /** Takes a waiter out of the line, answered `admission`. */
  private leave(waiter: Waiter, admission: Admission): void {
    if (!waiter.tenant.waiting.includes(waiter)) return;
    this.dequeue(waiter);
    this.forgetIfIdle(waiter.tenant);
    waiter.settle(admission);
  }

  private dequeue(waiter: Waiter): void {
    const { tenant } = waiter;
    tenant.waiting.splice(tenant.waiting.indexOf(waiter), 1);
    this.queued--;
    // out of the rotation now; `next` puts a tenant with more waiting at its back
    this.rotation.delete(tenant.key);
    if (tenant.waiting.length > 0 && !this.rotation.has(tenant.key))
      this.rotation.set(tenant.key, tenant);
    clearTimeout(waiter.timer);
    if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  }

  private forgetIfIdle(tenant: Tenant): void {
    if (tenant.inFlight === 0 && tenant.waiting.length === 0) this.tenants.delete(tenant.key);
  }

  /** A hint for `Retry-After`: a second, or more while many wait. */
  private retryAfterSeconds(): number {
    return Math.min(10, 1 + Math.floor(this.queued / Math.max(1, this.options.maxInFlight * 4)));
  }
}

function refused(reason: Refusal, retryAfterSeconds: number): Admission {
  return { admitted: false, reason, retryAfterSeconds };
}
