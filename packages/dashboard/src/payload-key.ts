/*
 * Opening encrypted payloads in the browser only. The client library seals each payload with
 * AES-256-GCM under the user's key (`SERVICE_MASTER_KEY`: 32 bytes, base64); the server stores
 * the envelope and never sees the key. Here the user pastes it, Web Crypto opens the envelope,
 * and the key stays in this page's memory: never stored, never sent (the page's CSP allows
 * requests to this server only, and no request carries it).
 */
let pageKey: CryptoKey | undefined;
/** Counts key changes: what was opened (or not) with the last key is opened again. */
let keyVersion = 0;
const listeners = new Set<() => void>();

export type OpenOutcome =
  | { kind: 'opened'; payload: unknown }
  | { kind: 'locked'; reason: 'no-key' | 'wrong-key' | 'not-an-envelope' };

function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  const normal = text.trim().replace(/-/g, '+').replace(/_/g, '/');
  const binary = atob(normal);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Reads and keeps the key for this page; a key that is not 32 bytes of base64 is refused. */
export async function setPayloadKey(text: string): Promise<string | null> {
  let raw: Uint8Array<ArrayBuffer>;
  try {
    raw = fromBase64(text);
  } catch {
    return 'That is not base64.';
  }
  if (raw.byteLength !== 32) return `That key is ${raw.byteLength} bytes; a payload key is 32.`;
  pageKey = await crypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['decrypt']);
  keyVersion++;
  for (const listener of listeners) listener();
  return null;
}

export function forgetPayloadKey(): void {
  pageKey = undefined;
  keyVersion++;
  for (const listener of listeners) listener();
}

export const payloadKeyVersion = () => keyVersion;

export function onPayloadKeyChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export async function openPayload(envelope: unknown): Promise<OpenOutcome> {
  if (!pageKey) return { kind: 'locked', reason: 'no-key' };
  const e = envelope as Record<string, unknown>;
  if (
    typeof e !== 'object' ||
    e === null ||
    typeof e.iv !== 'string' ||
    typeof e.tag !== 'string' ||
    typeof e.ciphertext !== 'string'
  )
    return { kind: 'locked', reason: 'not-an-envelope' };
  try {
    const iv = fromBase64(e.iv);
    const sealed = new Uint8Array([...fromBase64(e.ciphertext), ...fromBase64(e.tag)]);
    const plain = await crypto.subtle.decrypt({ name: 'AES-GCM', iv }, pageKey, sealed);
    return { kind: 'opened', payload: JSON.parse(new TextDecoder().decode(plain)) as unknown };
  } catch {
    // GCM cannot tell a wrong key from a modified envelope
    return { kind: 'locked', reason: 'wrong-key' };
  }
}
