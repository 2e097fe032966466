import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { EncryptedPayload } from '@flightlog/protocol';

/** The envelope's algorithm name; it doubles as the format version. */
export const PAYLOAD_ALGORITHM = 'AES-256-GCM';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** What became of `SERVICE_MASTER_KEY`. */
export type MasterKey =
  { kind: 'absent' } | { kind: 'valid'; key: Buffer } | { kind: 'invalid'; reason: string };

/**
 * Reads a master key: 32 bytes in standard or URL-safe base64 (padding optional). Anything else
 * is `invalid`, never silently used: a key that decodes to 31 bytes is a typo, not a key.
 */
export function parseMasterKey(value: string | Uint8Array | undefined): MasterKey {
  if (value === undefined) return { kind: 'absent' };
  if (typeof value !== 'string') {
    return value.byteLength === KEY_BYTES
      ? { kind: 'valid', key: Buffer.from(value) }
      : { kind: 'invalid', reason: `the key has ${value.byteLength} bytes, not ${KEY_BYTES}` };
  }
  const text = value.trim();
  if (text === '') return { kind: 'invalid', reason: 'the key is empty' };
  if (!BASE64.test(text)) return { kind: 'invalid', reason: 'the key is not base64' };
  const key = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.byteLength !== KEY_BYTES)
    return {
      kind: 'invalid',
      reason: `the key decodes to ${key.byteLength} bytes, not ${KEY_BYTES}`,
    };
  return { kind: 'valid', key };
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

function isEnvelope(value: unknown): value is EncryptedPayload {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  return (
    v.alg === PAYLOAD_ALGORITHM &&
    typeof v.iv === 'string' &&
    typeof v.tag === 'string' &&
    typeof v.ciphertext === 'string'
  );
}

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
  if (!isEnvelope(payload)) return { kind: 'failed', reason: 'malformed' };
  const iv = Buffer.from(payload.iv, 'base64');
  const tag = Buffer.from(payload.tag, 'base64');
  if (iv.byteLength !== IV_BYTES || tag.byteLength !== TAG_BYTES)
    return { kind: 'failed', reason: 'malformed' };
  let json: string;
  try {
    const decipher = createDecipheriv('aes-256-gcm', parsed.key, iv);
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
      return { kind: 'ok', payload: value as Record<string, unknown> };
  } catch {
    // authenticated but not JSON: not an envelope this client wrote
  }
  return { kind: 'failed', reason: 'malformed' };
}
