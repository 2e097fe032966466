import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decryptPayload, sealPayloadEnvelope } from '@flightlog/protocol';
import { FlightlogClient } from '../../src/index.js';
import { RecordingLogger } from '@flightlog/test-support';
import { ScriptedTransport } from '../harness/scripted-transport.js';
import { parseMasterKey } from '../../src/payload-cipher.js';

const key = randomBytes(32);
const keyText = key.toString('base64');
const payload = {
  name: 'vault.read',
  output: 'secret ✓ 🚀',
  nested: { n: 1.5, list: [null, true] },
};

describe('payload encryption (AES-256-GCM envelope)', () => {
  it('round-trips: decryptPayload opens what the client sealed, with the base64 key or the raw bytes', () => {
    const envelope = sealPayloadEnvelope(JSON.stringify(payload), key);
    expect(Object.keys(envelope)).toEqual(['alg', 'iv', 'tag', 'ciphertext']);
    expect(envelope.alg).toBe('AES-256-GCM');
    expect(Buffer.from(envelope.iv, 'base64')).toHaveLength(12);
    expect(Buffer.from(envelope.tag, 'base64')).toHaveLength(16);
    expect(JSON.stringify(envelope)).not.toContain('secret');
    expect(decryptPayload(envelope, keyText)).toEqual({ kind: 'ok', payload });
    expect(decryptPayload(envelope, key)).toEqual({ kind: 'ok', payload });
    expect(decryptPayload(envelope, key.toString('base64url'))).toEqual({ kind: 'ok', payload });
  });

  it('uses a fresh IV for every payload, so equal payloads never look equal', () => {
    const a = sealPayloadEnvelope('{"x":1}', key);
    const b = sealPayloadEnvelope('{"x":1}', key);
    expect(a.iv).not.toBe(b.iv);
    expect(a.ciphertext).not.toBe(b.ciphertext);
  });

  it('detects tampering with the ciphertext, the tag or the IV', () => {
    const envelope = sealPayloadEnvelope(JSON.stringify(payload), key);
    const flip = (text: string) => {
      const bytes = Buffer.from(text, 'base64');
      bytes[0] = (bytes[0] ?? 0) ^ 1;
      return bytes.toString('base64');
    };
    for (const field of ['ciphertext', 'tag', 'iv'] as const)
      expect(decryptPayload({ ...envelope, [field]: flip(envelope[field]) }, keyText)).toEqual({
        kind: 'failed',
        reason: 'authentication-failed',
      });
  });

  it('refuses a wrong key, an invalid key and a malformed envelope, without throwing', () => {
    const envelope = sealPayloadEnvelope(JSON.stringify(payload), key);
    expect(decryptPayload(envelope, randomBytes(32).toString('base64'))).toEqual({
      kind: 'failed',
      reason: 'authentication-failed',
    });
    for (const bad of [
      '',
      'short',
      randomBytes(31).toString('base64'),
      'not base64 at all!!',
      randomBytes(16),
    ])
      expect(decryptPayload(envelope, bad)).toEqual({ kind: 'failed', reason: 'invalid-key' });
    for (const malformed of [
      null,
      'text',
      { ...envelope, alg: 'AES-128-GCM' },
      { ...envelope, iv: 'AAAA' },
      { alg: 'AES-256-GCM' },
    ])
      expect(decryptPayload(malformed, keyText)).toEqual({ kind: 'failed', reason: 'malformed' });
  });

  it('reads SERVICE_MASTER_KEY strictly: exactly 32 bytes of base64', () => {
    expect(parseMasterKey(undefined)).toEqual({ kind: 'absent' });
    expect(parseMasterKey(keyText)).toMatchObject({ kind: 'valid' });
    expect(parseMasterKey(` ${keyText}\n`)).toMatchObject({ kind: 'valid' });
    expect(parseMasterKey(keyText.replace(/=+$/, ''))).toMatchObject({ kind: 'valid' });
    expect(parseMasterKey('')).toEqual({ kind: 'invalid', reason: 'the key is empty' });
    expect(parseMasterKey(randomBytes(24).toString('base64'))).toEqual({
      kind: 'invalid',
      reason: 'the key decodes to 24 bytes, not 32',
    });
    expect(parseMasterKey(randomBytes(32).toString('hex'))).toMatchObject({ kind: 'invalid' });
  });

  it('client.payloadMode tells what really happens to payloads: plain, encrypted, withheld, disabled', async () => {
    const modeWith = async (env: Record<string, string | undefined>, enabled = true) => {
      const transport = new ScriptedTransport();
      const client = new FlightlogClient(
        { apiKey: 'k', enabled, logger: new RecordingLogger(), flushOnExit: false },
        { transport, env },
      );
      client.startSession({ inputSummary: 'x' }).custom({ name: 'secret', data: 's3cret' });
      await client.close();
      const event = transport.requests[0]?.items[0]?.events[0];
      return {
        mode: client.payloadMode,
        encrypted: event?.payloadEncrypted,
        payload: event?.payload,
      };
    };
    expect(await modeWith({})).toMatchObject({ mode: 'plain', encrypted: false });
    expect(await modeWith({ SERVICE_MASTER_KEY: keyText })).toMatchObject({
      mode: 'encrypted',
      encrypted: true,
    });
    for (const SERVICE_MASTER_KEY of ['', 'not-a-key', randomBytes(16).toString('base64')])
      expect(await modeWith({ SERVICE_MASTER_KEY })).toMatchObject({
        mode: 'withheld',
        encrypted: false,
        payload: { withheld: true },
      });
    expect((await modeWith({ SERVICE_MASTER_KEY: keyText }, false)).mode).toBe('disabled');
  });
});
