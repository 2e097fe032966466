import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { EncryptedPayload } from './payloads.js';

/**
 * The envelope of an encrypted event payload (`payloadEncrypted: true`), as the client library
 * writes it: AES-256-GCM, a fresh random 96-bit IV, the 128-bit tag, no additional data; `iv`,
 * `tag` and `ciphertext` in base64; the plaintext is the payload's UTF-8 JSON text. The key is
 * `SERVICE_MASTER_KEY`: 32 random bytes, base64. Sealing and opening live here together, so that
 * the client that seals and every side that opens (the analysis worker, a reader's own tools) agree.
 */
export const PAYLOAD_ENVELOPE_ALGORITHM = 'AES-256-GCM';

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Standard or URL-safe base64, padding optional. */
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** What reading `SERVICE_MASTER_KEY` gave. */
export type EnvelopeKeyOutcome =
  { kind: 'valid'; key: Buffer } | { kind: 'invalid'; reason: string };

/**
 * Reads a master key: 32 bytes in base64. Anything else is refused with the reason, never used:
 * a key that decodes to 31 bytes is a typo, and would open nothing.
 */
export function parseEnvelopeKey(text: string): EnvelopeKeyOutcome {
  const trimmed = text.trim();
  if (trimmed === '') return { kind: 'invalid', reason: 'it is empty' };
  if (!BASE64.test(trimmed)) return { kind: 'invalid', reason: 'it is not base64' };
  const key = Buffer.from(trimmed.replaceAll('-', '+').replaceAll('_', '/'), 'base64');
  if (key.byteLength !== KEY_BYTES)
    return { kind: 'invalid', reason: `it decodes to ${key.byteLength} bytes, not ${KEY_BYTES}` };
  return { kind: 'valid', key };
}

/** True when `value` has the envelope's shape (it may still fail to open). */
export function isPayloadEnvelope(value: unknown): value is EncryptedPayload {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const v = value as Record<string, unknown>;
  return (
    v.alg === PAYLOAD_ENVELOPE_ALGORITHM &&
    typeof v.iv === 'string' &&
    typeof v.tag === 'string' &&
    typeof v.ciphertext === 'string'
  );
}

/** What opening an envelope gave. */
export type OpenEnvelopeOutcome =
  | { kind: 'opened'; payload: Record<string, unknown> }
  | {
      kind: 'failed';
      reason: 'invalid-key' | 'not-an-envelope' | 'authentication-failed' | 'not-json';
    };

/**
 * Opens an encrypted payload with a 32-byte key. Never throws: a wrong key and a modified
 * envelope both give `authentication-failed` (GCM cannot tell them apart).
 */
export function openPayloadEnvelope(payload: unknown, key: Uint8Array): OpenEnvelopeOutcome {
  if (key.byteLength !== KEY_BYTES) return { kind: 'failed', reason: 'invalid-key' };
  if (!isPayloadEnvelope(payload)) return { kind: 'failed', reason: 'not-an-envelope' };
  const iv = Buffer.from(payload.iv, 'base64');
  const tag = Buffer.from(payload.tag, 'base64');
  if (iv.byteLength !== IV_BYTES || tag.byteLength !== TAG_BYTES)
    return { kind: 'failed', reason: 'not-an-envelope' };
  let json: string;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAuthTag(tag);
    json = Buffer.concat([
      decipher.update(Buffer.from(payload.ciphertext, 'base64')),
      decipher.final(),
    ]).toString('utf8');
  } catch {
    return { kind: 'failed', reason: 'authentication-failed' };
  }
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value === 'object' && value !== null && !Array.isArray(value))
      return { kind: 'opened', payload: value as Record<string, unknown> };
  } catch {
    // authenticated, but not the JSON object a client encrypts
  }
  return { kind: 'failed', reason: 'not-json' };
}

/**
 * Seals the JSON text of a payload: AES-256-GCM, a fresh random 96-bit IV each time, the 128-bit
 * tag kept, no additional data. Returns the envelope that travels as the event's payload.
 */
export function sealPayloadEnvelope(json: string, key: Uint8Array): EncryptedPayload {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return {
    alg: PAYLOAD_ENVELOPE_ALGORITHM,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    ciphertext: ciphertext.toString('base64'),
  };
}

/** Bytes of the envelope's JSON for a payload whose JSON has `plainBytes` bytes (for accounting). */
export function envelopeBytes(plainBytes: number): number {
  return 4 * Math.ceil(plainBytes / 3) + 90;
}

/** What {@link decryptPayload} found. */
export type DecryptOutcome =
  | { kind: 'ok'; payload: Record<string, unknown> }
  | { kind: 'failed'; reason: 'invalid-key' | 'malformed' | 'authentication-failed' };

/**
 * Opens an encrypted event payload, for whoever reads traces (a dashboard, an export, a script).
 * `payload` is the event's payload as stored when `payloadEncrypted` is true:
 * `{alg: "AES-256-GCM", iv, tag, ciphertext}`, base64 fields, a 12-byte IV, a 16-byte tag, the
 * ciphertext of the payload's UTF-8 JSON. `key` is the client's `SERVICE_MASTER_KEY` (32 bytes,
 * base64 or raw). Never throws: a wrong key and a modified envelope both give
 * `authentication-failed` (GCM cannot tell them apart).
 */
export function decryptPayload(payload: unknown, key: string | Uint8Array): DecryptOutcome {
  let bytes: Uint8Array;
  if (typeof key === 'string') {
    const parsed = parseEnvelopeKey(key);
    if (parsed.kind !== 'valid') return { kind: 'failed', reason: 'invalid-key' };
    bytes = parsed.key;
  } else if (key instanceof Uint8Array && key.byteLength === KEY_BYTES) bytes = key;
  else return { kind: 'failed', reason: 'invalid-key' };
  const opened = openPayloadEnvelope(payload, bytes);
  if (opened.kind === 'opened') return { kind: 'ok', payload: opened.payload };
  return {
    kind: 'failed',
    reason: opened.reason === 'authentication-failed' ? 'authentication-failed' : 'malformed',
  };
}
