// Legacy import (`POST /v1/legacy/import`, its `legacy.import` job, `GET /legacy/{repo}` and
// `svc legacy import`): real servers as child processes over repositories built here. The 202
// answer, the document (externalRef, one version, the legacy bytes and the XML's media type), a
// repeat and 10 concurrent first requests giving one document, a shared binary giving one content
// key and no second ingest, failures of the job with clear codes, 400/401/403/404 answers, kill -9
// in the middle of a 64 MiB import, and the CLI's walk over a repository with a broken document.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Api, devToken, expectError } from './helpers/docs-client.js';
import { seededBytes } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const MiB = 1024 * 1024;
const CLI = fileURLToPath(new URL('../dist/server/main.js', import.meta.url));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

function put(file: string, data: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, data);
}

/** A legacy document: its binary under `binaries/h[0:2]/h[2:4]/h.bin`, its metadata `metadata/<id>.xml`. */
function legacyDoc(root: string, id: string, bytes: Buffer, mime?: string): void {
  const h = sha256(bytes);
  put(path.join(root, 'binaries', h.slice(0, 2), h.slice(2, 4), `${h}.bin`), bytes);
  put(path.join(root, 'metadata', `${id}.xml`), `<?xml version="1.0"?><record id="${id}"><binaryHash>${h}</binaryHash>${mime ? `<mimeType>${mime}</mimeType>` : ''}<length>${bytes.length}</length></record>`);
}

/** Prometheus text → the value of one sample (0 when absent). */
function sample(metrics: string, name: string, labels: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, SVC_SERVER: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d) => (stdout += d));
  proc.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve) => proc.once('close', (code) => resolve({ code, stdout, stderr })));
}

describe('legacy import', () => {
  const tmp = tempRoot('svc-legacy-import-');
  const main = path.join(tmp, 'main');
  const walk = path.join(tmp, 'walk');
  const data = path.join(tmp, 'data');
  let server: TestServer;
  let api: Api;
  const bytesOf = new Map<string, Buffer>();
  let big: Buffer;
  const env = () => ({ SVC_LEGACY_REPOS: `main=${main},walk=${walk}` });

  const doc = (id: string, bytes: Buffer, mime?: string) => {
    legacyDoc(main, id, bytes, mime);
    bytesOf.set(id, bytes);
  };

  async function start(): Promise<void> {
    server = await startServer(env(), data);
    api = new Api(server.url, await devToken(server.url));
  }

  const importDoc = (legacyDocId: string, extra: Record<string, unknown> = {}, as = api) => as.post('/v1/legacy/import', { repo: 'main', legacyDocId, ...extra });

  const settled = (jobId: string, timeoutMs?: number) => api.settled(jobId, timeoutMs);

  async function content(documentId: string): Promise<{ bytes: Buffer; type: string | null }> {
    const res = await fetch(`${server.url}/v1/documents/${documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(res.status).toBe(200);
    return { bytes: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') };
  }

  async function documentsOf(legacyDocId: string): Promise<string[]> {
    const r = await api.get(`/v1/documents?externalRef=${encodeURIComponent(`legacy:${legacyDocId}`)}`);
    expect(r.status, r.text).toBe(200);
    return r.json.documents.map((d: { documentId: string }) => d.documentId);
  }

  beforeAll(async () => {
    doc('memo-17', Buffer.from('Hello from 1998\n'), 'text/plain');
    doc('scan-1', seededBytes(3 * MiB + 17, 11), 'application/pdf');
    doc('concurrent', seededBytes(700_000, 12), 'image/tiff');
    doc('untyped', seededBytes(2000, 13));
    const shared = seededBytes(2 * MiB + 5, 14);
    doc('shared-a', shared, 'application/pdf');
    doc('shared-b', shared, 'application/pdf');
    // Failure shapes: metadata without a usable hash, a hash no binary has.
    put(path.join(main, 'metadata', 'bad-hash.xml'), '<record><binaryHash>not-hex</binaryHash></record>');
    put(path.join(main, 'metadata', 'no-binary.xml'), `<record><binaryHash>${'ab'.repeat(32)}</binaryHash></record>`);
    big = seededBytes(64 * MiB, 64);
    doc('big', big, 'application/pdf');
    // The walk: 30 documents and one broken.
    for (let i = 0; i < 30; i++) legacyDoc(walk, `w-${String(i).padStart(2, '0')}`, seededBytes(1000 + i * 997, 100 + i), 'text/plain');
    put(path.join(walk, 'metadata', 'w-broken.xml'), '<record><binaryHash>12345</binaryHash></record>');
    await start();
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('202 { jobId, documentId }; the job creates the document with its externalRef and one version of the legacy bytes and MIME; a repeat gives the same document', async () => {
    const r = await importDoc('memo-17');
    expect(r.status, r.text).toBe(202);
    expect(r.json).toEqual({ jobId: expect.stringMatching(UUID), documentId: expect.stringMatching(UUID), alreadyImported: false });
    expect(r.headers.get('location')).toBe(`/v1/jobs/${r.json.jobId}`);
    const job = await settled(r.json.jobId);
    expect(job.json).toMatchObject({ kind: 'legacy.import', state: 'completed', error: null });
    const d = await api.get(`/v1/documents/${r.json.documentId}`);
    expect(d.status).toBe(200);
    expect(d.json.externalRefs).toEqual([{ system: 'legacy', value: 'memo-17', meta: { repo: 'main' } }]);
    const versions = await api.get(`/v1/documents/${r.json.documentId}/versions`);
    expect(versions.json.versions).toHaveLength(1);
    expect(versions.json.versions[0].contentRef.key).toMatch(/^b3:[0-9a-f]{64}$/);
    const c = await content(r.json.documentId);
    expect(c.type).toBe('text/plain');
    expect(c.bytes.equals(bytesOf.get('memo-17')!)).toBe(true);

    for (const body of [{ repo: 'main' }, { legacyRepo: 'main' }]) {
      const again = await api.post('/v1/legacy/import', { ...body, legacyDocId: 'memo-17' });
      expect(again.status).toBe(202);
      expect(again.json).toEqual({ jobId: r.json.jobId, documentId: r.json.documentId, alreadyImported: true });
    }
    expect(await documentsOf('memo-17')).toEqual([r.json.documentId]);

    // A larger binary (several blocks) with its MIME; one without a MIME is application/octet-stream.
    for (const [id, type] of [['scan-1', 'application/pdf'], ['untyped', 'application/octet-stream']] as const) {
      const s = await importDoc(id, { placementHint: 'archival' });
      expect(s.status).toBe(202);
      expect((await settled(s.json.jobId)).json.state).toBe('completed');
      const got = await content(s.json.documentId);
      expect(got.type).toBe(type);
      expect(got.bytes.equals(bytesOf.get(id)!)).toBe(true);
      expect((await api.get(`/v1/documents/${s.json.documentId}`)).json.placementHint).toBe('archival');
    }
  });

  test('10 concurrent first requests for one legacy document: one documentId, one job, one document', async () => {
    const replies = await Promise.all(Array.from({ length: 10 }, () => importDoc('concurrent')));
    for (const r of replies) expect(r.status, r.text).toBe(202);
    expect(new Set(replies.map((r) => r.json.documentId)).size).toBe(1);
    expect(new Set(replies.map((r) => r.json.jobId)).size).toBe(1);
    const { documentId, jobId } = replies[0]!.json;
    expect((await settled(jobId)).json.state).toBe('completed');
    expect(await documentsOf('concurrent')).toEqual([documentId]);
    expect((await content(documentId)).bytes.equals(bytesOf.get('concurrent')!)).toBe(true);
  });

  test('two legacy documents sharing one binary share one content key; the second import streams no bytes', async () => {
    const before = await (await fetch(`${server.url}/metrics`)).text();
    const a = await importDoc('shared-a');
    expect((await settled(a.json.jobId)).json.state).toBe('completed');
    const b = await importDoc('shared-b');
    expect((await settled(b.json.jobId)).json.state).toBe('completed');
    expect(b.json.documentId).not.toBe(a.json.documentId);
    const keyOf = async (id: string) => (await api.get(`/v1/documents/${id}/versions`)).json.versions[0].contentRef.key;
    expect(await keyOf(a.json.documentId)).toBe(await keyOf(b.json.documentId));
    const after = await (await fetch(`${server.url}/metrics`)).text();
    const metric = (t: string) => sample(t, 'svc_legacy_import_bytes_total', 'repo="main"');
    expect(metric(after) - metric(before)).toBe(bytesOf.get('shared-a')!.length);
    expect(sample(after, 'svc_legacy_imports_total', 'repo="main",outcome="imported"') - sample(before, 'svc_legacy_imports_total', 'repo="main",outcome="imported"')).toBe(2);
    expect((await content(b.json.documentId)).bytes.equals(bytesOf.get('shared-b')!)).toBe(true);
  });

  test('a missing, invalid or binary-less legacy document fails its job with a clear code and makes no document', async () => {
    for (const [id, code] of [['nope', 'legacy_document_not_found'], ['bad-hash', 'legacy_metadata_invalid'], ['no-binary', 'legacy_binary_not_found']] as const) {
      const r = await importDoc(id);
      expect(r.status, r.text).toBe(202);
      const job = await settled(r.json.jobId);
      expect(job.json).toMatchObject({ state: 'failed', attempts: 1, error: { code } });
      expect(job.json.error.message).toContain(JSON.stringify(id));
      expect((await api.get(`/v1/documents/${r.json.documentId}`)).status).toBe(404);
      // Asked again: the same document id, a new job (the first one failed).
      const again = await importDoc(id);
      expect(again.json.documentId).toBe(r.json.documentId);
      expect(again.json.jobId).not.toBe(r.json.jobId);
      expect((await settled(again.json.jobId)).json.error.code).toBe(code);
    }
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(sample(metrics, 'svc_legacy_import_failures_total', 'repo="main",code="legacy_document_not_found"')).toBe(2);
  });

  test('malformed bodies are 400 (invalid_request; invalid_json when not JSON), an unknown repository 404, no token 401, a token without legacy.import 403', async () => {
    const bad: unknown[] = [
      [], 42, null, { legacyDocId: 'memo-17' }, { repo: 'main' }, { repo: 7, legacyDocId: 'memo-17' }, { repo: 'main', legacyDocId: 17 },
      { repo: 'main', legacyDocId: '' }, { repo: 'main', legacyDocId: '../etc/passwd' }, { repo: 'main', legacyDocId: 'a/b' },
      { repo: 'main', legacyDocId: 'memo-17', extra: 1 }, { repo: 'main', legacyDocId: 'memo-17', placementHint: 'forever' },
      { repo: 'main', legacyRepo: 'walk', legacyDocId: 'memo-17' }, { repo: 'main', legacyDocId: 'memo-17', mode: 'sometimes' },
    ];
    for (const body of bad) expectError(await api.post('/v1/legacy/import', body), 400, 'invalid_request');
    expectError(await api.post('/v1/legacy/import', '{"repo":', { 'Content-Type': 'application/json' }), 400, 'invalid_json');
    expectError(await importDoc('memo-17', { repo: 'elsewhere' }), 404, 'legacy_repo_not_found');
    expectError(await importDoc('memo-17', {}, api.as(undefined)), 401, 'unauthenticated');
    const readOnly = await devToken(server.url, { scope: 'legacy.read doc.read job.read' });
    expectError(await importDoc('memo-17', {}, api.as(readOnly)), 403, 'forbidden');
  });

  test('GET /legacy/{repo} pages through the repository\'s ids (legacy.read)', async () => {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const r = await api.get(`/legacy/walk?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.ids.length).toBeLessThanOrEqual(7);
      ids.push(...r.json.ids);
      cursor = r.json.nextCursor;
    } while (cursor);
    expect(ids).toEqual([...Array.from({ length: 30 }, (_, i) => `w-${String(i).padStart(2, '0')}`), 'w-broken']);
    expectError(await api.get('/legacy/elsewhere'), 404, 'legacy_repo_not_found');
    expectError(await api.get('/legacy/walk?cursor=bogus'), 400, 'invalid_cursor');
    const noRead = await devToken(server.url, { scope: 'legacy.import' });
    expectError(await api.as(noRead).get('/legacy/walk'), 403, 'forbidden');
  });

  test('kill -9 in the middle of a 64 MiB import: after the restart the job completes once, one document, the same bytes', async () => {
    const r = await importDoc('big');
    expect(r.status).toBe(202);
    // Killed while the job runs (its binary streaming into the store).
    let state = '';
    for (let i = 0; i < 2000; i++) {
      state = (await api.get(`/v1/jobs/${r.json.jobId}`)).json.state;
      if (state !== 'pending') break;
      await new Promise((res) => setTimeout(res, 2));
    }
    await server.kill9();
    await start();
    const again = await importDoc('big');
    expect(again.json.documentId).toBe(r.json.documentId);
    const job = await settled(r.json.jobId, 120_000);
    expect(job.json.state).toBe('completed');
    // It was running when killed: the attempt after the restart is its second.
    expect(state).toBe('running');
    expect(job.json.attempts).toBe(2);
    expect(again.json.jobId).toBe(r.json.jobId);
    expect(await documentsOf('big')).toEqual([r.json.documentId]);
    const versions = await api.get(`/v1/documents/${r.json.documentId}/versions`);
    expect(versions.json.versions).toHaveLength(1);
    const c = await content(r.json.documentId);
    expect(c.type).toBe('application/pdf');
    expect(c.bytes.length).toBe(big.length);
    expect(sha256(c.bytes)).toBe(sha256(big));
    // A repeat after the completion: the same job, already imported.
    expect(await importDoc('big')).toMatchObject({ status: 202, json: { jobId: r.json.jobId, documentId: r.json.documentId, alreadyImported: true } });
  }, 180_000);

  test('svc legacy import --all: 30 imported and 1 failed (exit 1); a second run finds all 30 already present', async () => {
    const cliEnv = { SVC_TOKEN: api.token!, SVC_SERVER: server.url };
    const first = await runCli(['legacy', 'import', 'walk', '--all', '--concurrency', '4'], cliEnv);
    expect(first.code, first.stderr).toBe(1);
    expect(first.stdout).toContain('imported: 30\nalready present: 0\nfailed: 1\n  w-broken: legacy_metadata_invalid: ');
    expect(first.stderr).toMatch(/walk: 31\/31 documents \(imported 30, present 0, failed 1\), [0-9.]+ KiB, [0-9.]+ docs\/s, .*ETA/);
    for (let i = 0; i < 30; i++) expect(await documentsOf(`w-${String(i).padStart(2, '0')}`)).toHaveLength(1);
    const second = await runCli(['legacy', 'import', 'walk', '--all'], cliEnv);
    expect(second.code, second.stderr).toBe(1);
    expect(second.stdout).toContain('imported: 0\nalready present: 30\nfailed: 1\n');
    const some = await runCli(['legacy', 'import', 'walk', 'w-03', 'w-04'], cliEnv);
    expect(some.code, some.stderr).toBe(0);
    expect(some.stdout).toBe('imported: 0\nalready present: 2\nfailed: 0\n');
    const usage = await runCli(['legacy', 'import', 'walk'], cliEnv);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('needs --all or at least one document id');
  }, 120_000);
});
