/**
 * The pg-s3 backend against plain S3 clients and against the fs backend (issue 19), in one run:
 *
 *   (a) ingest of a 1 GiB random file into svc pg-s3 (one connection, POST /api/v1/blobs) against
 *       an `@aws-sdk/lib-storage` Upload of the same file to the same S3 server;    target >= 0.7x
 *   (b) download of that blob from svc (GET, one connection) against ranged GETs of the
 *       lib-storage object (8 MiB ranges, 4 in flight);                             target >= 0.7x
 *   (c) 4 KiB uploads/s (distinct random bodies, 16 connections) against svc pg-s3 and svc fs,
 *       both SVC_DURABILITY=relaxed;                                                target >= 0.5x
 *
 * It starts its own PostgreSQL cluster (bench/postgres-server.ts) and a single-node Ceph radosgw
 * (scripts/ceph/start.sh); only when Ceph cannot start it falls back to s3rver, and says so
 * loudly. Sides alternate within each round and the order flips every round; one uncounted round
 * first. Every svc ingest goes to a fresh database and a fresh key prefix, so nothing dedups
 * against an earlier round, and each side's objects are deleted (and radosgw's garbage collected)
 * before the next side runs: memstore keeps every byte in RAM. Beside the rates it reports the
 * CPU seconds of each process involved (svc, this client, radosgw, ceph-osd, postgres) per
 * measured phase, to say where the time goes.
 *
 *   npm run bench:pg-s3             1 GiB, 5 counted rounds
 *   npm run bench:pg-s3 -- --quick  256 MiB, 2 counted rounds, shorter 4 KiB windows
 *
 * SVC_BENCH_PART_MIB / SVC_BENCH_QUEUE override lib-storage's partSize / queueSize (16 / 4).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { s3Client } from '../engine/store/s3/block-store.js';
import { benchArgs } from './args.js';
import { THREAD_GROUPS, type ThreadGroup, ThreadWindow, ticksPerSecond } from './cpu.js';
import { downloadBlob, uploadFile, writeRandomFile } from './large.js';
import { runLoad } from './load.js';
import { type PgServer, requirePostgres } from './postgres-server.js';
import { ServerProcess } from './server-process.js';
import { libStorageUpload, rangedDownload } from './s3-transfers.js';

const run = promisify(execFile);
const ENTRY = fileURLToPath(new URL('../server/main.js', import.meta.url));
const CEPH_SCRIPTS = fileURLToPath(new URL('../../scripts/ceph/', import.meta.url));
const MiB = 1024 * 1024;
const PART_SIZE = Number(process.env.SVC_BENCH_PART_MIB ?? 16) * MiB;
const QUEUE_SIZE = Number(process.env.SVC_BENCH_QUEUE ?? 4);
const RANGE_SIZE = 8 * MiB;
const RANGES_IN_FLIGHT = 4;
const SMALL = 4096;
const CONNECTIONS = 16;
export const BUCKET = 'svc-bench';
export const REGION = 'us-east-1';
// Everything in memory: a disk-backed source or data directory adds writeback noise to both sides.
export const SCRATCH = process.env.SVC_BENCH_DIR ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());
// The PostgreSQL helper puts its cluster under os.tmpdir().
process.env.TMPDIR = SCRATCH;

const log = (line: string) => process.stderr.write(`[bench:pg-s3] ${line}\n`);

// ---------------------------------------------------------------- S3 server

export interface S3Server {
  kind: 'radosgw' | 's3rver';
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Processes whose CPU is reported (radosgw, ceph-osd); none for s3rver (it runs in this process). */
  pids: Record<string, number>;
  /** Reclaims deleted objects' space now (radosgw's garbage collector), so memstore's RAM comes back. */
  reclaim(): Promise<void>;
  /** Requests the server has answered since it started (radosgw's `rgw.req` perf counter), undefined when unknown (s3rver). */
  requests(): Promise<number | undefined>;
  stop(): Promise<void>;
}

async function startRadosgw(memstoreBytes: number): Promise<S3Server> {
  const dir = mkdtempSync(path.join(SCRATCH, 'svc-bench-ceph-'));
  const env = { ...process.env, CEPH_MEMSTORE_BYTES: String(memstoreBytes) };
  const stop = async () => {
    await run(path.join(CEPH_SCRIPTS, 'stop.sh'), [dir], { env }).catch((err: Error) => log(`ceph stop.sh: ${err.message}`));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { stdout } = await run(path.join(CEPH_SCRIPTS, 'start.sh'), [dir], { env, timeout: 120_000 });
    const info = JSON.parse(stdout.trim().split('\n').at(-1)!) as { endpoint: string; accessKeyId: string; secretAccessKey: string; pids: Record<string, number> };
    const conf = path.join(dir, 'ceph.conf');
    return {
      kind: 'radosgw',
      endpoint: info.endpoint,
      accessKeyId: info.accessKeyId,
      secretAccessKey: info.secretAccessKey,
      pids: { radosgw: info.pids.rgw!, 'ceph-osd': info.pids.osd!, 'ceph-mon+mgr': info.pids.mon! },
      async reclaim() {
        await run('radosgw-admin', ['-c', conf, 'gc', 'process', '--include-all'], { timeout: 120_000 });
      },
      async requests() {
        // Every S3 request radosgw served (HEAD, PUT, GET, ...), from its admin socket.
        const { stdout: dump } = await run('ceph', ['--admin-daemon', path.join(dir, 'run', 'client.rgw.x.asok'), 'perf', 'dump', 'rgw'], { timeout: 30_000 });
        return (JSON.parse(dump) as { rgw: { req: number } }).rgw.req;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function startS3rver(): Promise<S3Server> {
  const dir = mkdtempSync(path.join(SCRATCH, 'svc-bench-s3rver-'));
  // s3rver has no types (test/helpers/s3rver.d.ts is the tests' own); the import is loose on purpose.
  const { default: S3rver } = (await import('s3rver' as string)) as { default: new (o: object) => { run(): Promise<{ port: number }>; close(): Promise<void> } };
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir });
  const { port } = await server.run();
  return {
    kind: 's3rver',
    endpoint: `http://127.0.0.1:${port}`,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    pids: {},
    async reclaim() {},
    async requests() {
      return undefined;
    },
    async stop() {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A single-node Ceph radosgw (memstore OSD of `memstoreBytes`; default: one 1 GiB object and its
 * leftovers awaiting gc, memstore allocates as written), or s3rver with a loud banner when Ceph
 * cannot start.
 */
export async function startS3(memstoreBytes = 4 * 1024 * MiB): Promise<S3Server> {
  try {
    return await startRadosgw(memstoreBytes);
  } catch (err) {
    const bar = '!'.repeat(100);
    log(`${bar}\nCeph radosgw could not start: ${(err as Error).message}\nFALLING BACK TO s3rver (in this process): these figures do NOT measure a production S3 server.\n${bar}`);
    return startS3rver();
  }
}

// ---------------------------------------------------------------- CPU accounting

/** utime + stime (+ cutime + cstime: exited children, e.g. PostgreSQL backends) in seconds. */
export function procCpu(pid: number, children = false): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(rest[11]) + Number(rest[12]) + (children ? Number(rest[13]) + Number(rest[14]) : 0);
    return ticks / ticksPerSecond();
  } catch {
    return 0;
  }
}

/** A postmaster and its live backends, with the backends that have exited (the postmaster's cutime). */
export function postgresCpu(postmaster: number): number {
  let total = procCpu(postmaster, true);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const f = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const ppid = Number(f.slice(f.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === postmaster) total += procCpu(Number(entry), true);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

export function hostBusy(): number {
  const v = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  return (v.slice(0, 8).reduce((a, b) => a + b, 0) - v[3]! - (v[4] ?? 0)) / ticksPerSecond();
}

type Cpu = Record<string, number>;

class Meter {
  constructor(
    private readonly s3: S3Server,
    private readonly pg: PgServer,
  ) {}

  sample(svc?: ServerProcess): Cpu {
    const u = process.cpuUsage();
    const out: Cpu = { client: (u.user + u.system) / 1e6, postgres: postgresCpu(this.pg.pid), host: hostBusy() };
    if (svc) out.svc = svc.cpuSeconds() ?? 0;
    for (const [name, pid] of Object.entries(this.s3.pids)) out[name] = procCpu(pid);
    return out;
  }

  static diff(a: Cpu, b: Cpu): Cpu {
    const out: Cpu = {};
    for (const k of Object.keys(b)) if (k in a) out[k] = b[k]! - a[k]!;
    return out;
  }
}

// ---------------------------------------------------------------- the plain S3 side

export function client(s3: S3Server): S3Client {
  // svc's own client factory: keep-alive sockets and no SDK checksums, so both sides pay the same
  // transport. It takes credentials from the SDK's chain, as svc does: the environment.
  process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey;
  return s3Client({ kind: 's3', endpoint: s3.endpoint, region: REGION, bucket: BUCKET, prefix: '', forcePathStyle: true });
}

export async function deletePrefix(c: S3Client, prefix: string, bucket = BUCKET): Promise<number> {
  let deleted = 0;
  for (;;) {
    const page = await c.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, MaxKeys: 1000 }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length === 0) return deleted;
    await c.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
    deleted += keys.length;
  }
}

// ---------------------------------------------------------------- svc

interface Ctx {
  s3: S3Server;
  pg: PgServer;
  c: S3Client;
  meter: Meter;
  file: string;
  warm: string;
  dbs: number;
  /** The body's size: 1 GiB, 256 MiB with --quick. */
  bytes: number;
  /** The 4 KiB uploads' measured window: 3 s, 1.5 s with --quick. */
  windowMs: number;
  /** --profile: the directory svc's CPU profiles go to. */
  profileDir?: string;
}

async function startSvc(ctx: Ctx, backend: 'pg-s3' | 'fs', entry = ENTRY): Promise<{ server: ServerProcess; root: string; prefix: string }> {
  const root = mkdtempSync(path.join(SCRATCH, `svc-bench-pgs3-${backend}-`));
  const n = ctx.dbs++;
  const prefix = `svc${n}/`;
  const env: NodeJS.ProcessEnv =
    backend === 'fs'
      ? { SVC_BLOB_BACKEND: 'fs' }
      : {
          SVC_BLOB_BACKEND: 'pg-s3',
          // A fresh database and key prefix each time: no manifest or block of an earlier round is found.
          SVC_PG_URL: await ctx.pg.createDatabase(`bench_${n}`),
          SVC_S3_ENDPOINT: ctx.s3.endpoint,
          SVC_S3_BUCKET: BUCKET,
          SVC_S3_PREFIX: prefix,
          SVC_S3_REGION: REGION,
          SVC_S3_FORCE_PATH_STYLE: 'true',
          AWS_ACCESS_KEY_ID: ctx.s3.accessKeyId,
          AWS_SECRET_ACCESS_KEY: ctx.s3.secretAccessKey,
          AWS_REGION: REGION,
        };
  // --profile: every svc process writes a V8 CPU profile per thread (main, scanner, workers) there.
  if (ctx.profileDir) env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${ctx.profileDir}`.trim();
  const server = await ServerProcess.start({ entry, fsRoot: root, durability: 'relaxed', env, startTimeoutMs: 60_000 });
  return { server, root, prefix };
}

async function stopSvc(ctx: Ctx, s: { server: ServerProcess; root: string; prefix: string }, backend: 'pg-s3' | 'fs'): Promise<void> {
  await s.server.stop();
  // The AWS SDK's notice about Node 20 is stderr text, not a problem of the run.
  const problems = s.server.problems.filter((p) => !/NodeVersionSupportWarning|versions published after|node >=22|security updates|a\.co\/|trace-warnings|^\s*$/.test(p));
  if (problems.length > 0) log(`svc (${backend}) logged: ${problems.slice(0, 3).join(' | ')}`);
  rmSync(s.root, { recursive: true, force: true });
  if (backend === 'pg-s3') {
    await deletePrefix(ctx.c, s.prefix);
    await ctx.s3.reclaim();
  }
}

interface Transfer {
  ingestMBps: number;
  downloadMBps: number;
  ingestCpu: Cpu;
  downloadCpu: Cpu;
}

async function svcTransfer(ctx: Ctx): Promise<Transfer> {
  const s = await startSvc(ctx, 'pg-s3');
  try {
    // Pays the first upload's costs (worker modules, JIT, S3 and PostgreSQL connections) with other bytes.
    const warm = await uploadFile(s.server, ctx.warm, statSync(ctx.warm).size, 'application/octet-stream', 300_000);
    await downloadBlob(s.server, warm.response.blob.id, 300_000);
    let c0 = ctx.meter.sample(s.server);
    const up = await uploadFile(s.server, ctx.file, ctx.bytes, 'application/octet-stream', 600_000);
    const ingestCpu = Meter.diff(c0, ctx.meter.sample(s.server));
    if (up.response.blob.size !== ctx.bytes || up.response.freshBlocks === 0) throw new Error(`svc ingest: ${JSON.stringify(up.response)}`);
    c0 = ctx.meter.sample(s.server);
    const down = await downloadBlob(s.server, up.response.blob.id, 600_000);
    const downloadCpu = Meter.diff(c0, ctx.meter.sample(s.server));
    if (down.bytes !== ctx.bytes) throw new Error(`svc download: ${down.bytes} bytes`);
    return { ingestMBps: up.mbPerSecond, downloadMBps: down.mbPerSecond, ingestCpu, downloadCpu };
  } finally {
    await stopSvc(ctx, s, 'pg-s3');
  }
}

let refCount = 0;
async function plainTransfer(ctx: Ctx): Promise<Transfer> {
  const key = `plain/body-${refCount++}`;
  try {
    let c0 = ctx.meter.sample();
    const upSeconds = await libStorageUpload(ctx.c, BUCKET, ctx.file, key, { partSize: PART_SIZE, queueSize: QUEUE_SIZE });
    const ingestCpu = Meter.diff(c0, ctx.meter.sample());
    c0 = ctx.meter.sample();
    const downSeconds = await rangedDownload(ctx.c, BUCKET, key, ctx.bytes, RANGE_SIZE, RANGES_IN_FLIGHT);
    const downloadCpu = Meter.diff(c0, ctx.meter.sample());
    return { ingestMBps: ctx.bytes / 1e6 / upSeconds, downloadMBps: ctx.bytes / 1e6 / downSeconds, ingestCpu, downloadCpu };
  } finally {
    await deletePrefix(ctx.c, 'plain/');
    await ctx.s3.reclaim();
  }
}

/** 4 KiB POSTs with distinct bodies: a random 4 KiB pool with a counter in the first 8 bytes. */
async function smallUploads(ctx: Ctx, backend: 'pg-s3' | 'fs'): Promise<{ rps: number; cpu: Cpu }> {
  const s = await startSvc(ctx, backend);
  try {
    const head = Buffer.from(`POST /api/v1/blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${SMALL}\r\n\r\n`, 'latin1');
    const salt = randomBytes(SMALL);
    let seq = 0;
    const next = () => {
      const req = Buffer.allocUnsafe(head.length + SMALL);
      head.copy(req, 0);
      salt.copy(req, head.length);
      req.writeBigUInt64BE(BigInt(seq++), head.length);
      return req;
    };
    // A short unmeasured load first (connections, JIT), then the measured window.
    await runLoad({ port: s.server.port, connections: CONNECTIONS, pipeline: 1, warmupMs: 200, durationMs: 500, next, expectStatus: 201 });
    const c0 = ctx.meter.sample(s.server);
    const seq0 = seq;
    const load = await runLoad({ port: s.server.port, connections: CONNECTIONS, pipeline: 1, warmupMs: 300, durationMs: ctx.windowMs, next, expectStatus: 201, server: s.server });
    const cpu = Meter.diff(c0, ctx.meter.sample(s.server));
    if (load.errors) throw new Error(`4 KiB uploads (${backend}): ${load.errors} errors, first: ${load.firstError}`);
    // CPU per request over the whole load call (warm-up and drain included): a share, not a window.
    for (const k of Object.keys(cpu)) cpu[k] = (cpu[k]! / Math.max(1, seq - seq0)) * 1e6;
    return { rps: load.requestsPerSecond, cpu };
  } finally {
    await stopSvc(ctx, s, backend);
  }
}

// ---------------------------------------------------------------- --ingest: svc's CPU per GiB, pg-s3 against fs

/** One ingest's figures: rate, svc's CPU seconds and the S3 requests radosgw served meanwhile. */
interface IngestSample {
  mbps: number;
  cpu: Cpu;
  /** S3 requests during the measured ingest (undefined on s3rver). */
  requests?: number;
  blocks?: number;
  /** Body bytes that waited in a spill file (svc_spilled_bytes_total) during the measured ingest. */
  spilled?: number;
  /** svc's CPU seconds during the measured ingest by group of threads (bench/cpu.ts ThreadWindow). */
  threads?: Record<ThreadGroup, number>;
}

/** svc's svc_spilled_bytes_total (uWS's overshoot after a pause, beyond the backlog's memory). */
async function spilledBytes(server: ServerProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
  return Number(/^svc_spilled_bytes_total (\S+)/m.exec(text)?.[1] ?? NaN);
}

type IngestSide = 'pg-s3' | 'fs' | 'pg-s3-before' | 'fs-before' | 'lib-storage';

/** One measured ingest of ctx.file on `side` (svc on a fresh server after a warm-up upload, or lib-storage). */
async function ingestOnce(ctx: Ctx, side: IngestSide, before?: string): Promise<IngestSample> {
  if (side === 'lib-storage') {
    const r0 = await ctx.s3.requests();
    const c0 = ctx.meter.sample();
    try {
      const seconds = await libStorageUpload(ctx.c, BUCKET, ctx.file, `plain/body-${refCount++}`, { partSize: PART_SIZE, queueSize: QUEUE_SIZE });
      const cpu = Meter.diff(c0, ctx.meter.sample());
      const r1 = await ctx.s3.requests();
      return { mbps: ctx.bytes / 1e6 / seconds, cpu, requests: r0 === undefined || r1 === undefined ? undefined : r1 - r0 };
    } finally {
      await deletePrefix(ctx.c, 'plain/');
      await ctx.s3.reclaim();
    }
  }
  const backend = side.startsWith('pg-s3') ? 'pg-s3' : 'fs';
  const s = await startSvc(ctx, backend, side.endsWith('-before') ? before : ENTRY);
  try {
    await uploadFile(s.server, ctx.warm, statSync(ctx.warm).size, 'application/octet-stream', 300_000);
    const spilled0 = await spilledBytes(s.server);
    const r0 = await ctx.s3.requests();
    const c0 = ctx.meter.sample(s.server);
    const threadWindow = new ThreadWindow(s.server.pid);
    const up = await uploadFile(s.server, ctx.file, ctx.bytes, 'application/octet-stream', 600_000);
    const threads = threadWindow.end().seconds;
    const cpu = Meter.diff(c0, ctx.meter.sample(s.server));
    const r1 = await ctx.s3.requests();
    const spilled = (await spilledBytes(s.server)) - spilled0;
    if (up.response.blob.size !== ctx.bytes || up.response.freshBlocks === 0) throw new Error(`svc ingest (${side}): ${JSON.stringify(up.response)}`);
    return { mbps: up.mbPerSecond, cpu, requests: r0 === undefined || r1 === undefined ? undefined : r1 - r0, blocks: up.response.blob.blockCount, spilled, threads };
  } finally {
    await stopSvc(ctx, s, backend);
  }
}

/**
 * --ingest: per round, the same body into svc pg-s3, svc fs (and --before's fs build) and a
 * lib-storage Upload, the order rotating every round; svc's CPU per GiB (the svc process, all its
 * threads, from /proc) and the S3 requests radosgw counted (perf counter `rgw.req`) per GiB.
 */
async function ingestRounds(ctx: Ctx, rounds: number, before?: string): Promise<string[]> {
  const sides: IngestSide[] = ['pg-s3', 'fs', 'lib-storage', ...(before ? (['pg-s3-before', 'fs-before'] as const) : [])];
  const r = Object.fromEntries(sides.map((k) => [k, [] as IngestSample[]])) as Record<IngestSide, IngestSample[]>;
  for (let round = 0; round <= rounds; round++) {
    const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
    if (round % 2 === 1) order.reverse();
    for (const side of order) {
      const t = await ingestOnce(ctx, side, before);
      if (round > 0) r[side].push(t);
      log(`round ${round}${round > 0 ? '' : ' (uncounted)'} ${side}: ${fmt(t.mbps)} MB/s, svc/client ${fmt(t.cpu.svc ?? t.cpu.client!, 2)} CPU-s, ${t.requests ?? '?'} S3 requests${t.blocks ? `, ${t.blocks} blocks, ${fmt((t.spilled ?? 0) / MiB)} MiB spilled` : ''}`);
    }
  }
  const gib = ctx.bytes / (1024 * MiB);
  const cpuPerGiB = (side: IngestSide) => median(r[side].map((t) => (t.cpu.svc ?? t.cpu.client!) / gib));
  const rate = (side: IngestSide) => median(r[side].map((t) => t.mbps));
  const reqs = (side: IngestSide) => (r[side].every((t) => t.requests !== undefined) ? fmt(median(r[side].map((t) => t.requests!)) / gib) : 'not counted (s3rver)');
  const verdictAtMost = (x: number, target: number) => `${fmt(x, 3)}x | <= ${target}x | ${x <= target ? 'PASS' : `FAIL (${fmt((x / target - 1) * 100, 0)}% over)`}`;
  const verdictAtLeast = (x: number, target: number) => `${fmt(x, 3)}x | >= ${target}x | ${x >= target ? 'PASS' : `FAIL (${fmt((1 - x / target) * 100, 0)}% short)`}`;
  const spill = (side: IngestSide) => (side === 'lib-storage' ? '—' : list(r[side].map((t) => (t.spilled ?? 0) / MiB / gib)));
  const row = (side: IngestSide) => `| ${side} | ${fmt(rate(side))} ${list(r[side].map((t) => t.mbps))} | ${fmt(cpuPerGiB(side), 2)} ${list(r[side].map((t) => (t.cpu.svc ?? t.cpu.client!) / gib), 2)} | ${reqs(side)} | ${spill(side)} | ${cpuCell(r[side].map((t) => t.cpu))} |`;
  return [
    '| Side | MB/s, median [rounds] | CPU-s per GiB (svc; lib-storage: the client) | S3 requests per GiB | MiB spilled per GiB [rounds] | CPU seconds by process (medians) |',
    '|---|---|---|---|---|---|',
    ...sides.map(row),
    '',
    '| Ratio | Value | Target | Verdict |',
    '|---|---|---|---|',
    `| svc CPU per GiB, pg-s3 / fs | ${verdictAtMost(cpuPerGiB('pg-s3') / cpuPerGiB('fs'), 1.25)} |`,
    `| ingest rate, svc pg-s3 / lib-storage | ${verdictAtLeast(rate('pg-s3') / rate('lib-storage'), 0.7)} |`,
    ...(before ? [`| svc CPU per GiB, pg-s3 / pg-s3 (--before build) | ${fmt(cpuPerGiB('pg-s3') / cpuPerGiB('pg-s3-before'), 3)}x | | |`, `| svc CPU per GiB, fs / fs (--before build) | ${fmt(cpuPerGiB('fs') / cpuPerGiB('fs-before'), 3)}x | <= 1x | ${cpuPerGiB('fs') <= cpuPerGiB('fs-before') * 1.03 ? 'PASS (within 3%)' : 'FAIL'} |`, `| ingest rate, fs / fs (--before build) | ${fmt(rate('fs') / rate('fs-before'), 3)}x | >= 1x | |`] : []),
    '',
    'svc CPU-s per GiB by thread (/proc/<pid>/task over the measured ingest; median of the rounds, each group on its own):',
    '',
    `| Side | ${THREAD_GROUPS.join(' | ')} |`,
    `|---|${THREAD_GROUPS.map(() => '---').join('|')}|`,
    ...sides.filter((side) => r[side].some((t) => t.threads)).map((side) => `| ${side} | ${THREAD_GROUPS.map((g) => fmt(median(r[side].flatMap((t) => (t.threads ? [t.threads[g] / gib] : []))), 2)).join(' | ')} |`),
    '',
  ];
}

// ---------------------------------------------------------------- report

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number, d = 0) => x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
const list = (xs: number[], d = 0) => `[${xs.map((x) => fmt(x, d)).join(', ')}]`;

function cpuCell(samples: Cpu[], d = 2): string {
  const keys = ['svc', 'client', 'radosgw', 'ceph-osd', 'postgres', 'host'].filter((k) => samples[0] && k in samples[0]);
  return keys.map((k) => `${k} ${fmt(median(samples.map((s) => s[k]!)), d)}`).join(', ');
}

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/pg-s3.js [--quick]',
    options: {
      quick: { type: 'boolean', help: '256 MiB, 2 counted rounds, shorter 4 KiB windows (default: 1 GiB, 5 rounds)' },
      ingest: { type: 'boolean', help: 'only (a): svc pg-s3, svc fs and lib-storage ingests, svc CPU per GiB and S3 requests per GiB' },
      before: { type: 'string', value: 'ENTRY', help: 'with --ingest: also the pg-s3 and fs ingests of this build (its dist/server/main.js), for a same-run A/B' },
      profile: { type: 'string', value: 'DIR', help: 'svc processes write V8 CPU profiles (every thread) into DIR' },
      rounds: { type: 'string', value: 'N', help: 'counted rounds (default 5, 2 with --quick)' },
    },
  });
  const quick = args.values.quick;
  const bytes = (quick ? 256 : 1024) * MiB;
  const rounds = args.number('rounds') ?? (quick ? 2 : 5);
  if (args.values.before && !args.values.ingest) args.fail('--before needs --ingest');
  const t0 = performance.now();
  const dataDir = mkdtempSync(path.join(SCRATCH, 'svc-bench-pgs3-body-'));
  let pg: PgServer | undefined;
  let s3: S3Server | undefined;
  const cleanup = async () => {
    await s3?.stop().catch((err: Error) => log(`S3 stop: ${err.message}`));
    await pg?.stop().catch((err: Error) => log(`PostgreSQL stop: ${err.message}`));
    rmSync(dataDir, { recursive: true, force: true });
  };
  const onSignal = () => void cleanup().finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const file = path.join(dataDir, 'body.bin');
    const warm = path.join(dataDir, 'warm.bin');
    writeRandomFile(file, bytes, 'pg-s3');
    writeRandomFile(warm, 64 * MiB, 'pg-s3-warm-up');
    [pg, s3] = await Promise.all([requirePostgres(), startS3()]);
    log(`PostgreSQL pid ${pg.pid} on ${pg.port}; ${s3.kind} at ${s3.endpoint}`);
    const c = client(s3);
    await c.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const ctx: Ctx = { s3, pg, c, meter: new Meter(s3, pg), file, warm, dbs: 0, bytes, windowMs: quick ? 1500 : 3000, profileDir: args.values.profile && path.resolve(args.values.profile) };
    if (args.values.ingest) {
      const table = await ingestRounds(ctx, rounds, args.values.before && path.resolve(args.values.before));
      const head = `## pg-s3 ingest against fs and lib-storage (${new Date().toISOString()}, ${s3.kind}${s3.kind === 's3rver' ? ' -- FALLBACK, NOT radosgw' : ''}, ${rounds} rounds after one uncounted, ${bytes / MiB} MiB, data in ${SCRATCH}, ${fmt((performance.now() - t0) / 60000, 1)} min)`;
      process.stdout.write([head, '', ...table].join('\n'));
      return;
    }

    const r = {
      svc: [] as Transfer[],
      plain: [] as Transfer[],
      small: { 'pg-s3': [] as number[], fs: [] as number[] },
      smallCpu: { 'pg-s3': [] as Cpu[], fs: [] as Cpu[] },
    };
    for (let round = 0; round <= rounds; round++) {
      const counted = round > 0;
      const svcFirst = round % 2 === 0;
      for (const side of svcFirst ? (['svc', 'plain'] as const) : (['plain', 'svc'] as const)) {
        const t = side === 'svc' ? await svcTransfer(ctx) : await plainTransfer(ctx);
        if (counted) r[side].push(t);
        log(`round ${round}${counted ? '' : ' (uncounted)'} ${side}: ingest ${fmt(t.ingestMBps)} MB/s, download ${fmt(t.downloadMBps)} MB/s`);
      }
      for (const backend of svcFirst ? (['pg-s3', 'fs'] as const) : (['fs', 'pg-s3'] as const)) {
        const sm = await smallUploads(ctx, backend);
        if (counted) {
          r.small[backend].push(sm.rps);
          r.smallCpu[backend].push(sm.cpu);
        }
        log(`round ${round}${counted ? '' : ' (uncounted)'} 4 KiB ${backend}: ${fmt(sm.rps)} req/s`);
      }
    }

    const ratio = (a: number[], b: number[]) => median(a) / median(b);
    const ingest = ratio(r.svc.map((t) => t.ingestMBps), r.plain.map((t) => t.ingestMBps));
    const download = ratio(r.svc.map((t) => t.downloadMBps), r.plain.map((t) => t.downloadMBps));
    const small = ratio(r.small['pg-s3'], r.small.fs);
    const verdict = (x: number, target: number) => `${fmt(x, 3)}x | >= ${target}x | ${x >= target ? 'PASS' : `FAIL (${fmt((1 - x / target) * 100, 0)}% short)`}`;
    const mb = bytes / MiB;
    const out = [
      `## pg-s3 against plain S3 and fs (${new Date().toISOString()}, ${s3.kind}${s3.kind === 's3rver' ? ' -- FALLBACK, NOT radosgw' : ''}, ${rounds} rounds after one uncounted, ${mb} MiB, data in ${SCRATCH}, ${fmt((performance.now() - t0) / 60000, 1)} min)`,
      '',
      '| Measurement | svc pg-s3, median [rounds] | Peer, median [rounds] | Ratio | Target | Verdict |',
      '|---|---|---|---|---|---|',
      `| (a) ingest of ${mb} MiB, one connection / lib-storage Upload (${PART_SIZE / MiB} MiB parts, queueSize ${QUEUE_SIZE}) | ${fmt(median(r.svc.map((t) => t.ingestMBps)))} MB/s ${list(r.svc.map((t) => t.ingestMBps))} | ${fmt(median(r.plain.map((t) => t.ingestMBps)))} MB/s ${list(r.plain.map((t) => t.ingestMBps))} | ${verdict(ingest, 0.7)} |`,
      `| (b) download, one connection / ranged GETs (${RANGE_SIZE / MiB} MiB, ${RANGES_IN_FLIGHT} in flight) | ${fmt(median(r.svc.map((t) => t.downloadMBps)))} MB/s ${list(r.svc.map((t) => t.downloadMBps))} | ${fmt(median(r.plain.map((t) => t.downloadMBps)))} MB/s ${list(r.plain.map((t) => t.downloadMBps))} | ${verdict(download, 0.7)} |`,
      `| (c) 4 KiB uploads, ${CONNECTIONS} connections, relaxed / svc fs | ${fmt(median(r.small['pg-s3']))} req/s ${list(r.small['pg-s3'])} | ${fmt(median(r.small.fs))} req/s ${list(r.small.fs)} | ${verdict(small, 0.5)} |`,
      '',
      'CPU seconds per measured phase (medians; `host` = all CPUs busy, everything included; `client` = this process: the load generator, lib-storage, the ranged GETs):',
      '',
      '| Phase | svc pg-s3 side | Peer side |',
      '|---|---|---|',
      `| (a) ingest | ${cpuCell(r.svc.map((t) => t.ingestCpu))} | ${cpuCell(r.plain.map((t) => t.ingestCpu))} |`,
      `| (b) download | ${cpuCell(r.svc.map((t) => t.downloadCpu))} | ${cpuCell(r.plain.map((t) => t.downloadCpu))} |`,
      `| (c) 4 KiB uploads, CPU µs per request | ${cpuCell(r.smallCpu['pg-s3'], 0)} | ${cpuCell(r.smallCpu.fs, 0)} |`,
      '',
    ];
    process.stdout.write(out.join('\n'));
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

// Run as a program; imported (bench/documents-cluster.ts) for its helpers only.
if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))) await main();
