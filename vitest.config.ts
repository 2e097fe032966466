import { configDefaults, defineConfig } from 'vitest/config';
import { RELIABILITY_TESTS } from './vitest.reliability.config.js';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'e2e/**/*.test.ts'],
    // run once, by `npm run test:reliability` (which `npm test` runs after this suite)
    exclude: [...configDefaults.exclude, ...RELIABILITY_TESTS],
    globalSetup: ['packages/test-support/src/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});
