/**
 * The cost of Idempotency-Key on document creates (issue 37), same run, same server:
 * `POST /v1/documents {}` in a closed loop of CLIENTS clients (fetch, keep-alive), timed windows
 * alternating "no key" and "a fresh key on every create" (ABBA order per round), on fs (one node,
 * SVC_DURABILITY=relaxed) and, with --pg-s3, on one pg-s3 node (PostgreSQL of its own + S3:
 * radosgw, else s3rver). Every answer must be 201. The figure is creates/s with a key over
 * creates/s without (target ≥ 0.9x). Beside it, the CPU each create costs the svc process and, on
 * pg-s3, PostgreSQL (all its processes), from /proc: on this 2-core host both share the cores
 * with the bench client, so the rate ratio is bound by their sum, while a node whose database runs
 * elsewhere is bound by its own.
 *
 *   npm run bench:idempotency                     fs, 4 rounds of 3 s windows
 *   npm run bench:idempotency -- --pg-s3          fs, then pg-s3
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { benchArgs } from './args.js';
import { BUCKET, REGION, client as s3ClientOf, postgresCpu, procCpu, startS3 } from './pg-s3.js';
import { requirePostgres } from './postgres-server.js';
import { ServerProcess } from './server-process.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const CLIENTS = 16;
const ROUNDS = 4;
const WINDOW_MS = 3000;

async function token(base: string): Promise<string> {
  const r = await fetch(`${base}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org_id: 'bench', sub: 'bench', scope: 'doc.create doc.read' }) });
  return ((await r.json()) as { access_token: string }).access_token;
}

interface Window {
  perSecond: number;
  /** CPU-ms per create: the svc process, PostgreSQL (0 without). */
  serverMs: number;
  postgresMs: number;
}

/** Creates per second over one window, CLIENTS clients, and the CPU they took; each answer must be 201. */
async function window(base: string, auth: string, keyed: boolean, serverPid: number, postmaster?: number): Promise<Window> {
  const cpu = () => ({ server: procCpu(serverPid, true), postgres: postmaster === undefined ? 0 : postgresCpu(postmaster) });
  const before = cpu();
  const until = Date.now() + WINDOW_MS;
  let done = 0;
  const client = async () => {
    while (Date.now() < until) {
      const headers: Record<string, string> = { Authorization: `Bearer ${auth}`, 'Content-Type': 'application/json' };
      if (keyed) headers['Idempotency-Key'] = `"${randomUUID()}"`;
      const r = await fetch(`${base}/v1/documents`, { method: 'POST', headers, body: '{}' });
      await r.arrayBuffer();
      if (r.status !== 201) throw new Error(`POST /v1/documents answered ${r.status}`);
      done++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const after = cpu();
  return { perSecond: done / ((performance.now() - started) / 1000), serverMs: ((after.server - before.server) * 1000) / done, postgresMs: ((after.postgres - before.postgres) * 1000) / done };
}

async function side(name: string, env: NodeJS.ProcessEnv, postmaster?: number): Promise<string> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-idem-'));
  const server = await ServerProcess.start({ entry: ENTRY, fsRoot: root, durability: 'relaxed', env });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const auth = await token(base);
    const pid = server.child.pid!;
    await window(base, auth, false, pid); // warm-up, not counted
    await window(base, auth, true, pid);
    const plain: Window[] = [];
    const keyed: Window[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // ABBA: neither side always runs on the warmer store.
      const order = round % 2 === 0 ? [false, true] : [true, false];
      for (const k of order) (k ? keyed : plain).push(await window(base, auth, k, pid, postmaster));
    }
    const mean = (xs: Window[], of: (w: Window) => number) => xs.reduce((a, w) => a + of(w), 0) / xs.length;
    const rate = (w: Window) => w.perSecond;
    const ratio = mean(keyed, rate) / mean(plain, rate);
    const cpu = (of: (w: Window) => number) => `${mean(plain, of).toFixed(3)} / ${mean(keyed, of).toFixed(3)}`;
    const postgres = postmaster === undefined ? 'n/a' : cpu((w) => w.postgresMs);
    return `| ${name} | ${mean(plain, rate).toFixed(0)} | ${mean(keyed, rate).toFixed(0)} | ${ratio.toFixed(3)}x | ${cpu((w) => w.serverMs)} | ${postgres} | ${plain.map((w) => w.perSecond.toFixed(0)).join(' ')} / ${keyed.map((w) => w.perSecond.toFixed(0)).join(' ')} |`;
  } finally {
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/idempotency.js [--pg-s3]',
    options: { 'pg-s3': { type: 'boolean', help: 'fs, then one pg-s3 node (PostgreSQL of its own + S3: radosgw, else s3rver)' } },
  });
  const rows = [await side('fs', { SVC_BLOB_BACKEND: 'fs' })];
  if (args.values['pg-s3']) {
    const pg = await requirePostgres();
    const s3 = await startS3(512 * 1024 * 1024);
    try {
      const s3Client = s3ClientOf(s3);
      await s3Client.send(new CreateBucketCommand({ Bucket: BUCKET })).catch(() => {});
      rows.push(await side(`pg-s3 (${s3.kind})`, {
        SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: await pg.createDatabase('svc_bench_idem'), SVC_S3_ENDPOINT: s3.endpoint, SVC_S3_BUCKET: BUCKET,
        SVC_S3_PREFIX: `idem-${Date.now()}/`, AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey, AWS_REGION: REGION,
      }, pg.pid));
    } finally {
      await s3.stop();
      await pg.stop();
    }
  }
  console.log(`POST /v1/documents, ${CLIENTS} clients, ${ROUNDS} rounds of ${WINDOW_MS / 1000} s windows per side (ABBA)\n`);
  console.log('| backend | creates/s, no key | creates/s, a key each | keyed / plain | svc CPU-ms per create, no key / key | PostgreSQL CPU-ms per create, no key / key | windows (plain / keyed) |');
  console.log('|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
