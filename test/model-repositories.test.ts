// s3:// bundle URIs against a real S3-protocol server: s3rver (a devDependency) runs in this
// process on an ephemeral port with a temporary directory, the bundles are uploaded with
// @aws-sdk/client-s3, and the real svc server (a child process) fetches them over sockets with
// signed requests. gs:// is not covered: no Cloud Storage JSON API emulator can be installed
// from npm or Debian here (see docs/models.md, "Testing against S3 and GCS"). Where s3:// bundles
// may be read from: only under SVC_MODEL_ROOTS' s3:// prefixes once any root is named (none with
// security on by default), never the blob store's own bucket (a server on the s3 backend over the
// same s3rver), and a store's failure told in the runtime's words, not the SDK's. Every answer is
// checked against server/openapi/model-runtime.json (helpers/openapi.ts, `modelFetch`).

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { scoringPipeline } from './helpers/bundles.js';
import { hsToken } from './helpers/docs-client.js';
import { FIXTURES } from './helpers/models.js';
import { checkedFetch, modelFetch } from './helpers/openapi.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';
import { zipBundle } from './helpers/zip.js';

const AIRBNB = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip');
const AIRBNB_FRAME = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/leap_frame/frame.airbnb.json');
const haveAirbnb = existsSync(AIRBNB) && existsSync(AIRBNB_FRAME);
if (!haveAirbnb) console.warn(`${AIRBNB} not found: the airbnb-over-S3 test is skipped`);

const BUCKET = 'models';
const MAX_BUNDLE_BYTES = 1 << 20;
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
const REGION = 'us-east-1';

/** price = 2·x + 3·y + 10·index(color) + 1 (red 0, green 1, blue 2), as a zip. */
function scoringZip(): Buffer {
  return zipBundle(scoringPipeline());
}

const SCORING_FRAME = {
  schema: { fields: [{ name: 'color', type: 'string' }, { name: 'x', type: 'double' }, { name: 'y', type: 'double' }] },
  rows: [['green', 1, 2], ['blue', 0.5, 0]],
};
const SCORING_PRICES = [2 * 1 + 3 * 2 + 10 * 1 + 1, 2 * 0.5 + 10 * 2 + 1];

// ---- servers ----

const work = tempRoot('svc-repositories-test-');
let s3: S3rver;
let s3Endpoint: string;
let server: TestServer;

async function call(target: TestServer, method: string, path: string, body?: unknown, token?: string) {
  const res = await modelFetch(target.modelUrl + path, {
    method,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

/** The svc server configured for the S3 server under test, with `env` on top. */
function startSvc(env: Record<string, string> = {}): Promise<TestServer> {
  return startServer({
    MODEL_S3_ENDPOINT: s3Endpoint,
    MODEL_S3_FORCE_PATH_STYLE: 'true',
    AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    AWS_REGION: REGION,
    MODEL_MAX_BUNDLE_BYTES: String(MAX_BUNDLE_BYTES),
    MODEL_WARMUP_ROWS: '20',
    MODEL_LOAD_TIMEOUT: '20s',
    ...env,
  });
}

beforeAll(async () => {
  s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(work, 's3') });
  const { port } = (await s3.run()) as { port: number };
  s3Endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({ endpoint: s3Endpoint, forcePathStyle: true, region: REGION, credentials: CREDENTIALS });
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  const put = (key: string, body: Buffer) => client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));
  await put('scoring/model.zip', scoringZip());
  await put('dir with space/scöring.zip', scoringZip());
  await put('too-large.zip', randomBytes(MAX_BUNDLE_BYTES + 1));
  await put('not-a-zip.zip', Buffer.from('this is not a zip file'));
  if (haveAirbnb) await put('airbnb.model.lr.zip', readFileSync(AIRBNB));
  client.destroy();
  server = await startSvc();
}, 30_000);

afterAll(async () => {
  await server?.stop();
  await s3?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('s3:// bundles from a real S3-protocol server (s3rver)', () => {
  test('PUT s3://bucket/key registers the bundle (201) and transform computes with it', async () => {
    const uri = `s3://${BUCKET}/scoring/model.zip`;
    const r = await call(server, 'PUT', '/models/scoring', uri);
    expect(r.status, r.text).toBe(201);
    expect(r.json).toEqual({ modelName: 'scoring', uri });
    const t = await call(server, 'POST', '/models/scoring/transform?select=price', SCORING_FRAME);
    expect(t.status, t.text).toBe(200);
    expect(t.json.rows).toEqual(SCORING_PRICES.map((p) => [p]));
    // Nothing is left behind in the download directory.
    const downloads = join(server.root, 'model-runtime/downloads');
    expect(existsSync(downloads) ? readdirSync(downloads) : []).toEqual([]);
  });

  test('a key with spaces and non-ASCII characters, percent-encoded or not, is fetched', async () => {
    const uris = [`s3://${BUCKET}/dir with space/scöring.zip`, `s3://${BUCKET}/dir%20with%20space/sc%C3%B6ring.zip`];
    for (const [i, uri] of uris.entries()) {
      const r = await call(server, 'PUT', '/models/spaced', uri);
      expect(r.status, `${uri}: ${r.text}`).toBe(i === 0 ? 201 : 200);
      const t = await call(server, 'POST', '/models/spaced/transform?select=price', SCORING_FRAME);
      expect(t.json.rows).toEqual(SCORING_PRICES.map((p) => [p]));
    }
  });

  test('a missing key is a 400 URIError in the runtime\'s words, none of the SDK\'s; the previous registration stays', async () => {
    const uri = `s3://${BUCKET}/scoring/missing.zip`;
    const r = await call(server, 'PUT', '/models/scoring', uri);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': no such object`, code: 400 });
    expectNoSdkText(r.text);
    expect((await call(server, 'GET', '/models/scoring')).json.model.uri).toBe(`s3://${BUCKET}/scoring/model.zip`);
  });

  test('a missing bucket is a 400 URIError in the runtime\'s words', async () => {
    const uri = 's3://no-such-bucket/model.zip';
    const r = await call(server, 'PUT', '/models/nobucket', uri);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': no such object`, code: 400 });
    expectNoSdkText(r.text);
  });

  test('a store that does not answer is a 400 URIError saying so, in the runtime\'s words', async () => {
    const other = await startSvc({ MODEL_S3_ENDPOINT: 'http://127.0.0.1:9', MODEL_LOAD_TIMEOUT: '20s' });
    try {
      const uri = `s3://${BUCKET}/scoring/model.zip`;
      const r = await call(other, 'PUT', '/models/scoring', uri);
      expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': the store is unavailable`, code: 400 });
      expectNoSdkText(r.text);
    } finally {
      await other.stop();
    }
  });

  test('an object that is not a zip is a 400 BundleException', async () => {
    const r = await call(server, 'PUT', '/models/garbage', `s3://${BUCKET}/not-a-zip.zip`);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('BundleException');
    expect(r.json.message).toMatch(/^bundle is not a readable zip file: /);
  });

  test('an object over MODEL_MAX_BUNDLE_BYTES is refused (400 BundleException) from its declared length, again and again', async () => {
    const uri = `s3://${BUCKET}/too-large.zip`;
    const expected = {
      error: 'BundleException',
      message: `bundle at ${uri} is larger than ${MAX_BUNDLE_BYTES} bytes (MODEL_MAX_BUNDLE_BYTES)`,
      code: 400,
    };
    // More refusals than the S3 client has sockets (50). A refused body left unread holds its
    // socket until the load's MODEL_LOAD_TIMEOUT (20 s here) aborts it, so the 51st fetch
    // would wait that long for a socket; each answer must come at once instead.
    const slowest = { ms: 0, attempt: -1 };
    for (let i = 0; i <= 55; i++) {
      const started = Date.now();
      const r = i < 55
        ? await call(server, 'PUT', '/models/large', uri)
        : await call(server, 'PUT', '/models/after-large', `s3://${BUCKET}/scoring/model.zip`);
      if (Date.now() - started > slowest.ms) Object.assign(slowest, { ms: Date.now() - started, attempt: i });
      if (i < 55) expect(r.json).toEqual(expected);
      else expect(r.status, r.text).toBe(201);
    }
    expect(slowest.ms, `attempt ${slowest.attempt} took ${slowest.ms} ms`).toBeLessThan(3000);
  }, 60_000);

  // s3rver checks the access key id but does not verify SigV4 signatures, so a wrong secret
  // would pass; an unknown key id is refused as S3 refuses it.
  test('an unknown access key id is a 400 URIError saying access is denied, not S3\'s refusal', async () => {
    const other = await startSvc({ AWS_ACCESS_KEY_ID: 'NOT-A-KEY' });
    try {
      const uri = `s3://${BUCKET}/scoring/model.zip`;
      const r = await call(other, 'PUT', '/models/scoring', uri);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': access denied`, code: 400 });
      expectNoSdkText(r.text);
    } finally {
      await other.stop();
    }
  });

  test.skipIf(!haveAirbnb)('airbnb.model.lr.zip from S3 with frame.airbnb.json → price_prediction 232.62463916840318', async () => {
    const uri = `s3://${BUCKET}/airbnb.model.lr.zip`;
    expect((await call(server, 'PUT', '/models/airbnb', uri)).status).toBe(201);
    const frame = JSON.parse(readFileSync(AIRBNB_FRAME, 'utf8'));
    const r = await call(server, 'POST', '/models/airbnb/transform?select=price_prediction', frame);
    expect(r.status, r.text).toBe(200);
    expect(Math.abs(r.json.rows[0][0] - 232.62463916840318)).toBeLessThan(1e-9);
  });
});

/** What the S3 SDK or the store says, which an answer never carries. */
function expectNoSdkText(text: string): void {
  for (const sdk of ['NoSuchKey', 'NoSuchBucket', 'The specified key does not exist', 'The specified bucket does not exist', 'AWS Access Key Id', 'InvalidAccessKeyId', 'AccessDenied', 'ECONNREFUSED', '$metadata', 'S3ServiceException']) {
    expect(text).not.toContain(sdk);
  }
}

describe('where s3:// bundles may be read from (SVC_MODEL_ROOTS, never the blob store\'s own bucket)', () => {
  const SECRET = `model-repositories-secret-${randomBytes(16).toString('hex')}`;
  const token = () => hsToken(SECRET, { scope: 'model.read model.write' });
  const scoring = `s3://${BUCKET}/scoring/model.zip`;
  const forbidden = (uri: string) => ({ error: 'ForbiddenLocation', message: `bundle ${uri} is outside the s3:// prefixes bundles may be read from (SVC_MODEL_ROOTS)`, code: 403 });
  const secured = (env: Record<string, string> = {}) => startSvc({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: SECRET, ...env });

  test('security on and no s3:// root named: 403 ForbiddenLocation, refused by name (a missing bucket answers the same)', async () => {
    const other = await secured();
    try {
      for (const uri of [scoring, 's3://no-such-bucket/model.zip']) {
        const r = await call(other, 'PUT', '/models/scoring', uri, await token());
        expect([uri, r.status, r.json]).toEqual([uri, 403, forbidden(uri)]);
      }
      expect((await call(other, 'GET', '/models', undefined, await token())).json).toEqual([]);
    } finally {
      await other.stop();
    }
  });

  test('security on, under an s3:// root: the bundle is read; beside the root\'s folder, and in another bucket, 403', async () => {
    const other = await secured({ SVC_MODEL_ROOTS: `s3://${BUCKET}/scoring` });
    try {
      const put = await call(other, 'PUT', '/models/scoring', scoring, await token());
      expect(put.status, put.text).toBe(201);
      const t = await call(other, 'POST', '/models/scoring/transform?select=price', SCORING_FRAME, await token());
      expect(t.json.rows).toEqual(SCORING_PRICES.map((p) => [p]));
      // `scoring` is a folder: `scoring-b/` and the bucket's other keys are not under it.
      for (const uri of [`s3://${BUCKET}/too-large.zip`, `s3://${BUCKET}/scoring-b/model.zip`, `s3://${BUCKET}/scoring%2F..%2Ftoo-large.zip`, 's3://other-bucket/scoring/model.zip']) {
        const r = await call(other, 'PUT', '/models/out', uri, await token());
        expect([uri, r.json]).toEqual([uri, uri.includes('%2F..') ? { error: 'URIError', message: `URI error for '${uri}': an object key cannot have . or .. segments`, code: 400 } : forbidden(uri)]);
      }
      // Only s3:// roots named: no file:// bundle at all.
      const file = 'file:///etc/hostname';
      expect((await call(other, 'PUT', '/models/out', file, await token())).json).toEqual({ error: 'ForbiddenLocation', message: `bundle ${file} is outside the directories bundles may be read from (SVC_MODEL_ROOTS)`, code: 403 });
    } finally {
      await other.stop();
    }
  });

  test('security off with SVC_MODEL_ROOTS set: s3:// only under its s3:// roots', async () => {
    const other = await startSvc({ SVC_MODEL_ROOTS: `${work},s3://${BUCKET}/scoring/` });
    try {
      expect((await call(other, 'PUT', '/models/scoring', scoring)).status).toBe(201);
      const uri = `s3://${BUCKET}/too-large.zip`;
      expect((await call(other, 'PUT', '/models/large', uri)).json).toEqual(forbidden(uri));
    } finally {
      await other.stop();
    }
  });

  test('the blob store\'s own bucket is never read, even when a root names it, even with security off and no roots', async () => {
    const STORE = 'svc-store';
    const client = new S3Client({ endpoint: s3Endpoint, forcePathStyle: true, region: REGION, credentials: CREDENTIALS });
    await client.send(new CreateBucketCommand({ Bucket: STORE }));
    const store = { SVC_BLOB_BACKEND: 's3', SVC_S3_ENDPOINT: s3Endpoint, SVC_S3_BUCKET: STORE, SVC_DURABILITY: 'relaxed' };
    const servers: TestServer[] = [];
    try {
      // A blob of the store: what holds it (a small blob's bytes sit in its holding) is a key of the store's bucket.
      const writer = await startSvc(store);
      servers.push(writer);
      const uploaded = await checkedFetch(`${writer.url}/api/v1/blobs`, { method: 'POST', body: new Uint8Array(scoringZip()), headers: { 'Content-Type': 'application/zip' } });
      expect(uploaded.status).toBe(201);
      const keys = (await client.send(new ListObjectsV2Command({ Bucket: STORE }))).Contents!.map((o) => o.Key!);
      const block = keys.find((k) => k.startsWith('holdings/') || k.startsWith('blocks/'))!;
      expect(block, keys.join(' ')).toBeDefined();
      const own = (key: string) => `s3://${STORE}/${key}`;
      // Security off, no roots: any bucket but the store's.
      expect((await call(writer, 'PUT', '/models/own', own(block))).json).toEqual(forbidden(own(block)));
      expect((await call(writer, 'PUT', '/models/scoring', scoring)).status).toBe(201);
      // One node of the store at a time: s3rver ignores conditional writes (docs/backends.md).
      await servers.pop()!.stop();
      const mayRead = await secured({ ...store, SVC_MODEL_ROOTS: `s3://${STORE},s3://${BUCKET}` });
      servers.push(mayRead);
      for (const key of [block, 'blocks/missing', 'manifests/x']) {
        const r = await call(mayRead, 'PUT', '/models/own', own(key), await token());
        expect([key, r.status, r.json]).toEqual([key, 403, forbidden(own(key))]);
      }
      expect((await call(mayRead, 'PUT', '/models/scoring', scoring, await token())).status).toBe(201);
      await servers.pop()!.stop();
      // With SVC_S3_PREFIX, the store is its prefix: the bucket's other keys are not the store's.
      await client.send(new PutObjectCommand({ Bucket: STORE, Key: 'bundles/model.zip', Body: scoringZip() }));
      const prefixed = await startSvc({ ...store, SVC_S3_PREFIX: 'svc/' });
      servers.push(prefixed);
      expect((await call(prefixed, 'PUT', '/models/beside', own('bundles/model.zip'))).status).toBe(201);
      expect((await call(prefixed, 'PUT', '/models/own', own('svc/blocks/x'))).json).toEqual(forbidden(own('svc/blocks/x')));
    } finally {
      for (const s of servers) await s.stop();
      client.destroy();
    }
  }, 60_000);
});
