// s3:// bundle URIs against a real S3-protocol server: s3rver (a devDependency) runs in this
// process on an ephemeral port with a temporary directory, the bundles are uploaded with
// @aws-sdk/client-s3, and the real svc server (a child process) fetches them over sockets with
// signed requests. gs:// is not covered: no Cloud Storage JSON API emulator can be installed
// from npm or Debian here (see docs/models.md, "Testing against S3 and GCS"). Every answer is
// checked against server/openapi/model-runtime.json (helpers/openapi.ts, `modelFetch`).

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { scoringPipeline } from './helpers/bundles.js';
import { FIXTURES } from './helpers/models.js';
import { modelFetch } from './helpers/openapi.js';
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

async function call(target: TestServer, method: string, path: string, body?: unknown) {
  const res = await modelFetch(target.modelUrl + path, {
    method,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
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

  test('a missing key is a 400 URIError naming the URI and S3\'s reason; the previous registration stays', async () => {
    const uri = `s3://${BUCKET}/scoring/missing.zip`;
    const r = await call(server, 'PUT', '/models/scoring', uri);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': The specified key does not exist.`, code: 400 });
    expect((await call(server, 'GET', '/models/scoring')).json.model.uri).toBe(`s3://${BUCKET}/scoring/model.zip`);
  });

  test('a missing bucket is a 400 URIError naming the URI and S3\'s reason', async () => {
    const uri = 's3://no-such-bucket/model.zip';
    const r = await call(server, 'PUT', '/models/nobucket', uri);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${uri}': The specified bucket does not exist`, code: 400 });
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
  test('an unknown access key id is a 400 URIError carrying S3\'s refusal', async () => {
    const other = await startSvc({ AWS_ACCESS_KEY_ID: 'NOT-A-KEY' });
    try {
      const uri = `s3://${BUCKET}/scoring/model.zip`;
      const r = await call(other, 'PUT', '/models/scoring', uri);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({
        error: 'URIError',
        message: `URI error for '${uri}': The AWS Access Key Id you provided does not exist in our records.`,
        code: 400,
      });
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
