import { readFileSync } from 'node:fs';
import { getBase58Decoder } from '@solana/kit';

/*
 * `ANCHOR_KEYPAIR`: the anchoring keypair as `solana-keygen new` writes it — a JSON array of 64
 * bytes (the secret key, then the public key) — either the path of such a file or the array
 * itself. The value is never echoed in an error: it is a secret, even when it is a wrong one.
 */

/** The 64 bytes, or why the setting holds none. */
export function readAnchorKeypair(setting: string): Uint8Array | string {
  const inline = setting.trimStart().startsWith('[');
  let text: string;
  if (inline) text = setting;
  else {
    try {
      text = readFileSync(setting, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      return `its file cannot be read (${code})`;
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return `${inline ? 'it' : 'its file'} is not JSON`;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 64 ||
    !parsed.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)
  )
    return `${inline ? 'it' : 'its file'} is not a JSON array of 64 bytes (solana-keygen's format)`;
  return Uint8Array.from(parsed as number[]);
}

/** The keypair's address (base58 of its public half): who anchors, for anyone to check. */
export function anchorAddressOf(keypair: Uint8Array): string {
  return getBase58Decoder().decode(keypair.slice(32, 64));
}
