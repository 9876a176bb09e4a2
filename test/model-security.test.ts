// The model listener under SVC_SECURITY_ENABLED=true (issue 25, defect 3), over real HTTP: bearer
// tokens and capabilities (model.read, model.write, observability.read) checked by the blob API's
// verifier, file:// bundles only inside SVC_MODEL_ROOTS (refused by name, links followed),
// malformed URIs 400, bundles bounded while read, registrations made before the roots. Every
// answer is checked against the listener's document (helpers/openapi.ts, `modelFetch`).
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { MODEL_API } from '../dist/server/api-docs.js';
import { scoringPipeline, writeBundleDir } from './helpers/bundles.js';
import { devToken } from './helpers/docs-client.js';
import { FIXTURES, HAVE_FIXTURES } from './helpers/models.js';
import { checkedFetch, modelFetch } from './helpers/openapi.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';
import { zipBundle, zipBytes } from './helpers/zip.js';

const ISSUER = 'https://issuer.test';
const AUDIENCE = 'svc-models';
const DEV_SECRET = 'model-security-test-secret-0123456789';
const AIRBNB = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip');
const AIRBNB_FRAME = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/leap_frame/frame.airbnb.json');
if (!HAVE_FIXTURES) console.warn(`model fixtures not found at ${FIXTURES}: the published-bundle case of model-security is skipped`);

const work = tempRoot('svc-model-security-');
const roots = join(work, 'roots');
const outside = join(work, 'outside');
const uri = (path: string) => pathToFileURL(path).href;
/** x, y, color → price = 2x + 3y + 10·index(color) + 1. */
const FRAME = { schema: { fields: [{ name: 'x', type: 'double' }, { name: 'y', type: 'double' }, { name: 'color', type: 'string' }] }, rows: [[1, 1, 'red'], [2, 0, 'blue']] };
const PRICES = [[6], [25]];

let rsa: CryptoKey;
let jwksFile: string;
let server: TestServer;

async function token(scope: string): Promise<string> {
  return new SignJWT({ org_id: 'acme', scope })
    .setProtectedHeader({ alg: 'RS256', kid: 'rsa-1' })
    .setSubject('modeller')
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setExpirationTime(Math.floor(Date.now() / 1000) + 600)
    .sign(rsa);
}

interface Answer {
  status: number;
  text: string;
  json: any;
  headers: Headers;
}

async function call(base: string, method: string, path: string, options: { token?: string; body?: string } = {}): Promise<Answer> {
  const res = await modelFetch(base + path, {
    method,
    body: options.body,
    headers: options.token ? { Authorization: `Bearer ${options.token}` } : {},
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

const securityEnv = (extra: Record<string, string> = {}) => ({
  SVC_SECURITY_ENABLED: 'true',
  SVC_OIDC_ISSUER: ISSUER,
  SVC_OIDC_AUDIENCE: AUDIENCE,
  SVC_OIDC_JWKS_FILE: jwksFile,
  SVC_DEV_SHARED_SECRET: DEV_SECRET,
  MODEL_WARMUP_ROWS: '20',
  ...extra,
});

/** Every route but /health and /docs, with the capability it needs. */
const GUARDED: Array<[string, string, string]> = [
  ['PUT', '/models/scoring', 'model.write'],
  ['DELETE', '/models/scoring', 'model.write'],
  ['GET', '/models', 'model.read'],
  ['GET', '/models/scoring', 'model.read'],
  ['POST', '/models/scoring/transform', 'model.read'],
  ['POST', '/models/scoring/rank?id=x&rank=price', 'model.read'],
  ['GET', '/models/scoring/sample', 'model.read'],
  ['GET', '/models/scoring/graph', 'model.read'],
  ['GET', '/models/scoring/health', 'model.read'],
  ['GET', '/metrics', 'observability.read'],
];

beforeAll(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  rsa = pair.privateKey;
  const keys: JWK[] = [{ ...(await exportJWK(pair.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' }];
  jwksFile = join(work, 'jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys }));

  mkdirSync(roots);
  mkdirSync(outside);
  writeBundleDir(scoringPipeline(), join(roots, 'scoring'));
  writeFileSync(join(roots, 'scoring.zip'), zipBundle(scoringPipeline()));
  writeBundleDir(scoringPipeline(), join(outside, 'scoring'));
  writeFileSync(join(outside, 'scoring.zip'), zipBundle(scoringPipeline()));
  // Opening a FIFO for reading blocks until a writer comes: one outside the roots proves the
  // server never opens what it refuses (it would answer 408 after MODEL_LOAD_TIMEOUT instead).
  execFileSync('mkfifo', [join(outside, 'fifo.zip'), join(roots, 'fifo.zip')]);
  // Links: out of the root (refused), and within it (followed).
  symlinkSync(join(outside, 'scoring.zip'), join(roots, 'escape.zip'));
  symlinkSync(outside, join(roots, 'escape-dir'));
  symlinkSync(join(roots, 'scoring.zip'), join(roots, 'alias.zip'));

  server = await startServer(securityEnv({
    SVC_MODEL_ROOTS: roots,
    MODEL_LOAD_TIMEOUT: '20s',
    MODEL_MAX_ZIP_ENTRIES: '100',
    MODEL_MAX_DIRECTORY_ENTRIES: '1000',
    MODEL_MAX_BUNDLE_BYTES: '1MiB',
  }));
});

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('security on: tokens and capabilities on the model listener', () => {
  test('no token: 401 Unauthenticated in the runtime\'s envelope, with WWW-Authenticate: Bearer, on every guarded route', async () => {
    for (const [method, path] of GUARDED) {
      const r = await call(server.modelUrl, method, path, { body: method === 'PUT' ? uri(join(roots, 'scoring')) : method === 'POST' ? JSON.stringify(FRAME) : undefined });
      expect([method, path, r.status]).toEqual([method, path, 401]);
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(r.json).toEqual({ error: 'Unauthenticated', message: 'An Authorization: Bearer <JWT> header is required', code: 401 });
    }
    // Nothing was registered by the refused PUT.
    expect((await call(server.modelUrl, 'GET', '/models', { token: await token('model.read') })).json).toEqual([]);
  });

  test('a token that does not verify is 401 too', async () => {
    const forged = (await token('model.read model.write')).replace(/.{4}$/, 'AAAA');
    const r = await call(server.modelUrl, 'GET', '/models', { token: forged });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
    expect(r.json).toEqual({ error: 'Unauthenticated', message: 'The bearer token is not valid: the signature does not verify', code: 401 });
  });

  test('the OpenAPI document states the capabilities enforced here', () => {
    const paths = (MODEL_API.document('test') as { paths: Record<string, Record<string, { 'x-svc-capability'?: string }>> }).paths;
    for (const [method, path, capability] of GUARDED) {
      const documented = paths[path.split('?')[0]!.replace('/scoring', '/{model}')]![method.toLowerCase()]!['x-svc-capability'];
      expect([method, path, documented]).toEqual([method, path, capability]);
    }
  });

  test('/health and /docs stay public', async () => {
    const health = await call(server.modelUrl, 'GET', '/health');
    expect([health.status, health.text]).toEqual([200, '']);
    const docs = await modelFetch(`${server.modelUrl}/docs`);
    expect(docs.status).toBe(200);
    expect(docs.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect((await modelFetch(`${server.modelUrl}/docs/swagger.json`)).status).toBe(200);
  });

  test('a token without the route\'s capability: 403 Forbidden naming it', async () => {
    // Each route is asked with a token holding every capability but its own.
    const all = ['model.read', 'model.write', 'observability.read', 'blob.read', 'blob.write'];
    for (const [method, path, capability] of GUARDED) {
      const t = await token(all.filter((c) => c !== capability).join(' '));
      const r = await call(server.modelUrl, method, path, { token: t, body: method === 'PUT' ? uri(join(roots, 'scoring')) : method === 'POST' ? JSON.stringify(FRAME) : undefined });
      expect([method, path, r.status]).toEqual([method, path, 403]);
      expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(r.json).toEqual({ error: 'Forbidden', message: `The token does not grant ${capability}`, code: 403 });
    }
  });

  test('with the capability: register (model.write), use (model.read), metrics (observability.read), delete (model.write)', async () => {
    const write = await token('model.write');
    const read = await token('model.read');
    const bundle = uri(join(roots, 'scoring.zip'));
    const put = await call(server.modelUrl, 'PUT', '/models/scoring', { token: write, body: bundle });
    expect([put.status, put.json]).toEqual([201, { modelName: 'scoring', uri: bundle }]);
    expect((await call(server.modelUrl, 'GET', '/models', { token: read })).json).toEqual([{ modelName: 'scoring', uri: bundle }]);
    const describeIt = await call(server.modelUrl, 'GET', '/models/scoring', { token: read });
    expect([describeIt.status, describeIt.json.model]).toEqual([200, { modelName: 'scoring', uri: bundle }]);
    const t = await call(server.modelUrl, 'POST', '/models/scoring/transform?select=price', { token: read, body: JSON.stringify(FRAME) });
    expect([t.status, t.json.rows]).toEqual([200, PRICES]);
    const rankFrame = { schema: { fields: [...FRAME.schema.fields, { name: 'id', type: 'string' }] }, rows: FRAME.rows.map((row, i) => [...row, `r${i}`]) };
    const rank = await call(server.modelUrl, 'POST', '/models/scoring/rank?id=id&rank=price', { token: read, body: JSON.stringify(rankFrame) });
    expect([rank.status, rank.json]).toEqual([200, { results: ['r1', 'r0'] }]);
    expect((await call(server.modelUrl, 'GET', '/models/scoring/sample?nrow=2', { token: read })).json.rows).toHaveLength(2);
    expect((await call(server.modelUrl, 'GET', '/models/scoring/graph', { token: read })).text).toMatch(/^<\?xml/);
    expect((await call(server.modelUrl, 'GET', '/models/scoring/health', { token: read })).status).toBe(200);
    const metrics = await call(server.modelUrl, 'GET', '/metrics', { token: await token('observability.read') });
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('total_reponse_count');
    const del = await call(server.modelUrl, 'DELETE', '/models/scoring', { token: write });
    expect([del.status, del.json.model]).toEqual([200, { modelName: 'scoring', uri: bundle }]);
    expect((await call(server.modelUrl, 'GET', '/models/scoring', { token: read })).status).toBe(404);
  });

  test('a development token (POST /dev/token on the blob listener) grants model.* when its scope says so; the default scope does not', async () => {
    const dev = await devToken(server.url, { org_id: 'acme', scope: 'model.read model.write' });
    const put = await call(server.modelUrl, 'PUT', '/models/dev', { token: dev, body: uri(join(roots, 'scoring')) });
    expect(put.status).toBe(201);
    expect((await call(server.modelUrl, 'POST', '/models/dev/transform?select=price', { token: dev, body: JSON.stringify(FRAME) })).json.rows).toEqual(PRICES);
    // The model capabilities grant nothing on the blob API, and the default development scope
    // (the document platform's capabilities) nothing here.
    const blobs = await checkedFetch(`${server.url}/api/v1/blobs`, { headers: { Authorization: `Bearer ${dev}` } });
    expect(blobs.status).toBe(403);
    const plain = await devToken(server.url, { org_id: 'acme' });
    expect((await call(server.modelUrl, 'GET', '/models', { token: plain })).json).toEqual({ error: 'Forbidden', message: 'The token does not grant model.read', code: 403 });
    expect((await call(server.modelUrl, 'DELETE', '/models/dev', { token: dev })).status).toBe(200);
  });

  test.skipIf(!HAVE_FIXTURES)('a published bundle copied into a root registers and reproduces its prediction', async () => {
    copyFileSync(AIRBNB, join(roots, 'airbnb.model.lr.zip'));
    const put = await call(server.modelUrl, 'PUT', '/models/airbnb', { token: await token('model.write'), body: uri(join(roots, 'airbnb.model.lr.zip')) });
    expect(put.status, put.text).toBe(201);
    const r = await call(server.modelUrl, 'POST', '/models/airbnb/transform?select=price_prediction', { token: await token('model.read'), body: readFileSync(AIRBNB_FRAME, 'utf8') });
    expect(r.status).toBe(200);
    expect(Math.abs(r.json.rows[0][0] - 232.62463916840318)).toBeLessThan(1e-9);
  });
});

describe('security on: where file:// bundles may be read from', () => {
  const put = async (name: string, body: string) => call(server.modelUrl, 'PUT', `/models/${name}`, { token: await token('model.write model.read'), body });
  const forbidden = (u: string) => ({ error: 'ForbiddenLocation', message: `bundle ${u} is outside the directories bundles may be read from (SVC_MODEL_ROOTS)`, code: 403 });

  test('outside the roots: 403 ForbiddenLocation, without opening the path (a FIFO there would hold the load until its timeout)', async () => {
    const keep = uri(join(roots, 'scoring'));
    expect((await put('kept', keep)).status).toBe(201);
    const started = Date.now();
    for (const u of [
      uri(join(outside, 'fifo.zip')),
      uri(join(outside, 'scoring.zip')),
      uri(join(outside, 'scoring')),
      uri(outside),
      'file:///etc/shadow',
      'file:///tmp',
      `file://${roots}/../outside/scoring.zip`,
      `file://${roots}/%2e%2e/outside/scoring.zip`,
      `file://${roots}-sibling/scoring.zip`,
    ]) {
      const r = await put('kept', u);
      expect([u, r.status, r.json]).toEqual([u, 403, forbidden(u)]);
    }
    // Nine refusals, one of them a FIFO that blocks whoever opens it: far below MODEL_LOAD_TIMEOUT (20 s).
    expect(Date.now() - started).toBeLessThan(10_000);
    // The registration the refused PUTs would have replaced stays.
    expect((await call(server.modelUrl, 'GET', '/models/kept', { token: await token('model.read') })).json.model.uri).toBe(keep);
  });

  test('a FIFO inside a root is refused as neither a file nor a directory, not opened', async () => {
    const u = uri(join(roots, 'fifo.zip'));
    const r = await put('fifo', u);
    expect(r.json).toEqual({ error: 'BundleException', message: `bundle ${u} is neither a file nor a directory`, code: 400 });
  });

  test('a link inside a root that leads out of it: 403 ForbiddenLocation; a link that stays inside is followed', async () => {
    for (const u of [uri(join(roots, 'escape.zip')), uri(join(roots, 'escape-dir', 'scoring.zip')), uri(join(roots, 'escape-dir', 'scoring'))]) {
      const r = await put('linked', u);
      expect([u, r.status, r.json]).toEqual([u, 403, forbidden(u)]);
    }
    const alias = uri(join(roots, 'alias.zip'));
    const r = await put('alias', alias);
    expect([r.status, r.json]).toEqual([201, { modelName: 'alias', uri: alias }]);
  });

  test('a missing file inside a root is 400 BundleException', async () => {
    const r = await put('missing', uri(join(roots, 'no-such.zip')));
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'BundleException', message: `file does not exist: ${join(roots, 'no-such.zip')} (${uri(join(roots, 'no-such.zip'))})`, code: 400 });
  });
});

describe('URIs that are not valid bundle URIs: 400 URIError, never 500', () => {
  const cases: Array<[string, string]> = [
    ['file://../../etc/shadow', 'a file URI names a local absolute path (file:///dir/bundle.zip), not host ".."'],
    ['file://server/share/model.zip', 'a file URI names a local absolute path (file:///dir/bundle.zip), not host "server"'],
    ['not a uri', 'not a valid URI'],
    ['', 'not a valid URI'],
    ['file:', 'file path cannot be empty'],
    ['file:///', 'file path cannot be empty'],
    ['ftp://host/model.zip', 'unsupported scheme "ftp" (file, s3 or gs)'],
    ['file:///models/a%2Fb.zip', 'not a file path this server can read'],
    ['file:///models/a%00.zip', 'a file path cannot contain NUL (%00)'],
    ['file:///models/model.zip?version=2', 'a file URI has no query or fragment (percent-encode "?" and "#" in a file name)'],
    ['file:///models/model.zip#x', 'a file URI has no query or fragment (percent-encode "?" and "#" in a file name)'],
    ['file:///models/mo\tdel.zip', 'control characters are not allowed in a URI'],
    ['s3://', 'bucket name is missing'],
  ];

  test.each(cases)('%j → 400 URIError', async (body, reason) => {
    const r = await call(server.modelUrl, 'PUT', '/models/bad', { token: await token('model.write'), body });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'URIError', message: `URI error for '${body}': ${reason}`, code: 400 });
  });
});

describe('bundles are bounded while they are read: 400 naming the limit', () => {
  const put = async (name: string, body: string) => call(server.modelUrl, 'PUT', `/models/${name}`, { token: await token('model.write'), body });

  test('a zip with more entries than MODEL_MAX_ZIP_ENTRIES (100) is refused from its central directory', async () => {
    const entries = Array.from({ length: 150 }, (_, i) => ({ name: `root/filler/${i}.bin` }));
    writeFileSync(join(roots, 'many-entries.zip'), zipBytes(entries));
    const r = await put('many', uri(join(roots, 'many-entries.zip')));
    expect(r.json).toEqual({ error: 'BundleException', message: 'bundle zip has 150 entries, more than 100 (MODEL_MAX_ZIP_ENTRIES)', code: 400 });
  });

  test('a zip whose JSON declares more than MODEL_MAX_BUNDLE_BYTES (1 MiB) uncompressed is refused before inflating', async () => {
    const doc = scoringPipeline();
    const bomb = zipBytes([
      { name: 'bundle.json', data: Buffer.from(JSON.stringify(doc.info)) },
      // 64 MiB of spaces deflate to about 64 KiB.
      { name: 'root/model.json', data: Buffer.alloc(64 << 20, 0x20), deflate: true },
    ]);
    expect(bomb.length).toBeLessThan(1 << 20);
    writeFileSync(join(roots, 'declared-bomb.zip'), bomb);
    const r = await put('bomb', uri(join(roots, 'declared-bomb.zip')));
    expect(r.json).toEqual({ error: 'BundleException', message: 'bundle expands to more than 1048576 bytes (MODEL_MAX_BUNDLE_BYTES)', code: 400 });
  });

  test('a zip entry that inflates past its declared size is stopped at that size', async () => {
    const doc = scoringPipeline();
    const liar = zipBytes([
      { name: 'bundle.json', data: Buffer.from(JSON.stringify(doc.info)) },
      { name: 'root/model.json', data: Buffer.alloc(64 << 20, 0x20), deflate: true, declaredSize: 100 },
    ]);
    writeFileSync(join(roots, 'lying-bomb.zip'), liar);
    const r = await put('liar', uri(join(roots, 'lying-bomb.zip')));
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('BundleException');
    expect(r.json.message).toMatch(/^bundle entry root\/model\.json is corrupt: too many bytes in the stream\. expected 100\. got at least \d+$/);
  });

  test('a directory with more entries than MODEL_MAX_DIRECTORY_ENTRIES (1000) is refused, its walk stopped', async () => {
    const dir = join(roots, 'crowded');
    writeBundleDir(scoringPipeline(), dir);
    mkdirSync(join(dir, 'filler'));
    for (let i = 0; i < 1200; i++) writeFileSync(join(dir, 'filler', `${i}.bin`), '');
    const r = await put('crowded', uri(dir));
    expect(r.json).toEqual({ error: 'BundleException', message: 'bundle directory has more than 1000 entries (MODEL_MAX_DIRECTORY_ENTRIES)', code: 400 });
  });
});

describe('registrations made before security, and the default root', () => {
  test('security off and SVC_MODEL_ROOTS unset: no token, any local path (today\'s behaviour); a malformed URI is 400 there too', async () => {
    const open = await startServer({ MODEL_WARMUP_ROWS: '20' });
    try {
      const u = uri(join(outside, 'scoring.zip'));
      const put = await call(open.modelUrl, 'PUT', '/models/anywhere', { body: u });
      expect([put.status, put.json]).toEqual([201, { modelName: 'anywhere', uri: u }]);
      expect((await call(open.modelUrl, 'POST', '/models/anywhere/transform?select=price', { body: JSON.stringify(FRAME) })).json.rows).toEqual(PRICES);
      expect((await call(open.modelUrl, 'GET', '/metrics')).status).toBe(200);
      const bad = await call(open.modelUrl, 'PUT', '/models/bad', { body: 'file://../../etc/shadow' });
      expect(bad.json).toEqual({ error: 'URIError', message: 'URI error for \'file://../../etc/shadow\': a file URI names a local absolute path (file:///dir/bundle.zip), not host ".."', code: 400 });
    } finally {
      await open.stop();
    }
  });

  test('security off with SVC_MODEL_ROOTS set: no token, but only the roots', async () => {
    const rooted = await startServer({ SVC_MODEL_ROOTS: `${roots},`, MODEL_WARMUP_ROWS: '20' });
    try {
      expect((await call(rooted.modelUrl, 'PUT', '/models/in', { body: uri(join(roots, 'scoring.zip')) })).status).toBe(201);
      const u = uri(join(outside, 'scoring.zip'));
      expect((await call(rooted.modelUrl, 'PUT', '/models/out', { body: u })).json).toEqual({ error: 'ForbiddenLocation', message: `bundle ${u} is outside the directories bundles may be read from (SVC_MODEL_ROOTS)`, code: 403 });
    } finally {
      await rooted.stop();
    }
  });

  test('after a restart with security on: the default root is <SVC_FS_ROOT>/models and kept; an older registration outside it answers 403 until deleted', async () => {
    const data = tempRoot('svc-model-security-data-');
    try {
      const outsideUri = uri(join(outside, 'scoring.zip'));
      const first = await startServer({ MODEL_WARMUP_ROWS: '20' }, data);
      expect((await call(first.modelUrl, 'PUT', '/models/old', { body: outsideUri })).status).toBe(201);
      await first.stop();

      // The default root: made at start, and what an operator puts there survives restarts.
      const second = await startServer(securityEnv(), data);
      const defaultRoot = join(data, 'models');
      try {
        expect(existsSync(defaultRoot)).toBe(true);
        // Said once at start (stderr may arrive after the listening line on stdout).
        for (let i = 0; i < 50 && !second.stderr().includes('model registration outside SVC_MODEL_ROOTS'); i++) await new Promise((r) => setTimeout(r, 100));
        expect(second.stderr()).toContain('model registration outside SVC_MODEL_ROOTS');
        cpSync(join(roots, 'scoring'), join(defaultRoot, 'scoring'), { recursive: true });
        const inside = uri(join(defaultRoot, 'scoring'));
        expect((await call(second.modelUrl, 'PUT', '/models/new', { token: await token('model.write'), body: inside })).status).toBe(201);
        const read = await token('model.read');
        expect((await call(second.modelUrl, 'GET', '/models', { token: read })).json).toEqual([
          { modelName: 'new', uri: inside },
          { modelName: 'old', uri: outsideUri },
        ]);
        for (const [method, path] of [['GET', '/models/old'], ['POST', '/models/old/transform'], ['GET', '/models/old/sample']]) {
          const r = await call(second.modelUrl, method!, path!, { token: read, body: method === 'POST' ? JSON.stringify(FRAME) : undefined });
          expect([path, r.status, r.json]).toEqual([path, 403, { error: 'ForbiddenLocation', message: `bundle ${outsideUri} is outside the directories bundles may be read from (SVC_MODEL_ROOTS)`, code: 403 }]);
        }
      } finally {
        await second.stop();
      }

      const third = await startServer(securityEnv(), data);
      try {
        const read = await token('model.read');
        expect((await call(third.modelUrl, 'POST', '/models/new/transform?select=price', { token: read, body: JSON.stringify(FRAME) })).json.rows).toEqual(PRICES);
        // The refused registration can still be deleted: answered without bundleMeta.
        const del = await call(third.modelUrl, 'DELETE', '/models/old', { token: await token('model.write') });
        expect([del.status, del.json]).toEqual([200, { model: { modelName: 'old', uri: outsideUri } }]);
        expect((await call(third.modelUrl, 'GET', '/models', { token: read })).json).toEqual([{ modelName: 'new', uri: uri(join(defaultRoot, 'scoring')) }]);
      } finally {
        await third.stop();
      }
    } finally {
      rmSync(data, { recursive: true, force: true });
    }
  });

  test('a root that does not exist stops the start: exit status 2 and one line naming SVC_MODEL_ROOTS', async () => {
    const missing = join(work, 'no-such-root');
    const failure = await startServer({ SVC_MODEL_ROOTS: missing }).then(
      async (s) => {
        await s.stop();
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(failure).toBe(`server exited with 2: svc: invalid configuration: SVC_MODEL_ROOTS: ${missing} cannot be resolved (ENOENT)\n`);
  });
});
