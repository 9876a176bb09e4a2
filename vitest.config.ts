import { defineConfig } from 'vitest/config';

/**
 * The blob suites that run once more against the pg-s3 backend (PostgreSQL + S3, started by
 * test/helpers/backends.ts): one suite, parameterized by SVC_TEST_BACKEND, not copies.
 */
const PG_S3_SUITES = ['test/blob-api.test.ts', 'test/uploads-api.test.ts', 'test/security.test.ts', 'test/tenant-policy.test.ts', 'test/gc.test.ts', 'test/locality.test.ts'];

/** The S3-only backend runs the same suites (one run per backend, not copies). */
const S3_SUITES = PG_S3_SUITES;

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // HTTP suites each start real servers; two at a time suits a 2-core machine.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'fs', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'pg-s3', include: PG_S3_SUITES, env: { SVC_TEST_BACKEND: 'pg-s3' } } },
      // The same suites against the S3-only backend on s3rver (docs/backends.md, "s3").
      { extends: true, test: { name: 's3', include: S3_SUITES, env: { SVC_TEST_BACKEND: 's3' } } },
    ],
  },
});
