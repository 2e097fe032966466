import { envelopeBytes, sealPayloadEnvelope } from '@flightlog/protocol';

/**
 * What happens to payloads before they leave the process, fixed when the client starts from
 * `SERVICE_MASTER_KEY`: sent as they are, encrypted, or (when the key is unusable) withheld, so a
 * misconfigured key never sends plaintext.
 */
export type PayloadSealing =
  { kind: 'plain' } | { kind: 'encrypt'; key: Buffer } | { kind: 'withhold'; reason: string };

/** The payload sent in place of every payload while the master key is unusable. */
export function withheldPayload(reason: string): { withheld: true; reason: string } {
  return { withheld: true, reason };
}

/** The wire JSON of a payload whose JSON is `json`. */
export function sealPayload(json: string, sealing: PayloadSealing): string {
  switch (sealing.kind) {
    case 'plain':
      return json;
    case 'encrypt':
      return JSON.stringify(sealPayloadEnvelope(json, sealing.key));
    case 'withhold':
      return JSON.stringify(withheldPayload(sealing.reason));
  }
}

/** Estimated wire bytes of a payload of `plainBytes` once sealed. */
export function sealedBytes(plainBytes: number, sealing: PayloadSealing): number {
  switch (sealing.kind) {
    case 'plain':
      return plainBytes;
    case 'encrypt':
      return envelopeBytes(plainBytes);
    case 'withhold':
      return 120;
  }
}

/** The event's `payloadEncrypted` under this sealing. */
export function isEncrypted(sealing: PayloadSealing): boolean {
  return sealing.kind === 'encrypt';
}
