import { open, type FileHandle } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isIsoDateTime } from '@flightlog/protocol';
import { exportLines, exportRange, type ExportRange } from '../lifecycle/export.js';
import type { Store } from '../store/open-store.js';

/** What `flightlog export` was asked for. */
export interface ExportCommand {
  agentId: string;
  since?: string | undefined;
  until?: string | undefined;
  cursor?: string | undefined;
  /** The file to write; standard output when absent. */
  out?: string | undefined;
}

/** A flag's value the command refuses (exit 2, naming the flag). */
export class ExportUsageError extends Error {
  override name = 'ExportUsageError';
}

/** The export stopped before its end (exit 1): how far it got and how to go on. */
export class ExportInterruptedError extends Error {
  override name = 'ExportInterruptedError';
}

const FLAG_OF: Record<string, string> = {
  '/querystring/since': '--since',
  '/querystring/until': '--until',
  '/querystring/cursor': '--cursor',
};

/** The range of the command's flags, as the export route takes them; refused flags named. */
export function exportCommandRange(command: ExportCommand): ExportRange {
  for (const flag of ['since', 'until'] as const) {
    const value = command[flag];
    if (value !== undefined && !isIsoDateTime(value))
      throw new ExportUsageError(
        `--${flag} must be an RFC 3339 date-time with a time zone, e.g. 2026-11-01T00:00:00Z`,
      );
  }
  const outcome = exportRange(command);
  if (outcome.kind === 'invalid') {
    const [first] = outcome.errors;
    throw new ExportUsageError(
      `${first ? (FLAG_OF[first.pointer] ?? first.pointer) : '--cursor'} ${first?.detail ?? 'is not valid'}`,
    );
  }
  return outcome.range;
}

/** The export's query string for the admin route (the flags given). */
export function exportQueryString(command: ExportCommand): string {
  const query = new URLSearchParams();
  if (command.since !== undefined) query.set('since', command.since);
  if (command.until !== undefined) query.set('until', command.until);
  if (command.cursor !== undefined) query.set('cursor', command.cursor);
  const text = query.toString();
  return text ? `?${text}` : '';
}

/** The NDJSON of the agent's runs read from a store this process opened. */
export function storeExport(store: Store, agentId: string, range: ExportRange): Readable {
  return Readable.from(exportLines(store.exports, agentId, range), {
    objectMode: false,
    highWaterMark: 64 * 1024,
  });
}

/** How a progress line is shown: in place on a terminal, else a plain line now and then. */
export interface ProgressOptions {
  stream: NodeJS.WritableStream & { isTTY?: boolean };
  /** Between two lines when not a terminal (default 5 s); a terminal's line changes 5 times a second. */
  plainIntervalMs?: number;
}

/**
 * Writes `source` (NDJSON) to the command's file or standard output, with a progress line on
 * `progress.stream`. Returns how many runs were written. Interrupted (the server went away, the
 * store failed, Ctrl-C), the file is cut back to its last whole line and the error says which
 * cursor resumes after it.
 */
export async function writeExport(
  source: Readable,
  command: ExportCommand,
  progress: ProgressOptions,
): Promise<{ runs: number; bytes: number }> {
  const shown = new ProgressLine(progress);
  const file = command.out === undefined ? undefined : await open(command.out, 'w');
  const sink = new NdjsonSink(file ?? process.stdout, (runs, bytes) => shown.update(runs, bytes));
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort(new Error('interrupted'));
  process.once('SIGINT', onSignal);
  try {
    await pipeline(source, sink, { signal: interrupt.signal });
  } catch (error) {
    shown.stop();
    // what reached the file is whole lines and the start of one: the start goes
    await file?.truncate(sink.completeBytes);
    const reason = error instanceof Error ? error.message : String(error);
    const kept = command.out === undefined ? 'written' : `kept in ${command.out}`;
    throw new ExportInterruptedError(
      `the export stopped after ${sink.runs} runs (${reason}); ` +
        (sink.lastCursor === undefined
          ? 'nothing was written: run it again'
          : `the ${sink.runs} runs are ${kept}, whole; ` +
            `resume after them with --cursor ${sink.lastCursor} (and the same --since/--until)`),
      { cause: error },
    );
  } finally {
    process.off('SIGINT', onSignal);
    await file?.close();
  }
  shown.done(sink.runs, sink.bytes);
  return { runs: sink.runs, bytes: sink.bytes };
}

/** Bytes before a line's end that hold its cursor (`"cursor":"…"}`, the line's last field). */
const TAIL_BYTES = 256;
const CURSOR_AT_END = /"cursor":"([A-Za-z0-9_-]+)"\}$/;
const NEWLINE = 0x0a;

/**
 * Writes the NDJSON to a file or standard output, counting what was written (each chunk once
 * its write completed): lines (runs), bytes, where the last whole line ends, and that line's
 * cursor, which a resumed export starts after. Holds no more than a line's last TAIL_BYTES.
 */
class NdjsonSink extends Writable {
  runs = 0;
  bytes = 0;
  /** Bytes written up to the end of the last whole line. */
  completeBytes = 0;
  lastCursor: string | undefined;
  private tail = Buffer.alloc(0);

  constructor(
    private readonly target: FileHandle | NodeJS.WritableStream,
    private readonly onProgress: (runs: number, bytes: number) => void,
  ) {
    super();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void) {
    this.writeOut(chunk).then(
      () => {
        this.count(chunk);
        this.onProgress(this.runs, this.bytes);
        done();
      },
      (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
    );
  }

  private async writeOut(chunk: Buffer): Promise<void> {
    const target = this.target;
    if ('truncate' in target) {
      for (let at = 0; at < chunk.length;)
        at += (await target.write(chunk, at, chunk.length - at)).bytesWritten;
      return;
    }
    await new Promise<void>((resolve, reject) =>
      target.write(chunk, (error) => (error ? reject(error) : resolve())),
    );
  }

  private count(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, end + 1)) {
      const last = Buffer.concat([
        this.tail,
        chunk.subarray(Math.max(start, end - TAIL_BYTES), end),
      ]);
      const cursor = CURSOR_AT_END.exec(last.subarray(-TAIL_BYTES).toString('latin1'))?.[1];
      if (cursor !== undefined) this.lastCursor = cursor;
      this.runs++;
      this.completeBytes = this.bytes + end + 1;
      this.tail = Buffer.alloc(0);
      start = end + 1;
    }
    if (start < chunk.length)
      this.tail = Buffer.concat([
        this.tail,
        chunk.subarray(Math.max(start, chunk.length - TAIL_BYTES)),
      ]).subarray(-TAIL_BYTES);
    this.bytes += chunk.length;
  }
}

/** Terminal progress changes at most this often. */
const TTY_INTERVAL_MS = 200;

/** `exported 12,345 runs, 34.5 MB`, in place on a terminal or as periodic plain lines. */
class ProgressLine {
  private readonly started = performance.now();
  private last = 0;
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private stopped = false;

  constructor(private readonly options: ProgressOptions) {
    this.tty = options.stream.isTTY === true;
    this.intervalMs = this.tty ? TTY_INTERVAL_MS : (options.plainIntervalMs ?? 5_000);
  }

  update(runs: number, bytes: number): void {
    const now = performance.now();
    if (this.stopped || now - this.last < this.intervalMs) return;
    this.last = now;
    this.show(`exporting: ${this.describe(runs, bytes, now)}`);
  }

  /** Ends the in-place line so that what follows starts on a line of its own. */
  stop(): void {
    if (!this.stopped && this.tty && this.last > 0) this.options.stream.write('\n');
    this.stopped = true;
  }

  done(runs: number, bytes: number): void {
    if (this.stopped) return;
    this.show(`exported ${this.describe(runs, bytes, performance.now())}`);
    if (this.tty) this.options.stream.write('\n');
    this.stopped = true;
  }

  private show(text: string): void {
    // on a terminal: back to the line's start and clear it, then the new text
    this.options.stream.write(this.tty ? `\r\x1b[K${text}` : `${text}\n`);
  }

  private describe(runs: number, bytes: number, now: number): string {
    const seconds = Math.max((now - this.started) / 1000, 0.001);
    const rate = Math.round(runs / seconds);
    return (
      `${runs.toLocaleString('en-US')} runs, ${(bytes / 1e6).toFixed(1)} MB ` +
      `in ${seconds.toFixed(1)} s (${rate.toLocaleString('en-US')} runs/s)`
    );
  }
}
