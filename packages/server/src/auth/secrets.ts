import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ulid } from 'ulidx';

/**
 * API keys and verify tokens are 256-bit random values with a readable prefix. Because they are
 * random and long, a plain SHA-256 is a sufficient one-way hash for storage and lookup.
 */
export function generateApiKey(): string {
  return `flk_${randomBytes(32).toString('base64url')}`;
}

export function generateVerifyToken(): string {
  return `flv_${randomBytes(32).toString('base64url')}`;
}

export function newKeyId(): string {
  return `key_${ulid()}`;
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of two secrets of any length. */
export function secretsEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right);
}

/** The credential of an `Authorization: Bearer <credential>` header, if well formed. */
export function bearerCredential(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  return match?.[1];
}
