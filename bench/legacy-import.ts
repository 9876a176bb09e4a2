/**
 * Legacy import bench (issue 21), on the real server in one run:
 *
 * 1. Bytes: one large legacy binary (default 1 GiB) imported (`POST /v1/legacy/import`, its job
 *    followed to completion), against svc's own direct ingest (`POST /api/v1/blobs`) of as many
 *    bytes in the same run (fresh bytes of another seed: the same bytes would deduplicate the
 *    import away). Target: at least 0.7x.
 * 2. Documents: N small legacy documents (default 2,000 of 16 KiB) imported by 16 clients
 *    (each: POST, then the job polled to its end), against the same 16 clients creating as many
 *    documents of the same size the ordinary way (POST /v1/documents + PUT bytes + finalize).
 *    Target: at least 0.5x.
 *
 * Usage: npm run bench:legacy-import -- [--docs N] [--doc-kib K] [--big-mib M] [--clients C]
 */
import { spawn } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';

const MAIN = fileURLToPath(new URL('../server/main.js', import.meta.url));
const MiB = 1024 * 1024;

const args = benchArgs({
  usage: 'usage: node dist/bench/legacy-import.js [--docs N] [--doc-kib K] [--big-mib M] [--clients C]',
  options: {
    docs: { type: 'string', value: 'N', default: '2000', help: 'small legacy documents imported' },
    'doc-kib': { type: 'string', value: 'K', default: '16', help: 'KiB per small document' },
    'big-mib': { type: 'string', value: 'M', default: '1024', help: 'MiB of the large legacy binary' },
    clients: { type: 'string', value: 'C', default: '16', help: 'clients for the documents part' },
  },
});
const DOCS = args.number('docs');
const DOC_BYTES = args.number('doc-kib') * 1024;
const BIG_BYTES = args.number('big-mib') * MiB;
const CLIENTS = args.number('clients');

function place(root: string, id: string, file: string, mime: string): void {
  const h = createHash('sha256');
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.allocUnsafe(8 * MiB);
  for (let n; (n = fs.readSync(fd, buf)) > 0; ) h.update(buf.subarray(0, n));
  fs.closeSync(fd);
  const hex = h.digest('hex');
  const dir = path.join(root, 'binaries', hex.slice(0, 2), hex.slice(2, 4));
  fs.mkdirSync(dir, { recursive: true });
  fs.renameSync(file, path.join(dir, `${hex}.bin`));
  fs.writeFileSync(path.join(root, 'metadata', `${id}.xml`), `<record><binaryHash>${hex}</binaryHash><mimeType>${mime}</mimeType></record>`);
}

function randomFile(file: string, size: number): void {
  const fd = fs.openSync(file, 'w');
  const buf = Buffer.allocUnsafe(Math.min(size, 8 * MiB));
  for (let left = size; left > 0; left -= buf.length) fs.writeSync(fd, randomFillSync(buf), 0, Math.min(left, buf.length));
  fs.closeSync(fd);
}

async function main(): Promise<void> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-legacy-'));
  const repo = path.join(tmp, 'repo');
  fs.mkdirSync(path.join(repo, 'metadata'), { recursive: true });
  process.stderr.write(`building the repository: ${DOCS} documents of ${DOC_BYTES} B and one of ${BIG_BYTES / MiB} MiB\n`);
  for (let i = 0; i < DOCS; i++) {
    const f = path.join(tmp, 'doc');
    fs.writeFileSync(f, randomFillSync(Buffer.allocUnsafe(DOC_BYTES)));
    place(repo, `d-${i}`, f, 'application/octet-stream');
  }
  randomFile(path.join(tmp, 'big'), BIG_BYTES);
  place(repo, 'big', path.join(tmp, 'big'), 'application/octet-stream');
  const direct = path.join(tmp, 'direct.bin');
  randomFile(direct, BIG_BYTES);

  const proc = spawn(process.execPath, [MAIN, 'serve'], {
    env: { ...process.env, SVC_HTTP_PORT: '0', HTTP_PORT: '0', SVC_FS_ROOT: path.join(tmp, 'data'), SVC_LOG_LEVEL: 'warn', SVC_LEGACY_REPOS: `bench=${repo}` },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line) resolve(JSON.parse(line).port);
    });
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    const token = (await (await fetch(`${base}/dev/token`, { method: 'POST', body: '{}' })).json()).access_token as string;
    const auth = { Authorization: `Bearer ${token}` };
    const post = async (p: string, body: unknown) => {
      const r = await fetch(base + p, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const json = await r.json();
      if (r.status >= 300) throw new Error(`${p}: ${r.status} ${JSON.stringify(json)}`);
      return json;
    };
    const importOne = async (id: string) => {
      const { jobId } = await post('/v1/legacy/import', { repo: 'bench', legacyDocId: id });
      for (;;) {
        const job = await (await fetch(`${base}/v1/jobs/${jobId}?wait=30`, { headers: auth })).json();
        if (job.state === 'completed') return;
        if (job.state === 'failed' || job.state === 'dead') throw new Error(`import ${id}: ${JSON.stringify(job.error)}`);
      }
    };
    const pool = async (n: number, work: (i: number) => Promise<void>) => {
      let next = 0;
      await Promise.all(Array.from({ length: CLIENTS }, async () => {
        while (next < n) await work(next++);
      }));
    };

    // 1. Bytes.
    let t = performance.now();
    const up = await fetch(`${base}/api/v1/blobs`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(BIG_BYTES) }, body: fs.createReadStream(direct) as unknown as BodyInit, duplex: 'half' } as RequestInit);
    if (up.status >= 300) throw new Error(`direct ingest: ${up.status} ${await up.text()}`);
    const directSeconds = (performance.now() - t) / 1000;
    t = performance.now();
    await importOne('big');
    const importSeconds = (performance.now() - t) / 1000;

    // 2. Documents.
    const docBytes = randomFillSync(Buffer.allocUnsafe(DOC_BYTES));
    t = performance.now();
    await pool(DOCS, async (i) => {
      docBytes.writeUInt32LE(i, 0);
      docBytes.writeUInt32LE(0xbe11c4, 4);
      const { uploadId } = await post('/v1/documents', {});
      const r = await fetch(`${base}/v1/uploads/${uploadId}/bytes`, { method: 'PUT', headers: auth, body: docBytes });
      if (r.status !== 204) throw new Error(`PUT bytes: ${r.status}`);
      await post(`/v1/uploads/${uploadId}/finalize`, {});
    });
    const createSeconds = (performance.now() - t) / 1000;
    t = performance.now();
    await pool(DOCS, (i) => importOne(`d-${i}`));
    const importDocsSeconds = (performance.now() - t) / 1000;

    const mbps = (s: number) => BIG_BYTES / MiB / s;
    const bytesRatio = mbps(importSeconds) / mbps(directSeconds);
    const docsRatio = DOCS / importDocsSeconds / (DOCS / createSeconds);
    const lines = [
      `legacy import bench: ${BIG_BYTES / MiB} MiB binary, ${DOCS} documents of ${DOC_BYTES / 1024} KiB, ${CLIENTS} clients`,
      `  bytes: import ${mbps(importSeconds).toFixed(0)} MiB/s, direct ingest ${mbps(directSeconds).toFixed(0)} MiB/s: ${bytesRatio.toFixed(2)}x (target >= 0.7x) ${bytesRatio >= 0.7 ? 'ok' : 'MISSED'}`,
      `  documents: import ${(DOCS / importDocsSeconds).toFixed(0)}/s, creation ${(DOCS / createSeconds).toFixed(0)}/s: ${docsRatio.toFixed(2)}x (target >= 0.5x) ${docsRatio >= 0.5 ? 'ok' : 'MISSED'}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`bench: ${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
