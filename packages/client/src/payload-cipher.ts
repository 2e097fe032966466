import { createCipheriv, randomBytes } from 'node:crypto';
import {
  openPayloadEnvelope,
  parseEnvelopeKey,
  PAYLOAD_ENVELOPE_ALGORITHM,
  type EncryptedPayload,
} from '@flightlog/protocol';

/** The envelope's algorithm name; it doubles as the format version. */
export const PAYLOAD_ALGORITHM = PAYLOAD_ENVELOPE_ALGORITHM;
const KEY_BYTES = 32;
const IV_BYTES = 12;

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

/** Bytes of the envelope's JSON for a payload whose JSON has `plainBytes` bytes (for accounting). */
export function envelopeBytes(plainBytes: number): number {
  return 4 * Math.ceil(plainBytes / 3) + 90;
}

/**
 * Encrypts the JSON text of a payload: AES-256-GCM, a fresh random 96-bit IV each time, the
 * 128-bit tag kept, no additional data. Returns the envelope that travels as the event's payload.
 */
export function encryptPayloadJson(json: string, key: Buffer): EncryptedPayload {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return {
    alg: PAYLOAD_ALGORITHM,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    ciphertext: ciphertext.toString('base64'),
  };
}

/** What {@link decryptPayload} found. */
export type DecryptOutcome =
  | { kind: 'ok'; payload: Record<string, unknown> }
  | { kind: 'failed'; reason: 'invalid-key' | 'malformed' | 'authentication-failed' };

/**
 * Opens an encrypted event payload (for the dashboard side). `payload` is the event's payload as
 * stored when `payloadEncrypted` is true: `{alg: "AES-256-GCM", iv, tag, ciphertext}`, base64
 * fields, a 12-byte IV, a 16-byte tag, the ciphertext of the payload's UTF-8 JSON. `key` is the
 * client's `SERVICE_MASTER_KEY` (32 bytes, base64 or raw). Never throws: a wrong key and a
 * modified envelope both give `authentication-failed` (GCM cannot tell them apart).
 */
export function decryptPayload(payload: unknown, key: string | Uint8Array): DecryptOutcome {
  const parsed = parseMasterKey(key);
  if (parsed.kind !== 'valid') return { kind: 'failed', reason: 'invalid-key' };
  const opened = openPayloadEnvelope(payload, parsed.key);
  if (opened.kind === 'opened') return { kind: 'ok', payload: opened.payload };
  return {
    kind: 'failed',
    reason: opened.reason === 'authentication-failed' ? 'authentication-failed' : 'malformed',
  };
}
