/**
 * The document platform on several nodes (issue 26), in one run:
 *
 * 1. Documents per second (`POST /v1/documents` with initialMetadata + `PUT` of 64 KiB fresh
 *    random bytes + `POST …/finalize`, bench/documents.ts's iteration) and canonical metadata
 *    writes per second (over a pool of 200 finalized documents), CLIENTS closed-loop clients on
 *    raw keep-alive connections, on these sides, in this order in odd rounds and in the
 *    reverse order in even ones:
 *      fs          one node, SVC_BLOB_BACKEND=fs, SVC_DURABILITY=relaxed (this build)
 *      fs before   the same on the build of `--before=DIR` (a worktree of the code before, built);
 *                  given only with --before: the same-run A/B of fs against that code
 *      pg-s3 ×1    one node on PostgreSQL + Ceph radosgw
 *      pg-s3 ×3    three svc processes, each with its own SVC_NODE_ID and data directory, one
 *                  database and one bucket prefix; clients spread round-robin over the nodes
 *    Every side runs on fresh servers: a fresh data directory, and on pg-s3 a fresh database and
 *    key prefix (deleted after the side). Each side's store and code are warmed by an uncounted
 *    document loop first. CPU over each timed window is read from /proc for every process
 *    involved (each svc node, PostgreSQL's postmaster and backends, radosgw, ceph-osd, ceph-mon,
 *    this client, the whole host) and reported per document / per write.
 * 2. Job pickup on pg-s3 (one node, then three): derived-metadata jobs
 *    (`POST /v1/documents/{id}/metadata` mode derived → 202 jobId), one every JOB_EVERY_MS (open
 *    loop, round-robin over the nodes), then each job read back (`GET /v1/jobs/{id}`). The figure
 *    is `startedAt − createdAt`: both stamped by svc with the host's clock (createdAt when the
 *    enqueue builds the record, before its unit commits; startedAt when a dispatcher claims it),
 *    milliseconds. Beside it `startedAt −` the moment the client read the 202 (can be negative:
 *    the job may start before the answer arrives).
 * 3. Takeover: three pg-s3 nodes with SVC_JOB_LEASE=5s. Nodes 2 and 3 stop, an OCR workflow on a
 *    scanned PDF of OCR_PAGES pages starts on node 1; once it is running nodes 2 and 3 start again
 *    (same data directories), and once both listen node 1 is killed (SIGKILL). Measured: the kill
 *    → the job's second `startedAt` (read on a survivor), against lease + one poll (1 s).
 *
 *   npm run bench:documents-cluster                      4 rounds, 5 s windows, 400 jobs per side
 *   npm run bench:documents-cluster -- --quick           2 rounds, 3 s windows, 200 jobs per side
 *   … -- --before=/work/wt-before                        adds the "fs before" side
 *   … -- --jobs-only                                     2 and 3 alone (with --before: on both builds, alternating)
 *
 * Prints a Markdown report on stdout and writes bench/results/documents-cluster-<time>.json.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { createCanvas } from '@napi-rs/canvas';
import { PDFDocument } from 'pdf-lib';
import { processCpuSeconds } from './cpu.js';
import {
  DOCUMENT_BYTES, NAMESPACE, POOL_SIZE, REQUEST_TIMEOUT_MS, SCHEMA, SCHEMA_URN, TENANT, type LoopResult, type Outcome,
  caseData, closedLoop, describe, jsonRequest, makeDocumentIteration, writeBody,
} from './documents.js';
import { type LatencySummary, summarize } from './load.js';
import { type S3Server, BUCKET, REGION, SCRATCH, client as s3ClientOf, deletePrefix, hostBusy, postgresCpu, procCpu, startS3 } from './pg-s3.js';
import { type PgServer, requirePostgres } from './postgres-server.js';
import { type Reply, call as callJson, expectStatus } from './json-call.js';
import { RawConnection } from './raw-http.js';
import { f, machineEnvironment } from './report.js';
import { ServerProcess } from './server-process.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(REPO, 'dist', 'server', 'main.js');
const args = benchArgs({
  usage: 'usage: node dist/bench/documents-cluster.js [--quick] [--before=DIR] [--jobs-only]',
  options: {
    quick: { type: 'boolean', help: '2 rounds, 3 s windows, 200 jobs per side (default: 4 rounds, 5 s windows, 400 jobs)' },
    before: { type: 'string', value: 'DIR', help: 'adds the "fs before" side: the build in DIR (a worktree of the code before, built)' },
    'jobs-only': { type: 'boolean', help: 'job pickup and takeover alone (with --before: on both builds, alternating)' },
  },
});
const { quick, before: beforeDir, 'jobs-only': jobsOnly } = args.values;
const CLIENTS = 16;
const ROUNDS = quick ? 2 : 4;
const WARMUP_MS = quick ? 500 : 1000;
const STORE_WARMUP_MS = quick ? 1500 : 3000;
const DOC_MS = quick ? 3000 : 5000;
const WRITE_MS = quick ? 3000 : 5000;
const JOBS = quick ? 200 : 400;
const JOB_EVERY_MS = 50;
const JOB_DOCUMENTS = 20;
const LEASE_MS = 5000;
const POLL_MS = 1000; // engine/jobs/queue.ts IDLE_POLL_MS
const OCR_PAGES = 6;
const PICKUP_P99_TARGET_MS = 100;
const DOCS_RATIO_TARGET = 0.3;
const OCR_WORKFLOW = 'urn:svc:workflow:ocr@1';

const log = (line: string) => process.stderr.write(`[bench:documents-cluster] ${line}\n`);
/** Wall-clock milliseconds with sub-millisecond resolution (the clock svc's Date.now() reads). */
const wall = () => performance.timeOrigin + performance.now();
const median = (xs: number[]) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const list = (xs: number[], d = 0) => `[${xs.map((x) => f(x, d)).join(', ')}]`;

// ---------------------------------------------------------------- clusters

type Build = 'this' | 'before';
type SideName = 'fs' | 'fs before' | 'pg-s3 ×1' | 'pg-s3 ×3';

interface Infra {
  pg: PgServer;
  s3: S3Server;
  s3c: S3Client;
  dbs: number;
}

interface Cluster {
  nodes: ServerProcess[];
  roots: string[];
  /** Environment of node i (to restart it). */
  envOf: (i: number) => NodeJS.ProcessEnv;
  entry: string;
  prefix?: string;
}

async function startNode(entry: string, root: string, env: NodeJS.ProcessEnv): Promise<ServerProcess> {
  return ServerProcess.start({ entry, fsRoot: root, durability: 'relaxed', env, startTimeoutMs: 60_000 });
}

async function startCluster(infra: Infra, backend: 'fs' | 'pg-s3', nodes: number, entry = ENTRY, extra: NodeJS.ProcessEnv = {}): Promise<Cluster> {
  let shared: NodeJS.ProcessEnv = { SVC_BLOB_BACKEND: 'fs' };
  let prefix: string | undefined;
  if (backend === 'pg-s3') {
    const n = infra.dbs++;
    prefix = `docs${n}/`;
    shared = {
      SVC_BLOB_BACKEND: 'pg-s3',
      SVC_PG_URL: await infra.pg.createDatabase(`docs_${n}`),
      SVC_S3_ENDPOINT: infra.s3.endpoint,
      SVC_S3_BUCKET: BUCKET,
      SVC_S3_PREFIX: prefix,
      SVC_S3_REGION: REGION,
      SVC_S3_FORCE_PATH_STYLE: 'true',
      AWS_ACCESS_KEY_ID: infra.s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: infra.s3.secretAccessKey,
      AWS_REGION: REGION,
    };
  }
  const envOf = (i: number): NodeJS.ProcessEnv => ({ ...shared, ...extra, HTTP_PORT: '0', SVC_S3_API_PORT: '0', SVC_NODE_ID: `node-${i + 1}` });
  const cluster: Cluster = { nodes: [], roots: [], envOf, entry, prefix };
  try {
    // One at a time: the first migrates the schema.
    for (let i = 0; i < nodes; i++) {
      const root = mkdtempSync(path.join(SCRATCH, `svc-bench-dc-${backend}-`));
      cluster.roots.push(root);
      cluster.nodes.push(await startNode(entry, root, envOf(i)));
    }
  } catch (err) {
    await stopCluster(infra, cluster);
    throw err;
  }
  return cluster;
}

const NOISE = /NodeVersionSupportWarning|AWS services|versions published after|node >=22|security updates|a\.co\/|trace-warnings|^\s*$/;

async function stopCluster(infra: Infra, c: Cluster): Promise<string[]> {
  await Promise.all(c.nodes.map((n) => n.stop()));
  const problems = c.nodes.flatMap((n, i) => n.problems.filter((p) => !NOISE.test(p)).map((p) => `node-${i + 1}: ${p.slice(0, 300)}`));
  for (const root of c.roots) rmSync(root, { recursive: true, force: true });
  if (c.prefix) {
    await deletePrefix(infra.s3c, c.prefix).catch((err: Error) => log(`deleting ${c.prefix}: ${err.message}`));
    await infra.s3.reclaim().catch((err: Error) => log(`radosgw gc: ${err.message}`));
  }
  return problems;
}

// ---------------------------------------------------------------- CPU

type Cpu = Record<string, number>;

function sampleCpu(infra: Infra, nodes: ServerProcess[]): Cpu {
  const u = process.cpuUsage();
  const out: Cpu = { client: (u.user + u.system) / 1e6, postgres: postgresCpu(infra.pg.pid), host: hostBusy() };
  nodes.forEach((n, i) => (out[`node-${i + 1}`] = processCpuSeconds(n.pid) ?? 0));
  for (const [name, pid] of Object.entries(infra.s3.pids)) out[name] = procCpu(pid);
  return out;
}

/** CPU milliseconds per item over a window, per process, with `svc` (all nodes) and `s3` (radosgw + ceph-osd + ceph-mon) summed. */
function perItem(a: Cpu, b: Cpu, items: number): Cpu {
  const out: Cpu = {};
  for (const k of Object.keys(b)) if (k in a) out[k] = ((b[k]! - a[k]!) * 1000) / Math.max(1, items);
  out.svc = Object.keys(out).filter((k) => k.startsWith('node-')).reduce((s, k) => s + out[k]!, 0);
  out.s3 = ['radosgw', 'ceph-osd', 'ceph-mon+mgr'].reduce((s, k) => s + (out[k] ?? 0), 0);
  out.other = out.host! - out.svc - out.postgres! - out.s3 - out.client!;
  return out;
}

/** closedLoop's window hooks that sample every process at the window's edges. */
function cpuWindow(infra: Infra, nodes: ServerProcess[]) {
  let a: Cpu | undefined;
  let b: Cpu | undefined;
  return {
    hooks: { begin: () => void (a = sampleCpu(infra, nodes)), end: () => void (b = sampleCpu(infra, nodes)) },
    per: (items: number) => (a && b ? perItem(a, b, items) : {}),
  };
}

// ---------------------------------------------------------------- HTTP helpers (setup, jobs)

/** A JSON call that gives up after a request's own timeout and a long poll's 30 s. */
const call = (port: number, method: string, target: string, token: string | undefined, body?: unknown, contentType?: string): Promise<Reply> =>
  callJson(port, method, target, token, body, { contentType, timeoutMs: REQUEST_TIMEOUT_MS + 35_000 });

async function tokenAndSchema(port: number): Promise<string> {
  const t = expectStatus(await call(port, 'POST', '/dev/token', undefined, { org_id: TENANT, sub: 'bench', roles: ['clerk'], ttl_seconds: 3600 }), 'POST /dev/token', 200);
  const token = t.json?.access_token as string;
  expectStatus(await call(port, 'POST', '/v1/schemas', token, SCHEMA), 'POST /v1/schemas', 200, 201);
  return token;
}

async function newDocument(port: number, token: string, bytes: Uint8Array, contentType = 'application/octet-stream'): Promise<{ documentId: string; key: string }> {
  const created = expectStatus(await call(port, 'POST', '/v1/documents', token, {}), 'POST /v1/documents', 201);
  expectStatus(await call(port, 'PUT', `/v1/uploads/${created.json.uploadId}/bytes`, token, bytes, contentType), 'PUT bytes', 204);
  const fin = expectStatus(await call(port, 'POST', `/v1/uploads/${created.json.uploadId}/finalize`, token, {}), 'POST finalize', 201);
  return { documentId: created.json.documentId as string, key: fin.json.contentRef.key as string };
}

// ---------------------------------------------------------------- 1. documents and writes

interface SideResult {
  side: SideName;
  round: number;
  nodes: number;
  warmup: { perSecond: number; errors: number };
  documents: LoopResult;
  documentsCpuMs: Cpu;
  writes: LoopResult;
  writesCpuMs: Cpu;
  problems: string[];
}

async function runSide(infra: Infra, side: SideName, round: number): Promise<SideResult> {
  const backend = side.startsWith('pg-s3') ? 'pg-s3' : 'fs';
  const nodes = side === 'pg-s3 ×3' ? 3 : 1;
  const entry = side === 'fs before' ? path.join(path.resolve(beforeDir!), 'dist', 'server', 'main.js') : ENTRY;
  const cluster = await startCluster(infra, backend, nodes, entry);
  const problems: string[] = [];
  try {
    const ports = cluster.nodes.map((n) => n.port);
    const token = await tokenAndSchema(ports[0]!);
    const auth = `Authorization: Bearer ${token}\r\n`;
    let seq = 0;
    const pool: string[] = [];
    const loop = { port: ports[0]!, ports, server: cluster.nodes[0]!, connections: CLIENTS };

    // Uncounted: compiles the routes, creates the block partitions (fs), opens PostgreSQL and S3
    // connections; the first POOL_SIZE documents it makes are the pool for the writes.
    const warm = await closedLoop({ ...loop, warmupMs: 0, durationMs: STORE_WARMUP_MS, stepNames: ['create', 'PUT', 'finalize'], iteration: makeDocumentIteration(auth, () => seq++, (id) => pool.length < POOL_SIZE && pool.push(id)) });
    while (pool.length < POOL_SIZE) {
      const conn = await RawConnection.connect(ports[pool.length % ports.length]!);
      try {
        const o = await makeDocumentIteration(auth, () => seq++, (id) => pool.push(id))(conn);
        if (!o.ok) throw new Error(`creating the pool: ${o.step}: ${o.detail}`);
      } finally {
        conn.close();
      }
    }

    const dw = cpuWindow(infra, cluster.nodes);
    const documents = await closedLoop({ ...loop, warmupMs: WARMUP_MS, durationMs: DOC_MS, window: dw.hooks, stepNames: ['create', 'PUT', 'finalize'], iteration: makeDocumentIteration(auth, () => seq++) });

    let w = 0;
    const writeIteration = async (conn: RawConnection): Promise<Outcome> => {
      const n = w++;
      const res = await conn.request(jsonRequest('POST', `/v1/documents/${pool[n % pool.length]}/metadata`, auth, writeBody(n)), true, REQUEST_TIMEOUT_MS);
      return res.status === 201 ? { ok: true, steps: [] } : { ok: false, step: 'POST …/metadata', detail: describe(res) };
    };
    const ww = cpuWindow(infra, cluster.nodes);
    const writes = await closedLoop({ ...loop, warmupMs: WARMUP_MS, durationMs: WRITE_MS, window: ww.hooks, stepNames: [], iteration: writeIteration });
    return {
      side,
      round,
      nodes,
      warmup: { perSecond: warm.perSecond, errors: warm.errors },
      documents,
      documentsCpuMs: dw.per(documents.completed),
      writes,
      writesCpuMs: ww.per(writes.completed),
      problems,
    };
  } finally {
    problems.push(...(await stopCluster(infra, cluster)));
    if (problems.length) log(`${side}: the servers logged ${problems.length} warning/error line(s); first: ${problems[0]}`);
  }
}

// ---------------------------------------------------------------- 2. job pickup

type Summary = LatencySummary & { count: number };
const summary = (xs: number[]): Summary => ({ ...summarize(xs), count: xs.length });

interface PickupResult {
  /** Which build's servers: this one, or --before's (--jobs-only). */
  build: Build;
  nodes: number;
  jobs: number;
  everyMs: number;
  /** startedAt − createdAt, ms (svc's stamps). */
  server: Summary;
  /** startedAt − the 202 read by the client, ms. */
  after202: Summary;
  /** The 202's round trip as the client saw it, ms. */
  enqueueRoundTrip: Summary;
  /** Jobs that took more than one attempt (their startedAt is the last attempt's). */
  retried: number;
  notCompleted: number;
}

async function jobPickup(cluster: Cluster, token: string, jobs: number): Promise<PickupResult> {
  const ports = cluster.nodes.map((n) => n.port);
  const docs: Array<{ documentId: string; key: string }> = [];
  for (let i = 0; i < JOB_DOCUMENTS; i++) docs.push(await newDocument(ports[i % ports.length]!, token, Buffer.from(`pickup document ${i} ${Math.random()}`)));
  let n = 0;
  const enqueue = async (port: number) => {
    const doc = docs[n % docs.length]!;
    const k = n++;
    const provenance = { producer: { name: 'bench', version: '1' }, producedAt: new Date().toISOString(), input: { kind: 'blob', key: doc.key } };
    const sent = wall();
    const r = expectStatus(await call(port, 'POST', `/v1/documents/${doc.documentId}/metadata`, token, { mode: 'derived', bundle: { namespaces: { [NAMESPACE]: { schema: SCHEMA_URN, data: caseData(k) } } }, provenance }), 'POST …/metadata (derived)', 202);
    return { jobId: r.json.jobId as string, sent, answered: wall() };
  };
  const settle = async (port: number, jobId: string) => {
    for (let i = 0; ; i++) {
      const r = expectStatus(await call(port, 'GET', `/v1/jobs/${jobId}?wait=30`, token), `GET /v1/jobs/${jobId}`, 200);
      if (['completed', 'failed', 'dead'].includes(r.json.state)) return r.json as { state: string; attempts: number; createdAt: string; startedAt: string | null };
      if (i > 4) throw new Error(`job ${jobId} still ${r.json.state}`);
    }
  };
  // Warm-up, not counted: each node's derived-job path (worker module, statements).
  for (let i = 0; i < 3 * ports.length; i++) {
    const e = await enqueue(ports[i % ports.length]!);
    await settle(ports[i % ports.length]!, e.jobId);
  }
  const sent: Array<{ jobId: string; sent: number; answered: number; port: number }> = [];
  const t0 = performance.now();
  for (let i = 0; i < jobs; i++) {
    const port = ports[i % ports.length]!;
    sent.push({ ...(await enqueue(port)), port });
    const next = t0 + (i + 1) * JOB_EVERY_MS;
    const wait = next - performance.now();
    if (wait > 0) await delay(wait);
  }
  const server: number[] = [];
  const after202: number[] = [];
  let retried = 0;
  let notCompleted = 0;
  for (const s of sent) {
    const job = await settle(ports[(sent.indexOf(s) + 1) % ports.length]!, s.jobId);
    if (job.state !== 'completed') notCompleted++;
    if (job.attempts > 1) retried++;
    if (!job.startedAt) continue;
    const started = Date.parse(job.startedAt);
    server.push(started - Date.parse(job.createdAt));
    after202.push(started - s.answered);
  }
  return {
    build: 'this',
    nodes: ports.length,
    jobs,
    everyMs: JOB_EVERY_MS,
    server: summary(server),
    after202: summary(after202),
    enqueueRoundTrip: summary(sent.map((s) => s.answered - s.sent)),
    retried,
    notCompleted,
  };
}

// ---------------------------------------------------------------- 3. takeover

/** A PDF of `pages` pages, each only a picture of text (no text layer): OCR reads every page. */
async function scannedPdf(pages: number): Promise<Buffer> {
  const lines = ['Client: Jane Example, case C-4711, filed 2026-11-21.', 'The quick brown fox jumps over the lazy dog.', 'Reference number 1234 5678 9012 3456 stays.', 'Lives at 221 Baker Street, London.'];
  const doc = await PDFDocument.create();
  for (let p = 0; p < pages; p++) {
    const canvas = createCanvas(1700, 140 + (lines.length + 1) * 90);
    const ctx = canvas.getContext('2d');
    ctx.fillStyle = 'white';
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = 'black';
    ctx.font = '48px sans-serif';
    [...lines, `Page ${p + 1} of ${pages}`].forEach((line, i) => ctx.fillText(line, 80, 110 + i * 90));
    const image = await doc.embedPng(await canvas.encode('png'));
    const page = doc.addPage([612, 792]);
    const width = 540;
    const height = (image.height / image.width) * width;
    page.drawImage(image, { x: 36, y: 792 - 72 - height, width, height });
  }
  return Buffer.from(await doc.save());
}

interface TakeoverResult {
  leaseMs: number;
  pollMs: number;
  ocrPages: number;
  /** kill → the job's second startedAt, ms. */
  takeoverMs?: number;
  /** First attempt's start → the kill (the job ran on node 1 this long), ms. */
  ranBeforeKillMs?: number;
  /** Restarting nodes 2 and 3 (both listening), ms. */
  restartMs?: number;
  /** The kill → a survivor's GET first showed the second attempt, ms (this client's polling included). */
  seenMs?: number;
  /** The job's final state and attempts. */
  finalState?: string;
  attempts?: number;
  /** kill → completed on a survivor, ms. */
  completedMs?: number;
  error?: string;
}

async function takeover(cluster: Cluster, token: string): Promise<TakeoverResult> {
  const result: TakeoverResult = { leaseMs: LEASE_MS, pollMs: POLL_MS, ocrPages: OCR_PAGES };
  const [a, b, c] = cluster.nodes as [ServerProcess, ServerProcess, ServerProcess];
  // Only node 1 runs jobs while the OCR job starts: nodes 2 and 3 stop (their data directories stay).
  await Promise.all([b.stop(), c.stop()]);
  const pdf = await scannedPdf(OCR_PAGES);
  const doc = await newDocument(a.port, token, pdf, 'application/pdf');
  const run = expectStatus(await call(a.port, 'POST', `/v1/documents/${doc.documentId}/workflows/${encodeURIComponent(OCR_WORKFLOW)}/run`, token, {}), 'POST …/workflows/ocr/run', 202);
  const jobId = run.json.jobId as string;
  let firstStart = 0;
  for (let i = 0; ; i++) {
    const job = expectStatus(await call(a.port, 'GET', `/v1/jobs/${jobId}`, token), 'GET job', 200).json;
    if (job.state === 'running') {
      firstStart = Date.parse(job.startedAt);
      break;
    }
    if (job.state !== 'pending' || i > 1500) throw new Error(`the OCR job did not start on node 1: ${JSON.stringify(job).slice(0, 300)}`);
    await delay(20);
  }
  // The survivors start while node 1 holds the lease (they cannot take a job whose lease runs).
  const r0 = performance.now();
  const [b2, c2] = await Promise.all([startNode(cluster.entry, cluster.roots[1]!, cluster.envOf(1)), startNode(cluster.entry, cluster.roots[2]!, cluster.envOf(2))]);
  cluster.nodes.splice(1, 2, b2, c2);
  result.restartMs = performance.now() - r0;
  const before = expectStatus(await call(b2.port, 'GET', `/v1/jobs/${jobId}`, token), 'GET job', 200).json;
  if (before.state !== 'running' || before.attempts !== 1) {
    result.error = `the OCR job was ${before.state} (attempt ${before.attempts}) before node 1 could be killed: ${OCR_PAGES} pages are too few here`;
    return result;
  }
  a.child.kill('SIGKILL');
  const killedAt = wall();
  result.ranBeforeKillMs = killedAt - firstStart;
  for (;;) {
    const job = expectStatus(await call(b2.port, 'GET', `/v1/jobs/${jobId}`, token), 'GET job', 200).json;
    if (job.attempts >= 2 && job.startedAt) {
      result.seenMs = wall() - killedAt;
      result.takeoverMs = Date.parse(job.startedAt) - killedAt;
      break;
    }
    if (['completed', 'failed', 'dead'].includes(job.state)) {
      result.error = `the job ended ${job.state} after attempt ${job.attempts} without a second attempt`;
      return result;
    }
    if (wall() - killedAt > LEASE_MS + 60_000) {
      result.error = `no second attempt within ${LEASE_MS + 60_000} ms of the kill`;
      return result;
    }
    await delay(10);
  }
  for (;;) {
    const job = expectStatus(await call(c2.port, 'GET', `/v1/jobs/${jobId}?wait=30`, token), 'GET job', 200).json;
    if (['completed', 'failed', 'dead'].includes(job.state)) {
      result.finalState = job.state;
      result.attempts = job.attempts;
      result.completedMs = Date.parse(job.finishedAt) - killedAt;
      break;
    }
    if (wall() - killedAt > 300_000) {
      result.error = 'the OCR job did not finish within 5 minutes of the kill';
      break;
    }
  }
  return result;
}

// ---------------------------------------------------------------- report

interface Report {
  startedAt: string;
  finishedAt?: string;
  quick: boolean;
  settings: Record<string, unknown>;
  environment: ReturnType<typeof machineEnvironment> & { idleHostBusyPercent?: number; loadAverageAtEnd?: number[]; s3: string; postgres: string; before?: string; beforeCommit?: string };
  sides: SideResult[];
  pickup: PickupResult[];
  takeover?: TakeoverResult;
  /** --jobs-only with --before: the takeover on the build before. */
  takeoverBefore?: TakeoverResult;
  errors: string[];
}

const SIDE_ORDER: SideName[] = ['fs before', 'fs', 'pg-s3 ×1', 'pg-s3 ×3'];

function verdict(pass: boolean | undefined): string {
  return pass === undefined ? 'NOT MEASURED' : pass ? 'PASS' : 'FAIL';
}

function render(r: Report): string {
  const L: string[] = [];
  const sides = SIDE_ORDER.filter((s) => r.sides.some((x) => x.side === s));
  const of = (s: SideName) => r.sides.filter((x) => x.side === s);
  const docs = (s: SideName) => of(s).map((x) => x.documents.perSecond);
  const writes = (s: SideName) => of(s).map((x) => x.writes.perSecond);
  /** Per-round ratios a/b (rounds paired by number). */
  const paired = (a: SideName, b: SideName, get: (x: SideResult) => number) =>
    of(a).map((x) => {
      const y = of(b).find((z) => z.round === x.round);
      return y ? get(x) / get(y) : NaN;
    }).filter(Number.isFinite);
  const ratioText = (xs: number[]) => (xs.length ? `**${f(median(xs), 3)}x** (per round ${list(xs, 3)})` : 'n/a');
  const env = r.environment;
  L.push(`# svc benchmark: the document platform on several nodes (issue 26)${r.quick ? ' (--quick)' : ''}`);
  L.push('');
  L.push(`- Run: ${r.startedAt} → ${r.finishedAt}; commit ${env.gitCommit ?? 'n/a'}${env.gitDirty ? ' (uncommitted changes)' : ''}; ${env.cpus} CPUs (${env.cpuModel}), ${f(env.memoryBytes / 2 ** 30)} GiB; ${env.os}; Node ${env.node}; load average at start ${env.loadAverageAtStart.join(' / ')}, at end ${env.loadAverageAtEnd?.join(' / ') ?? 'n/a'}; the host was ${f(env.idleHostBusyPercent)}% busy (of ${env.cpus * 100}%) in the 3 s before the bench started anything`);
  L.push(`- S3: ${env.s3}; PostgreSQL: ${env.postgres}; svc, PostgreSQL, radosgw and this client share the ${env.cpus} CPUs; data directories and memstore in ${SCRATCH}`);
  if (env.before) L.push(`- "fs before": ${env.before}/dist/server/main.js (commit ${env.beforeCommit ?? 'n/a'})`);
  L.push(`- Each side: fresh servers (pg-s3: a fresh database and bucket prefix), SVC_DURABILITY=relaxed, ${CLIENTS} clients on raw keep-alive connections (round-robin over the nodes), an uncounted ${STORE_WARMUP_MS / 1000} s document loop first; documents: ${WARMUP_MS / 1000} s warm-up + ${DOC_MS / 1000} s window of create (initialMetadata) + PUT ${DOCUMENT_BYTES / 1024} KiB + finalize; writes: canonical \`POST …/metadata\` round-robin over ${POOL_SIZE} documents, ${WARMUP_MS / 1000} s + ${WRITE_MS / 1000} s; ${ROUNDS} rounds, the side order reversed every other round`);
  L.push('');
  if (r.errors.length) {
    L.push('## Errors', '');
    for (const e of r.errors) L.push(`- ${e.replace(/\n/g, ' ').slice(0, 600)}`);
    L.push('');
  }

  // Targets.
  const fsDocs = median(docs('fs'));
  const pg1 = paired('pg-s3 ×1', 'fs', (x) => x.documents.perSecond);
  const pg3 = paired('pg-s3 ×3', 'fs', (x) => x.documents.perSecond);
  const pg1w = paired('pg-s3 ×1', 'fs', (x) => x.writes.perSecond);
  const pg3w = paired('pg-s3 ×3', 'fs', (x) => x.writes.perSecond);
  const ab = paired('fs', 'fs before', (x) => x.documents.perSecond);
  const abw = paired('fs', 'fs before', (x) => x.writes.perSecond);
  const totalErrors = r.sides.reduce((n, x) => n + x.documents.errors + x.writes.errors + x.warmup.errors, 0);
  L.push('## Targets', '');
  L.push('| Target | This run | Verdict |', '|---|---|---|');
  L.push(`| pg-s3 on one node ≥ ${DOCS_RATIO_TARGET}x fs documents/s | ${ratioText(pg1)}: ${f(median(docs('pg-s3 ×1')))} against ${f(fsDocs)} documents/s (medians) | ${verdict(pg1.length ? median(pg1) >= DOCS_RATIO_TARGET : undefined)} |`);
  L.push(`| (no target) pg-s3 on three nodes / fs documents/s | ${ratioText(pg3)}: ${f(median(docs('pg-s3 ×3')))} documents/s | — |`);
  L.push(`| (no target) canonical writes/s, pg-s3 one node / fs; three nodes / fs | ${ratioText(pg1w)}; ${ratioText(pg3w)}: ${f(median(writes('pg-s3 ×1')))}, ${f(median(writes('pg-s3 ×3')))} against ${f(median(writes('fs')))} writes/s | — |`);
  for (const p of r.pickup) {
    L.push(`| job pickup on pg-s3${p.build === 'before' ? ' (build before)' : ''}, ${p.nodes} node${p.nodes > 1 ? 's' : ''}: p99 ≤ ${PICKUP_P99_TARGET_MS} ms (enqueue → startedAt) | p50 ${f(p.server.p50Ms, 0)} ms, **p99 ${f(p.server.p99Ms, 0)} ms**, max ${f(p.server.maxMs, 0)} ms over ${p.server.count} jobs | ${verdict(p.server.count >= 200 ? p.server.p99Ms <= PICKUP_P99_TARGET_MS : undefined)} |`);
  }
  for (const [t, label] of [[r.takeover, ''], [r.takeoverBefore, ' (build before)']] as const) {
    if (!t) continue;
    L.push(`| takeover of a killed node's job${label} ≈ lease + one poll (${f(LEASE_MS / 1000)} s + ${f(POLL_MS / 1000)} s) | ${t.takeoverMs !== undefined ? `**${f(t.takeoverMs / 1000, 2)} s** from kill -9 to the second startedAt` : `not measured: ${t.error}`} | ${verdict(t.takeoverMs === undefined ? undefined : t.takeoverMs <= LEASE_MS + POLL_MS)} |`);
  }
  if (ab.length) {
    const spread = `min ${f(Math.min(...ab), 3)}, max ${f(Math.max(...ab), 3)}`;
    L.push(`| fs within noise of the code before (${env.beforeCommit?.slice(0, 7) ?? 'before'}), same run | documents/s ${ratioText(ab)} (${spread}); writes/s ${ratioText(abw)} | see below |`);
  }
  L.push(`| no unexpected answer or connection failure | ${totalErrors} | ${verdict(totalErrors === 0)} |`);
  L.push('');

  // Rates per round.
  L.push('## Documents and canonical writes per side and round', '');
  L.push(`| Side | Nodes | Documents/s per round | median | p50 / p99 document | Writes/s per round | median | p50 / p99 write | Host busy, documents (of which not this bench's processes) | Errors |`);
  L.push('|---|---|---|---|---|---|---|---|---|---|');
  for (const s of sides) {
    const xs = of(s);
    const last = xs.at(-1)!;
    L.push(`| ${s} | ${last.nodes} | ${list(docs(s))} | ${f(median(docs(s)))} | ${f(median(xs.map((x) => x.documents.latency.p50Ms)), 1)} / ${f(median(xs.map((x) => x.documents.latency.p99Ms)), 1)} ms | ${list(writes(s))} | ${f(median(writes(s)))} | ${f(median(xs.map((x) => x.writes.latency.p50Ms)), 2)} / ${f(median(xs.map((x) => x.writes.latency.p99Ms)), 1)} ms | ${f(median(xs.map((x) => (x.documentsCpuMs.host! * x.documents.perSecond) / 10)))}% (${f(median(xs.map((x) => (x.documentsCpuMs.other! * x.documents.perSecond) / 10)))}%) | ${xs.reduce((n, x) => n + x.documents.errors + x.writes.errors + x.warmup.errors, 0)}${xs.find((x) => x.documents.firstError || x.writes.firstError) ? ` (${(xs.find((x) => x.documents.firstError)?.documents.firstError ?? xs.find((x) => x.writes.firstError)?.writes.firstError ?? '').slice(0, 160).replace(/\|/g, '/')})` : ''} |`);
  }
  L.push('');
  L.push('Per-step latency of a document (median over rounds of p50 / p99): ' + sides.map((s) => `${s}: ${['create', 'PUT', 'finalize'].map((step, k) => `${step} ${f(median(of(s).map((x) => x.documents.steps[k]?.p50Ms ?? NaN)), 1)} / ${f(median(of(s).map((x) => x.documents.steps[k]?.p99Ms ?? NaN)), 1)} ms`).join(', ')}`).join('; ') + '.');
  L.push('');

  // CPU per item.
  const cpuTable = (title: string, get: (x: SideResult) => Cpu) => {
    L.push(`### ${title}`, '');
    L.push(`| Side | svc (all nodes) | per node | PostgreSQL | radosgw | ceph-osd | ceph-mon+mgr | bench client | other | host busy |`);
    L.push('|---|---|---|---|---|---|---|---|---|---|');
    for (const s of sides) {
      const xs = of(s).map(get);
      const m = (k: string) => (xs.every((c) => k in c) ? f(median(xs.map((c) => c[k]!)), 3) : '—');
      const nodeKeys = Object.keys(xs[0] ?? {}).filter((k) => k.startsWith('node-')).sort();
      L.push(`| ${s} | ${m('svc')} | ${nodeKeys.map((k) => `${k} ${m(k)}`).join(', ')} | ${s.startsWith('pg-s3') ? m('postgres') : `(${m('postgres')})`} | ${s.startsWith('pg-s3') ? m('radosgw') : `(${m('radosgw')})`} | ${s.startsWith('pg-s3') ? m('ceph-osd') : `(${m('ceph-osd')})`} | ${m('ceph-mon+mgr')} | ${m('client')} | ${m('other')} | ${m('host')} |`);
    }
    L.push('');
  };
  cpuTable('CPU milliseconds per document (create + PUT 64 KiB + finalize), medians over rounds', (x) => x.documentsCpuMs);
  cpuTable('CPU milliseconds per canonical metadata write, medians over rounds', (x) => x.writesCpuMs);
  L.push('CPU is read from /proc/<pid>/stat at the two edges of each timed window (svc: every thread of each node; PostgreSQL: the postmaster, its live backends and the exited ones; this client: process.cpuUsage) and divided by the items completed in the window. `other` = host busy − the processes listed (the kernel, idle Ceph threads, anything else on the host). On fs sides PostgreSQL and Ceph run idle beside (in brackets). 2 CPUs = 2,000 CPU-ms per second: a side whose host-busy × rate approaches 2,000 is bound by CPU.');
  L.push('');

  // Pickup.
  if (r.pickup.length) {
    L.push('## Job pickup on pg-s3', '');
    L.push(`Derived-metadata jobs (\`POST /v1/documents/{id}/metadata\` mode derived → 202), one every ${JOB_EVERY_MS} ms (open loop, round-robin over the nodes and over ${JOB_DOCUMENTS} documents), after ${'3 per node'} uncounted; then each job read back with \`GET /v1/jobs/{id}\`. Pickup = \`startedAt − createdAt\`: both svc's own clock (since issue 37 PostgreSQL's, which each node follows; before it Date.now(); one host either way) (createdAt when the enqueue builds the record, before its unit commits to PostgreSQL; startedAt when a dispatcher claims it), millisecond resolution, so the figure covers the enqueue's commit, the wake-up (the committing node's own, or LISTEN/NOTIFY on the others) and the claim's unit; the 202's round trip is beside it.`);
    L.push('');
    L.push('| Build | Nodes | Jobs | Pickup p50 | p90 | p99 | max | startedAt − 202 read (p50 / p99) | 202 round trip (p50 / p99) | Retried | Not completed |');
    L.push('|---|---|---|---|---|---|---|---|---|---|---|');
    for (const p of r.pickup) L.push(`| ${p.build} | ${p.nodes} | ${p.server.count} | ${f(p.server.p50Ms, 0)} ms | ${f(p.server.p90Ms, 0)} ms | ${f(p.server.p99Ms, 0)} ms | ${f(p.server.maxMs, 0)} ms | ${f(p.after202.p50Ms, 1)} / ${f(p.after202.p99Ms, 1)} ms | ${f(p.enqueueRoundTrip.p50Ms, 1)} / ${f(p.enqueueRoundTrip.p99Ms, 1)} ms | ${p.retried} | ${p.notCompleted} |`);
    L.push('');
  }
  for (const [t, label] of [[r.takeover, ''], [r.takeoverBefore, ' (build before)']] as const) {
    if (!t) continue;
    L.push(`## Takeover of a killed node's job${label}`, '');
    L.push(`Three pg-s3 nodes, SVC_JOB_LEASE=${LEASE_MS / 1000}s (renewed every third of it). Nodes 2 and 3 stopped; an OCR workflow (\`${OCR_WORKFLOW}\`) on a scanned PDF of ${t.ocrPages} image-only pages started on node 1; once it was running nodes 2 and 3 started again on their data directories (${f(t.restartMs, 0)} ms), then node 1 was killed with SIGKILL after running the job for ${f(t.ranBeforeKillMs, 0)} ms.`);
    L.push('');
    if (t.error) L.push(`**Not measured**: ${t.error}`, '');
    L.push(`- kill → the second attempt's startedAt (svc's stamp): **${t.takeoverMs === undefined ? 'n/a' : `${f(t.takeoverMs, 0)} ms`}**; expected between lease − renewal interval (${f(LEASE_MS - LEASE_MS / 3, 0)} ms) and lease (${f(LEASE_MS, 0)} ms), plus the claim; bound: lease + one poll = ${f(LEASE_MS + POLL_MS, 0)} ms`);
    L.push(`- kill → this client first saw attempt 2 (polling every 10 ms): ${f(t.seenMs, 0)} ms; kill → the job completed on a survivor: ${f(t.completedMs, 0)} ms (final state ${t.finalState ?? 'n/a'}, attempts ${t.attempts ?? 'n/a'})`);
    L.push('');
  }
  const problems = r.sides.flatMap((x) => x.problems.map((p) => `${x.side} round ${x.round}: ${p}`));
  if (problems.length) {
    L.push('## Server warnings and errors (first 10)', '');
    for (const p of problems.slice(0, 10)) L.push(`- ${p.replace(/\|/g, '/').slice(0, 300)}`);
    L.push('');
  }
  return L.join('\n');
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  const report: Report = {
    startedAt: new Date().toISOString(),
    quick,
    settings: { clients: CLIENTS, rounds: ROUNDS, warmupMs: WARMUP_MS, storeWarmupMs: STORE_WARMUP_MS, documentMs: DOC_MS, writeMs: WRITE_MS, poolSize: POOL_SIZE, documentBytes: DOCUMENT_BYTES, jobs: JOBS, jobEveryMs: JOB_EVERY_MS, leaseMs: LEASE_MS, ocrPages: OCR_PAGES },
    environment: { ...machineEnvironment(REPO), s3: 'n/a', postgres: 'n/a' },
    sides: [],
    pickup: [],
    errors: [],
  };
  {
    // What the host does without this bench (other processes): % of one core over 3 s.
    const b0 = hostBusy();
    const t0 = performance.now();
    await delay(3000);
    report.environment.idleHostBusyPercent = ((hostBusy() - b0) / ((performance.now() - t0) / 1000)) * 100;
  }
  if (beforeDir) {
    report.environment.before = path.resolve(beforeDir);
    try {
      const { execFileSync } = await import('node:child_process');
      report.environment.beforeCommit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: beforeDir, encoding: 'utf8' }).trim();
    } catch {
      // not a checkout
    }
  }
  let pg: PgServer | undefined;
  let s3: S3Server | undefined;
  const live = new Set<Cluster>();
  const cleanup = async () => {
    for (const c of live) for (const n of c.nodes) n.kill();
    await s3?.stop().catch((err: Error) => log(`S3 stop: ${err.message}`));
    await pg?.stop().catch((err: Error) => log(`PostgreSQL stop: ${err.message}`));
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    [pg, s3] = await Promise.all([requirePostgres(), startS3()]);
    report.environment.s3 = s3.kind === 'radosgw' ? 'Ceph radosgw, single node, memstore OSD (scripts/ceph/start.sh)' : 's3rver FALLBACK (Ceph could not start): NOT a production S3 server';
    report.environment.postgres = `bench/postgres-server.ts (fsync and synchronous_commit off), pid ${pg.pid}`;
    log(`PostgreSQL pid ${pg.pid} on ${pg.port}; ${s3.kind} at ${s3.endpoint}`);
    const s3c = s3ClientOf(s3);
    await s3c.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const infra: Infra = { pg, s3, s3c, dbs: 0 };

    // 1. Documents and writes, the side order reversed every other round.
    const sides: SideName[] = beforeDir ? ['fs before', 'fs', 'pg-s3 ×1', 'pg-s3 ×3'] : ['fs', 'pg-s3 ×1', 'pg-s3 ×3'];
    for (let round = 1; round <= (jobsOnly ? 0 : ROUNDS); round++) {
      // Reversed every other round: each pair of neighbours (fs before / fs, fs / pg-s3 ×1) swaps order.
      const order = round % 2 === 0 ? [...sides].reverse() : sides;
      for (const side of order) {
        try {
          const x = await runSide(infra, side, round);
          report.sides.push(x);
          log(`round ${round} ${side}: ${f(x.documents.perSecond)} documents/s (svc ${f(x.documentsCpuMs.svc, 2)} CPU-ms each, host ${f(x.documentsCpuMs.host, 2)}), ${f(x.writes.perSecond)} writes/s, ${x.documents.errors + x.writes.errors} error(s)`);
        } catch (err) {
          report.errors.push(`round ${round} ${side}: ${err instanceof Error ? err.message : String(err)}`);
          log(`round ${round} ${side} FAILED: ${err instanceof Error ? err.stack : String(err)}`);
        }
      }
    }

    // 2. Job pickup, one node then three; 3. takeover on the three. With --jobs-only and
    // --before, on both builds: this one first on one node, the one before first on three.
    const builds: Build[] = jobsOnly && beforeDir ? ['this', 'before'] : ['this'];
    for (const [nodes, build] of [1, 3].flatMap((n, i) => (i % 2 === 0 ? builds : [...builds].reverse()).map((b) => [n, b] as const))) {
      let cluster: Cluster | undefined;
      try {
        const entry = build === 'before' ? path.join(path.resolve(beforeDir!), 'dist', 'server', 'main.js') : ENTRY;
        cluster = await startCluster(infra, 'pg-s3', nodes, entry, { SVC_JOB_LEASE: `${LEASE_MS / 1000}s` });
        live.add(cluster);
        const token = await tokenAndSchema(cluster.nodes[0]!.port);
        const p = { ...(await jobPickup(cluster, token, JOBS)), build };
        report.pickup.push(p);
        log(`pickup, ${build} build, ${nodes} node(s): p50 ${f(p.server.p50Ms)} ms, p99 ${f(p.server.p99Ms)} ms, max ${f(p.server.maxMs)} ms (${p.server.count} jobs, ${p.retried} retried)`);
        if (nodes === 3) {
          const t = await takeover(cluster, token);
          if (build === 'before') report.takeoverBefore = t;
          else report.takeover = t;
          log(`takeover, ${build} build: ${t.takeoverMs === undefined ? t.error : `${f(t.takeoverMs)} ms from the kill to the second startedAt`}`);
        }
      } catch (err) {
        report.errors.push(`jobs on ${nodes} node(s): ${err instanceof Error ? err.message : String(err)}`);
        log(`jobs on ${nodes} node(s) FAILED: ${err instanceof Error ? err.stack : String(err)}`);
      } finally {
        if (cluster) {
          live.delete(cluster);
          const problems = await stopCluster(infra, cluster);
          // The killed node's lease warning on the survivors is expected.
          const unexpected = problems.filter((p) => !/lost its lease|exited on its own/.test(p));
          if (unexpected.length) log(`jobs, ${nodes} node(s): ${unexpected.length} warning/error line(s); first: ${unexpected[0]}`);
        }
      }
    }
    s3c.destroy();
  } catch (err) {
    report.errors.push(err instanceof Error ? err.message : String(err));
    log(`FAILED: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
  report.finishedAt = new Date().toISOString();
  report.environment.loadAverageAtEnd = os.loadavg().map((v) => Math.round(v * 100) / 100);
  const markdown = render(report);
  const outDir = path.join(REPO, 'bench', 'results');
  mkdirSync(outDir, { recursive: true });
  const jsonFile = path.join(outDir, `documents-cluster-${report.startedAt.replace(/:/g, '-')}.json`);
  writeFileSync(jsonFile, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`${markdown}\n`);
  log(`wrote ${path.relative(REPO, jsonFile)}`);
  if (report.errors.length) process.exitCode = 1;
}

await main();
