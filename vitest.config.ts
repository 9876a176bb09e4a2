import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The suites that run once more against the pg-s3 backend (PostgreSQL + S3, started by
 * test/helpers/backends.ts): one suite, parameterized by SVC_TEST_BACKEND, not copies. Views and
 * legacy imports are there too: their bytes go through the CAS into the bucket.
 */
const PG_S3_SUITES = [
  'test/blob-api.test.ts',
  'test/uploads-api.test.ts',
  'test/security.test.ts',
  'test/tenant-policy.test.ts',
  'test/gc.test.ts',
  'test/locality.test.ts',
  'test/shared-sessions.test.ts',
  'test/gc-nodes.test.ts',
  'test/robustness.test.ts',
  'test/workflows.test.ts',
  'test/legacy-import.test.ts',
  'test/pg-outage.test.ts',
  'test/multi-node-idempotency.test.ts',
  'test/metadata-envelope.test.ts',
  'test/metadata-search.test.ts',
  'test/bulk-migration.test.ts',
  'test/cursors.test.ts',
  'test/tus.test.ts',
  'test/tus-clients.test.ts',
  'test/usage.test.ts',
  'test/tenant-metadata.test.ts',
  'test/byte-gate.test.ts',
  'test/pg-clock.test.ts',
  'test/pg-connections.test.ts',
  'test/catalog-schema.test.ts',
  // Issue 40: statements per document step, counted by PostgreSQL.
  'test/pg-document-statements.test.ts',
  // Issue 39: the S3 listener with real clients (two pg-s3 nodes share one multipart upload).
  'test/s3-api.test.ts',
  'test/s3-multipart-api.test.ts',
  'test/s3-checksum-types.test.ts',
  'test/s3-cli.test.ts',
  'test/s3-read-after-write.test.ts',
];

/**
 * Three pg-s3 nodes on a PostgreSQL cluster and a Ceph radosgw of each file's own (issue 19; issue
 * 26: models, the development secret, documents and jobs): not a backend parameterization, so a project of its own.
 */
const MULTI_NODE = [
  'test/multi-node.test.ts',
  'test/multi-node-models.test.ts',
  'test/multi-node-documents.test.ts',
  // Issue 37: tenant shares on two and three pg-s3 nodes and on two s3 nodes.
  'test/tenancy-cluster.test.ts',
];

/**
 * The S3-only backend runs the same blob suites (one run per backend, not copies); GC marking
 * shared through PostgreSQL (gc-nodes) is pg-s3's alone. Sessions shared through the bucket by two
 * S3-only nodes on radosgw: s3-shared-sessions; the documents node's lease: s3-documents-lease.
 */
const S3_SUITES = [
  'test/blob-api.test.ts',
  'test/uploads-api.test.ts',
  'test/security.test.ts',
  'test/tenant-policy.test.ts',
  'test/gc.test.ts',
  'test/locality.test.ts',
  'test/s3-shared-sessions.test.ts',
  'test/s3-documents-lease.test.ts',
  'test/tus.test.ts',
  'test/usage.test.ts',
  'test/tenant-metadata.test.ts',
  'test/byte-gate.test.ts',
  'test/s3-api.test.ts',
  'test/s3-multipart-api.test.ts',
  'test/s3-checksum-types.test.ts',
  'test/s3-cli.test.ts',
  'test/s3-read-after-write.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // HTTP suites each start real servers; two at a time suits a 2-core machine.
    maxWorkers: 2,
    // Every s3rver a test starts in its process answers a PUT once the object is written whole.
    setupFiles: ['test/helpers/s3rver-atomic-puts.mjs', 'test/helpers/s3-port.mjs'],
    projects: [
      { extends: true, test: { name: 'fs', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...MULTI_NODE] } },
      { extends: true, test: { name: 'pg-s3', include: PG_S3_SUITES, env: { SVC_TEST_BACKEND: 'pg-s3' } } },
      { extends: true, test: { name: 'multi-node', include: MULTI_NODE } },
      // The same suites against the S3-only backend on s3rver (docs/backends.md, "s3").
      { extends: true, test: { name: 's3', include: S3_SUITES, env: { SVC_TEST_BACKEND: 's3' } } },
    ],
  },
});
