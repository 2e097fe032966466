import type { LabelledRun } from './labelled-run.js';
import { runOf, signature } from './run-builder.js';

/** The clients' SERVICE_MASTER_KEY for these runs (fixed, so that the set is reproducible). */
export const LABELLED_KEY = Buffer.alloc(32, 7);
const OTHER_KEY = Buffer.alloc(32, 9);

/** Text only the encrypted payloads hold: it must never reach an autopsy. */
export const LABELLED_SECRETS = ['SEED-HINT-5150', 'MEMO-TREASURY-8812'];

function treasuryMove() {
  const r = runOf({
    status: 'errored',
    input: 'Move the treasury float to cold storage',
    error: 'Transfer failed: blockhash not found',
  });
  r.llm('gpt-4o', { prompt: `Plan it. ${LABELLED_SECRETS[0]}` });
  r.tool('vault.lookup', { seedHint: LABELLED_SECRETS[0] });
  r.tx('transfer', '5000000000', {
    signature: signature('3TreasuryMove'),
    error: 'blockhash not found',
  });
  return r;
}

function flakyVault() {
  const r = runOf({ status: 'completed', input: 'Rotate the vault key', output: 'Rotated' });
  r.tool('vault.rotate', { memo: LABELLED_SECRETS[1] }, { error: '409 rotation in progress' });
  r.tool('vault.rotate', { memo: LABELLED_SECRETS[1] });
  return r;
}

/** Payloads encrypted by the client: read with the worker's key, or not at all. */
export const ENCRYPTED: LabelledRun[] = [
  {
    id: 'encrypted-failure-without-key',
    shape: 'encrypted',
    why: 'a transaction failed (blockhash not found); which one the payloads would say, and they are unreadable',
    run: () => treasuryMove().done({ encryptWith: LABELLED_KEY }),
    mustContain: ['failed', 'blockhash not found', 'encrypted'],
    mustNotContain: ['loop', ...LABELLED_SECRETS],
  },
  {
    id: 'encrypted-failure-with-key',
    shape: 'encrypted',
    why: 'the transfer failed (blockhash not found), readable with the key',
    masterKey: LABELLED_KEY,
    run: () => treasuryMove().done({ encryptWith: LABELLED_KEY }),
    mustContain: ['transfer', 'blockhash not found', '3Treasur'],
    mustNotContain: ['loop', '(encrypted)', ...LABELLED_SECRETS],
  },
  {
    id: 'encrypted-failure-wrong-key',
    shape: 'encrypted',
    why: 'a transaction failed (blockhash not found); the worker’s key does not open the payloads',
    masterKey: OTHER_KEY,
    run: () => treasuryMove().done({ encryptWith: LABELLED_KEY }),
    mustContain: ['blockhash not found', 'encrypted'],
    mustNotContain: ['loop', ...LABELLED_SECRETS],
  },
  {
    id: 'encrypted-retry-with-key',
    shape: 'encrypted',
    why: 'vault.rotate conflicted once and worked when retried (inputs compared after decryption)',
    masterKey: LABELLED_KEY,
    run: () => flakyVault().done({ encryptWith: LABELLED_KEY }),
    mustContain: ['succeeded', 'vault.rotate', '2 attempts', '409 rotation in progress'],
    mustNotContain: ['loop', ...LABELLED_SECRETS],
  },
  {
    id: 'encrypted-retry-without-key',
    shape: 'encrypted',
    why: 'one step failed and a later one worked; without the key nothing says they were the same call',
    run: () => flakyVault().done({ encryptWith: LABELLED_KEY }),
    mustContain: ['completed', '1 failed step', '409 rotation in progress'],
    mustNotContain: ['loop', 'attempts', 'verdict: succeeded', ...LABELLED_SECRETS],
  },
];
