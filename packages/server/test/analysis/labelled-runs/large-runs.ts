import type { LabelledRun } from './labelled-run.js';
import { runOf, signature, type RunBuilder } from './run-builder.js';

/** Events in each large run of the set. */
export const LARGE_RUN_EVENTS = 10_000;

/** `n` events of ordinary work: model calls and tool calls with inputs that never repeat. */
function busyWork(r: RunBuilder, n: number, from = 0): void {
  for (let i = from; i < from + n; i++)
    if (i % 2 === 0) r.llm('gpt-4o-mini', { ms: 40, tokens: [200, 40], costUsd: 0.00005 });
    else r.tool(['kv.get', 'kv.put', 'http.get'][i % 3]!, { key: `item-${i}` }, { ms: 20 });
}

/** Runs of 10,000 events: the cause is as findable as in a short one, and fast to find. */
export const LARGE_RUNS: LabelledRun[] = [
  {
    id: 'large-late-failure',
    shape: 'large run',
    why: 'after 9,998 ordinary steps the settlement transaction failed: account in use',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Settle the day’s 5,000 trades',
        error: 'settlement failed',
      });
      busyWork(r, LARGE_RUN_EVENTS - 2);
      r.tx('settle', '120000000000', {
        signature: signature('4SettleBusy'),
        error: 'Transaction simulation failed: account in use',
      });
      r.custom('settlement.report', { ok: false });
      return r.done();
    },
    mustContain: ['settle', 'account in use', '4SettleB'],
    mustNotContain: ['loop', 'kv.get'],
  },
  {
    id: 'large-loop-at-end',
    shape: 'large run',
    why: 'after real work the agent called queue.peek with the same input 120 times before the guard',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Drain the work queue',
        error: 'guard: too many steps',
      });
      busyWork(r, LARGE_RUN_EVENTS - 120);
      for (let i = 0; i < 120; i++)
        r.tool('queue.peek', { queue: 'work' }, { output: { empty: false, head: 'job-1' } });
      return r.done();
    },
    mustContain: ['loop', 'queue.peek', '120 times'],
    mustNotContain: ['no step failed', 'kv.get'],
  },
  {
    id: 'large-nested-failure-middle',
    shape: 'large run',
    why: 'in the middle of the run, kv.put failed four levels down: disk quota exceeded',
    run: () => {
      const r = runOf({
        status: 'errored',
        input: 'Rebuild the search index',
        error: 'rebuild failed',
      });
      busyWork(r, 5_000);
      r.wrap('custom', { name: 'rebuild' }, { error: 'rebuild failed' }, () =>
        r.wrap('custom', { name: 'shard-7' }, { error: 'shard failed' }, () =>
          r.wrap(
            'tool_call',
            { name: 'index.write', input: { shard: 7 } },
            { error: 'write failed' },
            () => {
              r.tool('kv.put', { key: 'shard-7/segment-3' }, { error: 'disk quota exceeded' });
            },
          ),
        ),
      );
      busyWork(r, LARGE_RUN_EVENTS - 5_004, 5_004);
      return r.done();
    },
    mustContain: ['kv.put', 'disk quota exceeded'],
    mustNotContain: ['shard failed', 'rebuild failed'],
  },
  {
    id: 'large-success-dominant',
    shape: 'large run',
    why: 'it worked; one export step took over half of the run among 10,000 small ones',
    run: () => {
      const r = runOf({ status: 'completed', input: 'Nightly export', output: 'Exported' });
      busyWork(r, LARGE_RUN_EVENTS - 1);
      r.tool('warehouse.export', { table: 'events' }, { ms: 600_000 });
      return r.done();
    },
    mustContain: ['succeeded', 'warehouse.export', '%'],
    mustNotContain: ['failed', 'loop'],
  },
];
