import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * `serve` and `worker` cap V8's heap growth at start-up (cli/heap-growth.ts). What an operator
 * would check is the memory: the same allocation pattern as under ingest load (a live set, and
 * objects that live long enough to be promoted, then die in the old generation) run in a process
 * of its own with the configured setting applied as the commands apply it, and with it at 0
 * (V8's own sizing). The built modules: `npm test` builds first.
 */
const built = (path: string) =>
  JSON.stringify(fileURLToPath(new URL(`../../dist/${path}`, import.meta.url)));

const script = `
  const { loadConfig } = await import(${built('config.js')});
  const { applyHeapGrowth } = await import(${built('cli/heap-growth.js')});
  applyHeapGrowth(loadConfig(process.env).process.heapGrowingPercent);
  const live = Array.from({ length: 100_000 }, (_, i) => ({ i, s: 'x'.repeat(150) + i }));
  const promoted = new Array(150_000);
  let peak = 0;
  for (let n = 0; n < 4_000_000; n++) {
    promoted[n % promoted.length] = { n, s: 'y'.repeat(100) + n };
    if (n % 20_000 === 0) peak = Math.max(peak, process.memoryUsage().heapTotal);
  }
  // the live set is still held here, as a server holds its own
  if (live.length !== 100_000) throw new Error('the live set was lost');
  process.stdout.write(String(peak / 1048576));`;

function peakHeapMb(env: Record<string, string>): number {
  return Number(
    execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...env },
    }),
  );
}

describe('the heap growth serve and worker set', () => {
  it('keeps the heap well under what V8 sizes it to on its own, by default', () => {
    const capped = peakHeapMb({});
    const own = peakHeapMb({ HEAP_GROWING_PERCENT: '0' });
    // measured 216 MB against 369–385 MB
    expect(capped).toBeLessThan(own * 0.8);
  }, 60_000);
});
