// Issue 26: PostgreSQL or S3 unavailable under a running pg-s3 node (the pg-s3 project runs it;
// fs skips it). The node reaches its PostgreSQL and its S3 server through TCP relays (helpers/relay.ts)
// that can be cut (connections reset, new ones refused) and restored: while one is cut, readiness
// is 503 naming it and requests that need it are a JSON 503 (`catalog_unavailable`,
// `block_store_unavailable`) with nothing half-written; once it is back the same node serves
// again without a restart.
import { createHash } from 'node:crypto';
import { DeleteBucketCommand, DeleteObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { Api, devToken } from './helpers/docs-client.js';
import { seededBytes } from './helpers/http.js';
import { Relay } from './helpers/relay.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const shared = TEST_BACKEND === 'pg-s3';

interface Check {
  name: string;
  status: string;
  detail?: string;
}
if (!shared) console.warn('pg-outage test skipped: it needs PostgreSQL (the pg-s3 project runs it)');

describe.skipIf(!shared)('PostgreSQL unavailable under a pg-s3 node', () => {
  let server: TestServer;
  let relay: Relay;
  let s3Relay: Relay;
  let api: Api;
  const root = tempRoot();

  /** `url` through a new relay: the relay and the rewritten URL. */
  async function relayed(raw: string): Promise<[Relay, string]> {
    const url = new URL(raw);
    const r = new Relay({ host: url.hostname, port: Number(url.port) });
    await r.open();
    url.hostname = '127.0.0.1';
    url.port = String(r.port);
    return [r, url.toString().replace(/\/$/, '')];
  }

  beforeAll(async () => {
    const env = await backendEnv(root);
    const [pgRelay, pgUrl] = await relayed(env.SVC_PG_URL!);
    const [s3r, s3Url] = await relayed(env.SVC_S3_ENDPOINT!);
    relay = pgRelay;
    s3Relay = s3r;
    server = await startServer({ ...env, SVC_PG_URL: pgUrl, SVC_S3_ENDPOINT: s3Url, SVC_HEALTH_TIMEOUT: '2s' }, root);
    api = new Api(server.url, await devToken(server.url, { scope: 'doc.create doc.read' }));
  });
  afterAll(async () => {
    await server?.stop();
    await relay?.cut().catch(() => {});
    await s3Relay?.cut().catch(() => {});
  });

  it('readiness 503 naming postgres, JSON 503 catalog_unavailable for writes and reads, then back without a restart', async () => {
    const before = await api.newDocument(seededBytes(5000, 1), { contentType: 'application/octet-stream' });
    const pending = await api.post('/v1/documents', {});
    expect(pending.status).toBe(201);

    await relay.cut();
    const ready = await fetch(`${server.url}/api/health/ready`);
    expect(ready.status).toBe(503);
    const checks = ((await ready.json()) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 'postgres')?.status).not.toBe('ok');
    // In words, naming where: refused (a new connection) or lost (one the cut reset).
    expect(checks.find((c) => c.name === 'postgres')?.detail).toMatch(new RegExp(`^(cannot connect to 127\\.0\\.0\\.1:${relay.port}: connection refused|the connection to 127\\.0\\.0\\.1:${relay.port} was lost .*)$`));
    const unavailable = { error: 'catalog_unavailable', message: 'PostgreSQL (the catalog) is not answering; retry once it is back' };
    const created = await api.post('/v1/documents', {});
    expect([created.status, created.json, created.headers.get('retry-after')]).toEqual([503, unavailable, '5']);
    const read = await api.get(`/v1/documents/${before.documentId}`);
    expect([read.status, read.json]).toEqual([503, unavailable]);
    const put = await api.putBytes(pending.json.uploadId, seededBytes(3000, 2), 'application/octet-stream');
    expect(put.status).toBe(503);
    const blob = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', body: seededBytes(4000, 3) as Uint8Array<ArrayBuffer> });
    expect(blob.status).toBe(503);
    expect(((await blob.json()) as { error: string }).error).toBe('catalog_unavailable');

    await relay.restore();
    for (let i = 0; ; i++) {
      if ((await fetch(`${server.url}/api/health/ready`)).status === 200) break;
      if (i > 100) throw new Error('not ready 10 s after PostgreSQL came back');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Nothing half-written: the document made before is as it was, the upload still open.
    const again = await api.get(`/v1/documents/${before.documentId}`);
    expect([again.status, again.json.currentVersionId]).toEqual([200, before.versionId]);
    expect((await api.get(`/v1/documents/${before.documentId}/versions`)).json.versions).toHaveLength(1);
    expect((await api.putBytes(pending.json.uploadId, seededBytes(3000, 2), 'application/octet-stream')).status).toBe(204);
    expect((await api.post(`/v1/uploads/${pending.json.uploadId}/finalize`, {})).status).toBe(201);
    const after = await api.newDocument(seededBytes(6000, 4), { contentType: 'application/octet-stream' });
    expect(after.versionId).toBeDefined();
  });

  it('S3 cut: readiness 503 naming s3, an upload is a JSON 503 block_store_unavailable, then back without a restart', async () => {
    await s3Relay.cut();
    const ready = await fetch(`${server.url}/api/health/ready`);
    expect(ready.status).toBe(503);
    const checks = ((await ready.json()) as { checks: Check[] }).checks;
    expect(checks.find((c) => c.name === 's3')?.status).not.toBe('ok');
    expect(checks.find((c) => c.name === 's3')?.detail).toMatch(new RegExp(`^cannot connect to 127\\.0\\.0\\.1:${s3Relay.port}: (connection refused|the connection was reset|the connection was closed)$`));
    // Fresh bytes of more than one block: they must reach the bucket.
    const body = seededBytes(3 * 1024 * 1024, 77);
    const refused = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', body: body as Uint8Array<ArrayBuffer> });
    const refusedText = await refused.clone().text();
    expect(refused.status, refusedText).toBe(503);
    expect(await refused.json()).toEqual({ error: 'block_store_unavailable', message: 'The block store (S3) is not answering; retry once it is back' });
    expect(refused.headers.get('retry-after')).toBe('5');
    const id = `sha-256:${createHash('sha256').update(body).digest('hex')}:${body.length}`;
    await s3Relay.restore();
    for (let i = 0; ; i++) {
      if ((await fetch(`${server.url}/api/health/ready`)).status === 200) break;
      if (i > 100) throw new Error('not ready 10 s after S3 came back');
      await new Promise((r) => setTimeout(r, 100));
    }
    // Nothing half-published: the refused blob is absent; sent again it is stored whole.
    expect((await fetch(`${server.url}/api/v1/blobs/${id}`, { method: 'HEAD' })).status).toBe(404);
    const stored = await fetch(`${server.url}/api/v1/blobs`, { method: 'POST', body: body as Uint8Array<ArrayBuffer> });
    expect(stored.status).toBe(201);
    expect(((await (await fetch(`${server.url}/api/v1/blobs/${id}/verify`, { method: 'POST' })).json()) as { verified: boolean }).verified).toBe(true);
  });

  // Last: the server is left without its bucket.
  it('the bucket deleted under the node: readiness 503 saying so in words, never UnknownError', async () => {
    const env = await backendEnv(root);
    const client = new S3Client({ endpoint: env.SVC_S3_ENDPOINT, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID!, secretAccessKey: env.AWS_SECRET_ACCESS_KEY! } });
    try {
      // Emptied first (s3rver deletes empty buckets only); a journal segment written meanwhile is taken on the next round.
      for (let round = 0; ; round++) {
        const listed = await client.send(new ListObjectsV2Command({ Bucket: env.SVC_S3_BUCKET }));
        for (const o of listed.Contents ?? []) await client.send(new DeleteObjectCommand({ Bucket: env.SVC_S3_BUCKET, Key: o.Key }));
        if (listed.IsTruncated) continue;
        const deleted = await client.send(new DeleteBucketCommand({ Bucket: env.SVC_S3_BUCKET })).then(() => true, (err: { name?: string }) => {
          if (err.name !== 'BucketNotEmpty' || round > 20) throw err;
          return false;
        });
        if (deleted) break;
      }
    } finally {
      client.destroy();
    }
    const ready = await fetch(`${server.url}/api/health/ready`);
    expect(ready.status).toBe(503);
    const s3 = ((await ready.json()) as { checks: Check[] }).checks.find((c) => c.name === 's3');
    expect(s3).toMatchObject({ status: 'failed', detail: `the bucket "${env.SVC_S3_BUCKET}" does not exist at http://127.0.0.1:${s3Relay.port} (404 to HeadBucket)` });
    expect(s3?.detail).not.toContain('UnknownError');
  });
});
