import { defineConfig } from 'vitest/config';

/**
 * The reliability suite (`npm run test:reliability`): faults, crashes, load and hostile input
 * against the real parts. Its own folder holds the tests that need a running service process
 * under load; the capability folders keep the fault and attack tests that belong to one
 * capability, listed here so the suite shows in one place everything it proves.
 */
export const RELIABILITY_TESTS = [
  'packages/server/test/reliability/**/*.test.ts',
  'packages/server/test/live/live-redis-fault.test.ts',
  'packages/server/test/ingest/batch-property.test.ts',
  'packages/server/test/ingest/batch-security.test.ts',
  'packages/server/test/live/live-access-multi-instance.test.ts',
  'packages/server/test/http/connection-errors.test.ts',
  'packages/server/test/auth/identity.test.ts',
  'packages/server/test/auth/api-key-brute-force.test.ts',
];

export default defineConfig({
  test: {
    include: RELIABILITY_TESTS,
    globalSetup: ['packages/test-support/src/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
