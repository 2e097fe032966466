import { createCipheriv, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { constants, gzip, gzipSync } from 'node:zlib';
import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { PAYLOAD_ALGORITHM } from './payload-cipher.js';
import type { PayloadSealing } from './payload-sealing.js';

/**
 * Serialising, encrypting and encoding at flush time, in slices: the work runs in stretches of
 * at most about `SLICE_MS`, then lets the host's event loop run, so one huge payload is as
 * harmless to the host as many small ones. Small texts take the native one-call path.
 */

/** Longest stretch of work before yielding to the host's other work, in ms (the README's 1 ms). */
export const SLICE_MS = 1;
/**
 * Characters handled in one step. A step must stay well under a slice on a slow core, whatever
 * the text: 16,384 control characters (96 KiB of escapes) stringify in about 0.3 ms here.
 */
const STEP_CHARS = 16_384;

/** Tells when a slice is used up, and yields to the event loop then. */
export class SliceClock {
  private start: number;

  constructor(
    private readonly sliceMs: number = SLICE_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.start = now();
  }

  /**
   * Yields to the event loop when the current slice is used up (then a new one starts): a promise
   * to await then, else undefined — nothing to await, so a caller in a loop over many small items
   * goes on without a promise or a microtask per item (`const wait = clock.pause(); if (wait) await wait;`).
   */
  pause(): Promise<void> | undefined {
    if (this.now() - this.start <= this.sliceMs) return undefined;
    return yieldToLoop().then(() => {
      this.start = this.now();
    });
  }
}

/** The end of a step of at most STEP_CHARS from `from`, never between the halves of a pair. */
function stepEnd(text: string, from: number): number {
  const end = Math.min(from + STEP_CHARS, text.length);
  if (end === text.length) return end;
  // Only a real pair is kept together: a lone high surrogate before the end may be followed by
  // the high half of the next pair, which must not be pulled into this step.
  const last = text.charCodeAt(end - 1);
  const next = text.charCodeAt(end);
  return last >= 0xd800 && last <= 0xdbff && next >= 0xdc00 && next <= 0xdfff ? end + 1 : end;
}

/** A payload's JSON and its UTF-8 size, or the size it was found to pass (then it stopped). */
export type PayloadJson = { json: string; bytes: number } | { tooLarge: number };

/**
 * The JSON of a payload copy (plain objects, arrays and JSON primitives, see `snapshotPayload`)
 * and its exact UTF-8 size, or `tooLarge` as soon as that passes `maxBytes`. A small payload is
 * one `JSON.stringify`; a large one (by its estimate when recorded) is written piece by piece
 * — long strings in steps — pausing between slices, and stops once past `maxBytes`, so its cost
 * is bounded by the limit, not by the payload.
 */
export async function payloadJson(
  payload: object,
  estimate: number,
  maxBytes: number,
  clock: SliceClock,
): Promise<PayloadJson> {
  const now = payloadJsonNow(payload, estimate, maxBytes);
  if (now !== undefined) return now;
  const writer = new SlicedWriter(maxBytes, clock);
  await writer.value(payload);
  return writer.result();
}

/** {@link payloadJson} of a small payload (by its estimate), at once; undefined for a large one. */
export function payloadJsonNow(
  payload: object,
  estimate: number,
  maxBytes: number,
): PayloadJson | undefined {
  if (estimate > STEP_CHARS) return undefined;
  const json = JSON.stringify(payload);
  const bytes = Buffer.byteLength(json, 'utf8');
  return bytes > maxBytes ? { tooLarge: bytes } : { json, bytes };
}

/** True when {@link sealPayloadSliced} of `json` needs no slices (then `seal` does it at once). */
export function sealsAtOnce(json: string, sealing: PayloadSealing): boolean {
  return sealing.kind !== 'encrypt' || json.length <= STEP_CHARS;
}

/** Writes JSON in parts, counting UTF-8 bytes, pausing between slices. */
class SlicedWriter {
  private readonly parts: string[] = [];
  private pending = '';
  private bytes = 0;
  private over = false;

  constructor(
    private readonly maxBytes: number,
    private readonly clock: SliceClock,
  ) {}

  result(): PayloadJson {
    this.settle();
    if (this.over) return { tooLarge: this.bytes };
    return { json: this.parts.join(''), bytes: this.bytes };
  }

  /** Moves what is pending into the parts, counting its bytes. */
  private settle(): void {
    if (this.pending.length === 0) return;
    this.bytes += Buffer.byteLength(this.pending, 'utf8');
    this.parts.push(this.pending);
    this.pending = '';
    if (this.bytes > this.maxBytes) this.over = true;
  }

  /** Appends text; once a step's worth is pending, counts it and pauses if the slice is used up. */
  private async write(text: string): Promise<void> {
    this.pending += text;
    if (this.pending.length < STEP_CHARS) return;
    this.settle();
    await this.clock.pause();
  }

  /** Writes one value of the copy; stops early once past the limit. */
  async value(value: unknown): Promise<void> {
    if (this.over) return;
    if (typeof value === 'string') {
      if (value.length > STEP_CHARS) return this.longString(value);
      return this.write(JSON.stringify(value));
    }
    if (typeof value !== 'object' || value === null) return this.write(JSON.stringify(value));
    const list = Array.isArray(value);
    await this.write(list ? '[' : '{');
    const keys = list ? undefined : Object.keys(value);
    const count = keys ? keys.length : (value as unknown[]).length;
    for (let i = 0; i < count && !this.over; i++) {
      const comma = i > 0 ? ',' : '';
      if (keys) {
        const key = keys[i] as string;
        await this.write(`${comma}${JSON.stringify(key)}:`);
        await this.value((value as Record<string, unknown>)[key]);
      } else {
        if (comma) await this.write(comma);
        await this.value((value as unknown[])[i]);
      }
    }
    return this.write(list ? ']' : '}');
  }

  /**
   * A long string in steps: each step's JSON without its quotes is the text JSON.stringify
   * writes for that part of the string (steps never split a surrogate pair).
   */
  private async longString(text: string): Promise<void> {
    await this.write('"');
    for (let from = 0; from < text.length && !this.over;) {
      const end = stepEnd(text, from);
      await this.write(JSON.stringify(text.slice(from, end)).slice(1, -1));
      from = end;
    }
    return this.write('"');
  }
}

/**
 * The wire JSON of a payload whose JSON is `json`, as `sealPayload` makes it, with encryption in
 * slices for a long text (AES-256-GCM is a stream: updates in steps give the same ciphertext).
 */
export async function sealPayloadSliced(
  json: string,
  sealing: PayloadSealing,
  clock: SliceClock,
  seal: (json: string, sealing: PayloadSealing) => string,
): Promise<string> {
  if (sealing.kind !== 'encrypt' || json.length <= STEP_CHARS) return seal(json, sealing);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealing.key, iv);
  const pieces: Buffer[] = [];
  for (let from = 0; from < json.length;) {
    const end = stepEnd(json, from);
    pieces.push(cipher.update(json.slice(from, end), 'utf8'));
    from = end;
    await clock.pause();
  }
  pieces.push(cipher.final());
  const ciphertext = Buffer.concat(pieces);
  // base64 in steps of whole 3-byte groups, so the pieces join into the one base64 text
  const base64: string[] = [];
  const step = 3 * 16_384;
  for (let from = 0; from < ciphertext.length; from += step) {
    base64.push(ciphertext.subarray(from, from + step).toString('base64'));
    await clock.pause();
  }
  // The envelope as JSON.stringify writes it (base64 needs no escapes), in the protocol's order.
  return (
    `{"alg":${JSON.stringify(PAYLOAD_ALGORITHM)},"iv":"${iv.toString('base64')}",` +
    `"tag":"${cipher.getAuthTag().toString('base64')}","ciphertext":"${base64.join('')}"}`
  );
}

/**
 * The UTF-8 bytes of well-formed text given in parts (joined, they are the text), each encoded
 * in steps between slices. Parts are never joined into one text: that would copy them all at
 * once, in one stretch.
 */
export async function utf8Sliced(parts: string | string[], clock: SliceClock): Promise<Buffer> {
  const pieces: Buffer[] = [];
  let small = '';
  for (const part of typeof parts === 'string' ? [parts] : parts) {
    if (part.length <= STEP_CHARS) {
      // Small fragments (an event's head, a bracket) are gathered and encoded together.
      small += part;
      if (small.length < STEP_CHARS) continue;
      pieces.push(Buffer.from(small, 'utf8'));
      small = '';
      await clock.pause();
      continue;
    }
    if (small) pieces.push(Buffer.from(small, 'utf8'));
    small = '';
    for (let from = 0; from < part.length;) {
      const end = stepEnd(part, from);
      pieces.push(Buffer.from(part.slice(from, end), 'utf8'));
      from = end;
      await clock.pause();
    }
  }
  if (small) pieces.push(Buffer.from(small, 'utf8'));
  return Buffer.concat(pieces);
}

const gzipAsync = promisify(gzip);

/**
 * zlib's fastest level. A batch is mostly the same keys and prompts again and again, which even
 * level 1 finds: on 50 to 500 llm_call events it is 5–12 % larger than at the default level 6,
 * for a third of the CPU (about 1.5 µs per event instead of 4–6 µs on the development machine),
 * and that CPU is the host's.
 */
const GZIP_OPTIONS = { level: constants.Z_BEST_SPEED };

/**
 * Bodies up to this size are compressed at once, on the host's thread: at level 1 that takes
 * about 0.1-0.3 ms here, within a slice, and costs 200-250 µs less CPU per flush than the round
 * trip through the thread pool (a zlib stream, its buffers and callbacks), which is most of what
 * a flush of a few events costs.
 */
const GZIP_AT_ONCE_BYTES = 64 * 1024;

/**
 * A request body: JSON text (or its parts) encoded to UTF-8 in slices, then gzip-compressed: a
 * small body at once, a larger one on libuv's thread pool, so neither a large body's encoding nor
 * its compression holds the host's loop.
 */
export async function gzipSliced(
  json: string | string[],
  clock: SliceClock = new SliceClock(),
): Promise<Buffer> {
  const body = await utf8Sliced(json, clock);
  if (body.length <= GZIP_AT_ONCE_BYTES) return gzipSync(body, GZIP_OPTIONS);
  return gzipAsync(body, GZIP_OPTIONS);
}
