/**
 * Which PostgreSQL driver for the pg-s3 catalog, measured on the catalog itself (issue 19): two
 * compiled copies of engine/store/pg's PgBlobCatalog — this tree's and a baseline's (another
 * commit built elsewhere, loaded by path) — on one throwaway cluster (bench/postgres-server.ts),
 * each on a database of its own with a pool of 10 (SVC_PG_POOL's default), alternating within
 * each round and in the opposite order the next round, so that host drift hits both alike:
 *   get          a held 4-block blob, its record cached (the holding lookup alone)
 *   page(50)     a tenant's inventory below a random cursor
 *   publish      a new 4 KiB inline blob by one tenant, and by one of 8 tenants
 *   publish      a new 4-block blob by one of 8 tenants
 *   remove       a 4 KiB inline blob published by the cells above (its last holder: the manifest goes)
 * each at concurrency 1 and 16. Reported: median ops/s [min-max] over the counted rounds, the
 * client's CPU µs per operation (process.cpuUsage: the driver's and the catalog's own cost; the
 * server runs the same SQL for both) and the median of each round's paired ratio.
 *
 *   npm run build && node dist/bench/pg-catalog.js --baseline=<dir>/dist/engine/store/pg/blob-catalog.js [--baseline-label=postgres] [--label=pg] [--quick]
 *
 * A baseline is another commit's tree, built: `git archive <commit> | tar -x -C <dir>`, its
 * node_modules installed (`npm ci`), `npx tsc -p tsconfig.json`.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { StoredBlock } from '../engine/store/block-store.js';
import { PgBlobCatalog } from '../engine/store/pg/blob-catalog.js';
import { benchArgs } from './args.js';
import { requirePostgres } from './postgres-server.js';

const args = benchArgs({
  usage: 'usage: node dist/bench/pg-catalog.js --baseline=<dir>/dist/engine/store/pg/blob-catalog.js [--baseline-label=postgres] [--label=pg] [--quick]',
  options: {
    baseline: { type: 'string', value: 'PATH', help: "required: another build's dist/engine/store/pg/blob-catalog.js" },
    'baseline-label': { type: 'string', value: 'LABEL', default: 'baseline', help: "the baseline's name in the report" },
    label: { type: 'string', value: 'LABEL', default: 'this tree', help: "this tree's name in the report" },
    quick: { type: 'boolean', help: '3 counted rounds of 300 ms windows (default: 12 of 500 ms)' },
  },
});
const quick = args.values.quick;
const baselinePath = args.values.baseline ?? args.fail("--baseline=<path of another build's dist/engine/store/pg/blob-catalog.js> is required");
const ROUNDS = quick ? 3 : 12;
const WINDOW_MS = quick ? 300 : 500;
const POOL = 10;
/** Held blobs read by get and page: one tenant's inventory. */
const HELD = 2_000;
const READER = 'reader';
const TENANTS = Array.from({ length: 8 }, (_, i) => `writer-${i}`);

interface Impl {
  label: string;
  catalog: PgBlobCatalog;
  held: { id: string; seq: number }[];
  /** Inline blobs published by the publish cells, for remove to take. */
  removable: { id: string; tenant: string }[];
  /** The most removals one window has done. */
  removedMost: number;
}

type Cell = { label: string; concurrency: number; op: (impl: Impl) => Promise<unknown> };

const randomInt = (below: number) => Math.floor(Math.random() * below);
const pick = <T>(xs: readonly T[]) => xs[randomInt(xs.length)]!;

function storedBlock(size: number): StoredBlock {
  return { hex: randomBytes(32).toString('hex'), size, checksum: 1n, fresh: true };
}

/** A new 4 KiB inline blob (one block: its own bytes, as direct ingest reports it). */
async function publishInline(impl: Impl, tenant: string): Promise<void> {
  const bytes = randomBytes(4096);
  const hex = randomBytes(32).toString('hex');
  const { manifest } = await impl.catalog.publish(hex, bytes.length, 'text/plain', 'fastcdc', [{ hex, size: bytes.length, checksum: 1n, fresh: true }], bytes, { tenant });
  impl.removable.push({ id: manifest.id, tenant });
}

/** A new blob of 4 blocks of 1 MiB. */
async function publishBlocks(impl: Impl, tenant: string): Promise<{ id: string; seq: number }> {
  const blocks = Array.from({ length: 4 }, () => storedBlock(1 << 20));
  const { manifest } = await impl.catalog.publish(randomBytes(32).toString('hex'), 4 << 20, 'application/octet-stream', 'fastcdc', blocks, undefined, { tenant });
  return { id: manifest.id, seq: manifest.record.seq };
}

async function removeOne(impl: Impl): Promise<void> {
  const next = impl.removable.pop();
  if (!next) throw new Error(`${impl.label}: no blob left to remove (the publish cells publish them)`);
  if (!(await impl.catalog.remove(next.id, next.tenant))) throw new Error(`${impl.label}: remove found no ${next.id}`);
}

const ops = {
  get: async (impl: Impl) => {
    if (!(await impl.catalog.get(pick(impl.held).id, READER))) throw new Error(`${impl.label}: get missed a held blob`);
  },
  page: async (impl: Impl) => {
    // Below a cursor that leaves at least 50 rows.
    const { summaries } = await impl.catalog.page(50, String(impl.held[randomInt(HELD - 50)]!.seq), READER);
    if (summaries.length !== 50) throw new Error(`${impl.label}: page of ${summaries.length}`);
  },
};

const CELLS: Cell[] = [1, 16].flatMap((concurrency) => [
  { label: 'get (cached record)', concurrency, op: ops.get },
  { label: 'page(50)', concurrency, op: ops.page },
  { label: 'publish 4 KiB inline, 1 tenant', concurrency, op: (impl: Impl) => publishInline(impl, TENANTS[0]!) },
  { label: 'publish 4 KiB inline, 8 tenants', concurrency, op: (impl: Impl) => publishInline(impl, pick(TENANTS)) },
  { label: 'publish 4 blocks, 8 tenants', concurrency, op: (impl: Impl) => publishBlocks(impl, pick(TENANTS)) },
  { label: 'remove', concurrency, op: removeOne },
]).sort((a, b) => a.label.localeCompare(b.label) || a.concurrency - b.concurrency);

/** Publishes inline blobs, outside the timed windows, until remove cannot run out in one. */
async function topUp(impl: Impl): Promise<void> {
  const want = Math.max(2_000, Math.ceil(impl.removedMost * 1.5));
  while (impl.removable.length < want) {
    await Promise.all(Array.from({ length: 16 }, () => publishInline(impl, pick(TENANTS))));
  }
}

/** Runs `op` from `concurrency` loops for `ms`; ops/s and client CPU µs per op. */
async function measure(impl: Impl, cell: Cell, ms: number): Promise<{ rate: number; cpuUs: number }> {
  let done = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + ms;
  await Promise.all(Array.from({ length: cell.concurrency }, async () => {
    while (performance.now() < deadline) {
      await cell.op(impl);
      done++;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rate: done / seconds, cpuUs: (cpu.user + cpu.system) / done };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Publishes the reader's inventory (through the catalog itself, as svc would) and warms its record cache. */
async function preload(impl: Impl): Promise<void> {
  for (let i = 0; i < HELD; i += 50) {
    impl.held.push(...await Promise.all(Array.from({ length: 50 }, () => publishBlocks(impl, READER))));
  }
  impl.held.sort((a, b) => b.seq - a.seq);
  for (const h of impl.held) await impl.catalog.get(h.id, READER);
}

async function main(): Promise<void> {
  const baseline = (await import(pathToFileURL(path.resolve(baselinePath)).href)) as { PgBlobCatalog: typeof PgBlobCatalog };
  const server = await requirePostgres();
  const started = new Date().toISOString();
  const impls: Impl[] = [];
  try {
    const candidates = [
      { label: args.values['baseline-label'], open: baseline.PgBlobCatalog.open },
      { label: args.values.label, open: PgBlobCatalog.open },
    ];
    for (const [i, c] of candidates.entries()) {
      const url = await server.createDatabase(`catalog_${i}`);
      impls.push({ label: c.label, catalog: await c.open(url, { poolSize: POOL }), held: [], removable: [], removedMost: 0 });
    }
    for (const impl of impls) await preload(impl);
    process.stderr.write(`preloaded ${HELD} blobs per catalog\n`);

    const samples = new Map<string, { rate: number[]; cpu: number[] }>();
    // Round 0 warms every statement on every connection and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      const order = round % 2 ? [...impls].reverse() : impls;
      for (const cell of CELLS) {
        for (const impl of order) {
          if (cell.op === removeOne) await topUp(impl);
          const ms = round === 0 ? 300 : WINDOW_MS;
          const { rate, cpuUs } = await measure(impl, cell, ms);
          if (cell.op === removeOne) impl.removedMost = Math.max(impl.removedMost, (rate * ms) / 1000);
          if (round === 0) continue;
          const key = `${cell.label}|${cell.concurrency}|${impl.label}`;
          const s = samples.get(key) ?? { rate: [], cpu: [] };
          s.rate.push(rate);
          s.cpu.push(cpuUs);
          samples.set(key, s);
        }
      }
      if (round > 0) process.stderr.write(`round ${round}/${ROUNDS} done, load average ${os.loadavg()[0]!.toFixed(1)}\n`);
    }

    const [a, b] = impls as [Impl, Impl];
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    const version = await serverVersion(server.url);
    console.log(`\nPgBlobCatalog by driver, ${started}: ${a.label} against ${b.label}, PostgreSQL ${version}, pool ${POOL}; ` +
      `${ROUNDS} rounds x ${WINDOW_MS} ms, order flipped each round; median ops/s [min-max] (median client CPU µs/op); ` +
      `ratio: median of the rounds' ${a.label} / ${b.label}; ${os.cpus().length} cores, load average ${os.loadavg()[0]!.toFixed(1)}\n`);
    console.log(`| Operation | Concurrency | ${a.label} | ${b.label} | ops/s ${a.label} / ${b.label} | CPU/op ${a.label} / ${b.label} |`);
    console.log('|---|---|---|---|---|---|');
    for (const cell of CELLS) {
      const stat = (impl: Impl) => samples.get(`${cell.label}|${cell.concurrency}|${impl.label}`)!;
      const show = (impl: Impl) => {
        const s = stat(impl);
        return `${fmt(median(s.rate))} [${fmt(Math.min(...s.rate))}-${fmt(Math.max(...s.rate))}] (${fmt(median(s.cpu))})`;
      };
      // Paired within each round: the two ran seconds apart, under the same host load.
      const ratio = (field: 'rate' | 'cpu') => median(stat(a)[field].map((x, i) => x / stat(b)[field][i]!)).toFixed(2) + 'x';
      console.log(`| ${cell.label} | ${cell.concurrency} | ${show(a)} | ${show(b)} | ${ratio('rate')} | ${ratio('cpu')} |`);
    }
  } finally {
    await Promise.all(impls.map((impl) => impl.catalog.close()));
    await server.stop();
  }
}

/** The server's version, asked through this tree's pool. */
async function serverVersion(url: string): Promise<string> {
  const { openPool } = await import('../engine/store/pg/pool.js');
  const sql = openPool(url, 1);
  try {
    const [row] = await sql<{ server_version: string }[]>`SHOW server_version`;
    return row!.server_version;
  } finally {
    await sql.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
