// Issue 37: the catalog's schema version (engine/store/catalog-schema.ts). A node refuses a
// catalog that a newer svc upgraded: at start (exit 2, one line naming the versions), and, on
// pg-s3 where nodes run beside each other, while it runs (its writes are 503
// `catalog_schema_newer`, its readiness fails), so that an older node cannot write documents the
// newer one's search index never sees. A newer version is written into the catalog the way a
// newer svc would (its unit store), since no newer svc exists yet.
import { afterAll, describe, expect, it } from 'vitest';
import { CATALOG_SCHEMA, CATALOG_SCHEMA_VERSION } from '../dist/engine/store/catalog-schema.js';
import { CatalogEnv } from '../dist/engine/store/lmdb/env.js';
import { LmdbUnitStore } from '../dist/engine/store/lmdb/unit-store.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { seededBytes } from './helpers/http.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const NEWER = CATALOG_SCHEMA_VERSION + 1;
const words = `the catalog's schema is version ${NEWER}, newer than this svc knows (${CATALOG_SCHEMA_VERSION}): upgrade svc`;

describe('the catalog schema version', () => {
  const servers: TestServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it.skipIf(TEST_BACKEND !== 'fs')('fs: a data directory whose catalog a newer svc upgraded is refused at start: exit 2, one line naming the versions', async () => {
    const root = tempRoot();
    const first = await startServer({}, root);
    const api = new Api(first.url, await devToken(first.url, { scope: 'doc.create doc.read' }));
    await api.newDocument(seededBytes(2000, 1), { contentType: 'application/octet-stream' });
    await first.stop();

    // The catalog as this svc left it says its version; a newer svc raises it.
    const env = CatalogEnv.open(root, 'relaxed');
    const units = new LmdbUnitStore(env);
    expect(await units.get(CATALOG_SCHEMA, 'schema')).toEqual({ version: CATALOG_SCHEMA_VERSION });
    await units.run((unit) => unit.put(CATALOG_SCHEMA, 'schema', { version: NEWER }));
    await units.close();
    await env.close();

    await expect(startServer({}, root)).rejects.toThrow(`server exited with 2: svc: SVC_FS_ROOT: ${words}\n`);
  });

  it.skipIf(TEST_BACKEND !== 'pg-s3')('pg-s3: a running node stops writing and is not ready once a newer node upgrades the catalog; a node started then is refused', async () => {
    const root = tempRoot();
    const env = await backendEnv(root);
    const node = await startServer({ ...env, SVC_HEALTH_TIMEOUT: '2s' }, root);
    servers.push(node);
    const api = new Api(node.url, await devToken(node.url, { scope: 'doc.create doc.read' }));
    const doc = await api.newDocument(seededBytes(2000, 1), { contentType: 'application/octet-stream' });
    expect((await fetch(`${node.url}/api/health/ready`)).status).toBe(200);

    // A newer node upgrades the catalog.
    const newer = await PgBlobCatalog.open(env.SVC_PG_URL!, { poolSize: 1 });
    const units = newer.unitStore();
    try {
      expect(await units.get(CATALOG_SCHEMA, 'schema')).toEqual({ version: CATALOG_SCHEMA_VERSION });
      await units.run((unit) => unit.put(CATALOG_SCHEMA, 'schema', { version: NEWER }));
    } finally {
      await units.close();
      await newer.close();
    }

    // At once: its next write is refused, whole.
    const created = await api.post('/v1/documents', {});
    expect([created.status, created.json]).toEqual([503, { error: 'catalog_schema_newer', message: `This node no longer writes: ${words} on this node` }]);
    expect(created.headers.get('retry-after')).toBe('5');
    // Reads go on.
    expect((await api.get(`/v1/documents/${doc.documentId}`)).status).toBe(200);
    // Its readiness says so (probed every 5 s; asked here directly).
    const ready = await fetch(`${node.url}/api/health/ready`);
    expect(ready.status).toBe(503);
    const checks = ((await ready.json()) as { checks: Array<{ name: string; status: string; detail?: string }> }).checks;
    expect(checks.find((c) => c.name === 'postgres')).toMatchObject({ status: 'failed', detail: `${words}: this node writes nothing more` });

    // A node of this version started now is refused.
    await expect(startServer(env, tempRoot())).rejects.toThrow(`server exited with 2: svc: SVC_PG_URL: ${words}\n`);
  });
});
