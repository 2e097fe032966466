import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { hashSecret } from '../auth/secrets.js';

/*
 * A run's public share token: `fls_` and 32 random bytes (256 bits) in base64url, so that it can
 * be neither guessed nor told from another kind of credential. The store keeps its SHA-256, which
 * a request's token is looked up by (a plain hash suffices for a random value this long, as for
 * API keys), and the token sealed with AES-256-GCM under a key derived from the server's secret,
 * which only serves to show the run's team its current link.
 */

const PREFIX = 'fls_';
const TOKEN = /^fls_[A-Za-z0-9_-]{43}$/;
/** What the key is derived for: another use of the same secret gets another key. */
const KEY_INFO = 'flightlog share token sealing/1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export function generateShareToken(): string {
  return `${PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** True for text shaped like a share token (anything else is refused before any lookup). */
export function isShareToken(text: string): boolean {
  return TOKEN.test(text);
}

/** What the store keeps to find a token's run. */
export function shareTokenHash(token: string): string {
  return hashSecret(token);
}

/** Seals and opens share tokens with the key derived from `secret`. */
export class ShareTokenSeal {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), KEY_INFO, 32));
  }

  seal(token: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(token, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
  }

  /** The token, or undefined when `sealed` was sealed under another secret (or is damaged). */
  open(sealed: string): string | undefined {
    try {
      const bytes = Buffer.from(sealed, 'base64url');
      if (bytes.length <= IV_BYTES + TAG_BYTES) return undefined;
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      const token = Buffer.concat([
        decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8');
      return isShareToken(token) ? token : undefined;
    } catch {
      return undefined;
    }
  }
}
