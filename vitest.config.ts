import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // HTTP suites each start real servers; two at a time suits a 2-core machine.
    maxWorkers: 2,
  },
});
