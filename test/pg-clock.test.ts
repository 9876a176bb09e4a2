// Issue 37: on pg-s3, leases, retries and expiry are judged by PostgreSQL's clock (decisions §5).
// Nodes are separate processes on one database; the skewed ones run under libfaketime (Debian's
// libfaketime, LD_PRELOAD + FAKETIME: the real clock of that process is moved, nothing in svc is
// told). A node whose clock runs 10 minutes ahead takes over no live job and skips no retry
// backoff; one 10 minutes behind still takes over a killed node's job once its lease ends; a
// server whose clock is off says so in readiness (degraded, naming the offset). Skipped, saying
// why, without a shared catalog (the pg-s3 project runs it) or without libfaketime.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JobRecord } from '../dist/engine/jobs/queue.js';
import { JOBS } from '../dist/engine/jobs/records.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import type { UnitStore } from '../dist/engine/store/unit-store.js';
import { TEST_BACKEND, backendEnv } from './helpers/backends.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const CHILD = fileURLToPath(new URL('./helpers/engine-child.mjs', import.meta.url));
const LEASE_MS = 3000;
const BACKOFF_MS = 6000;
const TEN_MINUTES = 10 * 60_000;

/** Debian's libfaketime (the multi-threaded build: Node runs threads), when installed and working with this Node. */
function findFaketime(): { lib: string } | { skip: string } {
  const lib = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib']
    .map((dir) => path.join(dir, 'faketime', 'libfaketimeMT.so.1'))
    .find((p) => fs.existsSync(p));
  if (!lib) return { skip: 'libfaketime is not installed (apt-get install libfaketime)' };
  const probe = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(Date.now()))'], { env: { ...process.env, LD_PRELOAD: lib, FAKETIME: '+10m' }, encoding: 'utf8' });
  const ahead = Number(probe.stdout) - Date.now();
  if (probe.status !== 0 || !(ahead > TEN_MINUTES - 60_000)) return { skip: `libfaketime (${lib}) does not move this Node's clock: ${probe.stderr || probe.stdout}` };
  return { lib };
}

const faketime = TEST_BACKEND === 'pg-s3' ? findFaketime() : { skip: 'it needs PostgreSQL (the pg-s3 project runs it)' };
const skipReason = 'skip' in faketime ? faketime.skip : undefined;
if (skipReason) console.warn(`pg-clock test skipped: ${skipReason}`);
/** The environment that moves a process's clock by `offset` (FAKETIME's syntax: '+10m', '-10m'). */
const skewed = (offset: string): Record<string, string> => ('lib' in faketime ? { LD_PRELOAD: faketime.lib, FAKETIME: offset } : {});

interface Node {
  proc: ChildProcess;
  /** The JSON lines it printed, in order. */
  lines: any[];
  stderr: () => string;
  line(test: (l: any) => boolean): Promise<any>;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

const children: Node[] = [];
const roots: string[] = [];

/** A node (test/helpers/engine-child.mjs) on the database of `env`, with a data directory of its own. */
function startNode(env: Record<string, string>, name: string, extra: Record<string, string> = {}, enqueue?: { kind: string; input: unknown }): Node {
  const root = tempRoot(`svc-clock-${name}-`);
  roots.push(root);
  const proc = spawn(process.execPath, [CHILD, ...(enqueue ? [JSON.stringify(enqueue)] : [])], {
    env: { ...process.env, ...env, SVC_FS_ROOT: root, SVC_NODE_ID: name, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2', SVC_PG_POOL: '3', SVC_JOB_LEASE: `${LEASE_MS}ms`, SVC_JOB_BACKOFF: `${BACKOFF_MS}ms`, ...extra },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const lines: any[] = [];
  const waiting = new Set<() => void>();
  proc.stdout!.on('data', (d) => {
    out += d;
    for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
      lines.push(JSON.parse(out.slice(0, i)));
      out = out.slice(i + 1);
    }
    for (const w of [...waiting]) w();
  });
  proc.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const node: Node = {
    proc,
    lines,
    stderr: () => err,
    line: (test) => new Promise((resolve, reject) => {
      const look = () => {
        const found = lines.find(test);
        if (found === undefined) return false;
        waiting.delete(look);
        resolve(found);
        return true;
      };
      if (look()) return;
      waiting.add(look);
      void exited.then(() => reject(new Error(`node ${name} exited (${proc.exitCode ?? proc.signalCode}): ${err}`)));
    }),
    kill9: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.stdin!.end();
      const timer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  children.push(node);
  return node;
}

/** Polls the job's record (read from PostgreSQL) until `test` holds; the record and when (performance.now()). */
async function watchJob(store: UnitStore, jobId: string, test: (r: JobRecord) => boolean, timeoutMs: number): Promise<{ record: JobRecord; at: number }> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const record = (await store.get(JOBS, jobId)) as JobRecord;
    if (record && test(record)) return { record, at: performance.now() };
    if (performance.now() > deadline) throw new Error(`job ${jobId} never reached the state awaited: ${JSON.stringify(record)}`);
    await delay(50);
  }
}

describe.skipIf(skipReason !== undefined)('pg-s3 nodes judge leases, retries and expiry by PostgreSQL\'s clock', () => {
  let env: Record<string, string>;
  let catalog: PgBlobCatalog;
  let store: UnitStore;

  beforeAll(async () => {
    const root = tempRoot('svc-clock-db-');
    roots.push(root);
    env = await backendEnv(root);
    catalog = await PgBlobCatalog.open(env.SVC_PG_URL!, { poolSize: 2 });
    store = catalog.unitStore();
  });

  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => c.stop()));
  });

  afterAll(async () => {
    await store?.close();
    await catalog?.close();
    for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
  });

  it('a node 10 minutes ahead takes over no live job; after kill -9 of its holder the job is taken over once its lease ends, by a node 10 minutes ahead or behind', async () => {
    const marker = path.join(tempRoot('svc-clock-marker-'), 'started');
    roots.push(path.dirname(marker));
    const a = startNode(env, 'clock-a', {}, { kind: 'sleep', input: { firstMs: 120_000, ms: 50, marker } });
    const { jobId } = await a.line((l) => 'jobId' in l);
    await a.line((l) => 'ready' in l);
    const running = await watchJob(store, jobId, (r) => r.state === 'running', 10_000);
    expect(running.record.lease!.owner.startsWith('clock-a/')).toBe(true);

    const ahead = startNode(env, 'clock-ahead', skewed('+10m'));
    const behind = startNode(env, 'clock-behind', skewed('-10m'));
    const [aheadReady, behindReady] = await Promise.all([ahead.line((l) => 'ready' in l), behind.line((l) => 'ready' in l)]);

    // Two leases and more: A renews its lease, nobody takes the job.
    await delay(2 * LEASE_MS + 1500);
    const still = (await store.get(JOBS, jobId)) as JobRecord;
    expect(still).toMatchObject({ state: 'running', attempts: 1 });
    expect(still.lease!.owner.startsWith('clock-a/')).toBe(true);
    expect(fs.existsSync(`${marker}.2`)).toBe(false);
    // Their clocks really are off, and each knows by how much.
    expect(aheadReady.clock).toMatchObject({ name: 'clock', status: 'warn' });
    expect(Math.abs(aheadReady.clock.offsetMs - TEN_MINUTES)).toBeLessThan(5000);
    expect(Math.abs(behindReady.clock.offsetMs + TEN_MINUTES)).toBeLessThan(5000);

    // A dies: its lease ends within LEASE_MS, then a skewed node takes the job (one poll later at most).
    const lastUntil = ((await store.get(JOBS, jobId)) as JobRecord).lease!.until;
    const killedAt = performance.now();
    await a.kill9();
    const done = await watchJob(store, jobId, (r) => r.state === 'completed', LEASE_MS + 10_000);
    expect(done.record.attempts).toBe(2);
    expect(fs.existsSync(`${marker}.2`)).toBe(true);
    // Not before the lease ended (on PostgreSQL's clock), and soon after it (a lease and a poll; slack for a busy host), not 10 minutes later.
    expect(done.record.startedAt!).toBeGreaterThanOrEqual(lastUntil);
    expect(done.at - killedAt).toBeLessThan(LEASE_MS + 5000);
  });

  it('a retry is not run before its backoff ends by a node whose clock runs 10 minutes ahead', async () => {
    // The skewed node is up first, then stopped (SIGSTOP) while A runs the first attempt, so
    // that attempt is A's and its retry is due BACKOFF_MS later on PostgreSQL's clock; it goes
    // on (SIGCONT) as soon as the attempt has failed.
    const ahead = startNode(env, 'backoff-ahead', skewed('+10m'));
    await ahead.line((l) => 'ready' in l);
    ahead.proc.kill('SIGSTOP');
    let stopped = true;
    try {
      const a = startNode(env, 'backoff-a', {}, { kind: 'flaky', input: { failures: 1, code: 'busy' } });
      const { jobId } = await a.line((l) => 'jobId' in l);
      const failed = await watchJob(store, jobId, (r) => r.attempts === 1 && r.state === 'pending', 10_000);
      ahead.proc.kill('SIGCONT');
      stopped = false;
      expect(failed.record.error).toMatchObject({ code: 'busy' });
      expect(failed.record.nextRunAt - failed.record.startedAt!).toBeGreaterThanOrEqual(BACKOFF_MS);
      const done = await watchJob(store, jobId, (r) => r.state === 'completed', BACKOFF_MS + 10_000);
      expect(done.record.attempts).toBe(2);
      // The second attempt started once the backoff had passed (failed.at is up to one poll late).
      expect(done.record.startedAt!).toBeGreaterThanOrEqual(failed.record.nextRunAt);
      expect(done.at - failed.at).toBeGreaterThan(BACKOFF_MS - 1000);
    } finally {
      if (stopped) ahead.proc.kill('SIGCONT');
    }
  });

  describe('readiness', () => {
    let server: TestServer | undefined;
    afterEach(async () => {
      await server?.stop();
      server = undefined;
    });

    it('a server whose clock is 10 minutes ahead of PostgreSQL\'s is degraded, naming the offset', async () => {
      server = await startServer(skewed('+10m'));
      const ready = await fetch(`${server.url}/api/health/ready`);
      expect(ready.status).toBe(200);
      const body = (await ready.json()) as any;
      expect(body.status).toBe('degraded');
      const clock = body.checks.find((c: any) => c.name === 'clock');
      expect(clock).toEqual({ name: 'clock', status: 'warn', latencyMs: 0, offsetMs: expect.any(Number), detail: expect.stringMatching(/^this node's clock is 600\.\d s ahead of PostgreSQL's \(more than 5 s\): leases, retries and expiry follow PostgreSQL's clock/) });
      expect(Math.abs(clock.offsetMs - TEN_MINUTES)).toBeLessThan(5000);
      for (const c of body.checks) if (c.name !== 'clock') expect(c.status).toBe('ok');
      const snapshot = (await (await fetch(`${server.url}/api/ops/v1/snapshot`)).json()) as any;
      expect(snapshot.status).toBe('Degraded');
      expect(snapshot.checks.find((c: any) => c.id === 'clock')).toEqual({ id: 'clock', status: 'warn', detail: expect.stringMatching(/^this node's clock is 600\.\d s ahead of PostgreSQL's/) });
    });

    it('a server on the same clock as PostgreSQL is ready, its clock check ok', async () => {
      server = await startServer();
      const body = (await (await fetch(`${server.url}/api/health/ready`)).json()) as any;
      expect(body.status).toBe('ready');
      expect(body.checks.find((c: any) => c.name === 'clock')).toEqual({ name: 'clock', status: 'ok', latencyMs: 0, offsetMs: expect.any(Number), detail: expect.stringMatching(/^this node's clock is within \d+\.\d s of PostgreSQL's \(±\d+\.\d ms\)$/) });
    });
  });
});
