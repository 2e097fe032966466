/**
 * The exports running on this instance, bounded: at most `maxPerTenant` of one user (or of the
 * admin token) and `maxTotal` in all, so that what exports hold (a page of runs and one of
 * events each, their sockets' buffers) has a ceiling whatever clients ask for. An export holds
 * no admission slot while it streams (its pace is its reader's): this is its bound instead.
 * On shutdown every export is aborted (its client resumes from its last line's cursor), and the
 * server waits for their reads in flight before it closes the store.
 */

export interface ExportSlotsOptions {
  /** Exports one tenant may run at once (`EXPORT_MAX_PER_USER`). */
  maxPerTenant: number;
  /** Exports this instance runs at once (`EXPORT_MAX`). */
  maxTotal: number;
}

/** A running export's hold on its slot. */
export interface ExportTicket {
  /** Aborted when the server shuts down. */
  readonly signal: AbortSignal;
  /** Frees the slot; later calls do nothing. */
  finished(): void;
}

export type ExportRefusal = 'tenant-at-cap' | 'at-cap' | 'closed';

export class ExportSlots {
  private readonly byTenant = new Map<string, number>();
  private readonly running = new Set<AbortController>();
  private closed = false;
  private waiters: (() => void)[] = [];

  constructor(private readonly options: ExportSlotsOptions) {}

  /** Exports running now. */
  get active(): number {
    return this.running.size;
  }

  /** A slot for an export of `tenant`, or why there is none. */
  open(tenant: string): ExportTicket | ExportRefusal {
    if (this.closed) return 'closed';
    const held = this.byTenant.get(tenant) ?? 0;
    if (held >= this.options.maxPerTenant) return 'tenant-at-cap';
    if (this.running.size >= this.options.maxTotal) return 'at-cap';
    this.byTenant.set(tenant, held + 1);
    const controller = new AbortController();
    this.running.add(controller);
    let done = false;
    return {
      signal: controller.signal,
      finished: () => {
        if (done) return;
        done = true;
        this.running.delete(controller);
        const left = (this.byTenant.get(tenant) ?? 1) - 1;
        if (left > 0) this.byTenant.set(tenant, left);
        else this.byTenant.delete(tenant);
        if (this.running.size === 0) {
          for (const wake of this.waiters) wake();
          this.waiters = [];
        }
      },
    };
  }

  /** Refuses new exports and aborts the running ones (each stops before its next read). */
  closeAll(): void {
    this.closed = true;
    for (const controller of this.running)
      controller.abort(new ExportAbortedError('the server is shutting down'));
  }

  /** Resolves once no export runs (each has finished its read in flight). */
  drained(): Promise<void> {
    return this.running.size === 0
      ? Promise.resolve()
      : new Promise<void>((resolve) => this.waiters.push(resolve));
  }
}

/** Why an export stopped before its end: its client went away, or the server is closing. */
export class ExportAbortedError extends Error {
  override name = 'ExportAbortedError';
}
