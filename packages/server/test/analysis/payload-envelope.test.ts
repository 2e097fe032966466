import { createCipheriv, randomBytes } from 'node:crypto';
import { isPayloadEnvelope, openPayloadEnvelope, parseEnvelopeKey } from '@flightlog/protocol';
import { describe, expect, it } from 'vitest';
import { newMasterKey, seal } from '../fixtures/runs.js';

describe('payload envelope (protocol)', () => {
  const payload = { name: 'vault.lookup', input: { seedHint: 'é ✓ 😀' }, n: 1.5 };

  it('opens what the client library seals', () => {
    const key = newMasterKey();
    const envelope = seal(payload, key);
    expect(isPayloadEnvelope(envelope)).toBe(true);
    expect(openPayloadEnvelope(envelope, key)).toEqual({ kind: 'opened', payload });
  });

  it('never throws: wrong key, tampering, wrong shapes and non-objects are outcomes', () => {
    const key = newMasterKey();
    const envelope = seal(payload, key);
    const flipped = Buffer.from(envelope.ciphertext!, 'base64');
    flipped[0] = flipped[0]! ^ 1;
    const cases: [unknown, Uint8Array, string][] = [
      [envelope, newMasterKey(), 'authentication-failed'],
      [{ ...envelope, ciphertext: flipped.toString('base64') }, key, 'authentication-failed'],
      [{ ...envelope, iv: randomBytes(8).toString('base64') }, key, 'not-an-envelope'],
      [{ ...envelope, alg: 'AES-128-GCM' }, key, 'not-an-envelope'],
      [{ provider: 'openai' }, key, 'not-an-envelope'],
      [null, key, 'not-an-envelope'],
      ['a string', key, 'not-an-envelope'],
      [envelope, randomBytes(16), 'invalid-key'],
    ];
    for (const [value, k, reason] of cases)
      expect(openPayloadEnvelope(value, k)).toEqual({ kind: 'failed', reason });
  });

  it('refuses plaintext that is not a JSON object', () => {
    const key = newMasterKey();
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const ciphertext = Buffer.concat([cipher.update('[1,2,3]', 'utf8'), cipher.final()]);
    const envelope = {
      alg: 'AES-256-GCM',
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      ciphertext: ciphertext.toString('base64'),
    };
    expect(openPayloadEnvelope(envelope, key)).toEqual({ kind: 'failed', reason: 'not-json' });
  });

  it('reads a 32-byte base64 key and explains any other', () => {
    const key = newMasterKey();
    expect(parseEnvelopeKey(` ${key.toString('base64')}\n`)).toEqual({ kind: 'valid', key });
    expect(parseEnvelopeKey(key.toString('base64url'))).toEqual({ kind: 'valid', key });
    expect(parseEnvelopeKey('')).toEqual({ kind: 'invalid', reason: 'it is empty' });
    expect(parseEnvelopeKey('###')).toEqual({ kind: 'invalid', reason: 'it is not base64' });
    expect(parseEnvelopeKey(randomBytes(31).toString('base64'))).toEqual({
      kind: 'invalid',
      reason: 'it decodes to 31 bytes, not 32',
    });
  });
});
