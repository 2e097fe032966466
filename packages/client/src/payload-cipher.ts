import { parseEnvelopeKey, PAYLOAD_ENVELOPE_ALGORITHM } from '@flightlog/protocol';

/** The envelope's algorithm name; it doubles as the format version. */
export const PAYLOAD_ALGORITHM = PAYLOAD_ENVELOPE_ALGORITHM;
const KEY_BYTES = 32;

/** What became of `SERVICE_MASTER_KEY`. */
export type MasterKey =
  { kind: 'absent' } | { kind: 'valid'; key: Buffer } | { kind: 'invalid'; reason: string };

/**
 * Reads a master key: 32 bytes, raw or in standard or URL-safe base64 (padding optional). Anything
 * else is `invalid`, never silently used: a key that decodes to 31 bytes is a typo, not a key.
 */
export function parseMasterKey(value: string | Uint8Array | undefined): MasterKey {
  if (value === undefined) return { kind: 'absent' };
  if (typeof value !== 'string') {
    return value.byteLength === KEY_BYTES
      ? { kind: 'valid', key: Buffer.from(value) }
      : { kind: 'invalid', reason: `the key has ${value.byteLength} bytes, not ${KEY_BYTES}` };
  }
  const parsed = parseEnvelopeKey(value);
  return parsed.kind === 'valid'
    ? { kind: 'valid', key: parsed.key }
    : { kind: 'invalid', reason: parsed.reason.replace(/^it\b/, 'the key') };
}
