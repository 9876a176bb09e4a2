/**
 * Which PostgreSQL driver for the pg-s3 catalog (issue 19): `postgres` 3.4.9 against `pg` 8.23.1
 * (and pg's pipeline mode), on one throwaway cluster (bench/postgres-server.ts), catalog-shaped
 * work, drivers alternating within each round so that host drift hits all of them alike:
 *   lookup       point lookup by a 32-byte bytea key, ~200-byte bytea in the row (1 and 16 clients)
 *   publish      manifest row + 32 block upserts (one statement each) + inventory row, one
 *                transaction (1 and 8 clients)
 *   publish-b    the same with the 32 upserts as one unnest() statement
 *   page         100 inventory rows by an index range (1 and 8 clients)
 * Each driver gets a pool of 10 connections (SVC_PG_POOL's default). Reported: median ops/s over
 * the counted rounds, the client's CPU per operation (the driver's own cost; the server's is the
 * same SQL for all), and the median over rounds of the ratio within each round.
 *
 *   npm run build && node dist/bench/pg-driver.js            12 rounds x 0.5 s windows (~3.5 min)
 *   npm run build && node dist/bench/pg-driver.js --quick    4 rounds x 0.3 s windows
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { pgClient, postgresJsClient, preloadSql, SCHEMA, type CatalogClient, type Publication } from './pg-driver-clients.js';
import { requirePostgres } from './postgres-server.js';

const quick = process.argv.includes('--quick');
// Many short windows, drivers back to back in each: on a shared host the load of other work
// moves rates 2-3x within a minute, and what the drivers share in a round cancels in its ratio.
const ROUNDS = quick ? 4 : 12;
const WINDOW_MS = quick ? 300 : 500;
const POOL = 10;
const BLOCKS = 100_000;
const INVENTORY_ROWS = 100_000;
const TENANTS = 20;

type Cell = { label: string; concurrency: number; op: (c: CatalogClient) => Promise<unknown> };

/** Key of preloaded block g: sha256 of g as a big-endian int8, as preloadSql() makes them. */
function blockKey(g: number): Buffer {
  const n = Buffer.alloc(8);
  n.writeBigInt64BE(BigInt(g));
  return createHash('sha256').update(n).digest();
}

const randomInt = (below: number) => Math.floor(Math.random() * below);

function publication(): Publication {
  // Half the blocks are already known (dedup), half are new; distinct, as a manifest's block set is.
  const known = new Set<number>();
  while (known.size < 16) known.add(1 + randomInt(BLOCKS));
  const blockKeys = [...[...known].map(blockKey), ...Array.from({ length: 16 }, () => randomBytes(32))];
  blockKeys.sort(Buffer.compare);
  return { id: randomBytes(32), size: 32 * 1048576, mediaType: 'application/octet-stream', blockList: randomBytes(2048), blockKeys, tenant: `t${randomInt(TENANTS)}` };
}

const CELLS: Cell[] = [
  { label: 'lookup, 1 client', concurrency: 1, op: (c) => c.lookup(blockKey(1 + randomInt(BLOCKS))) },
  { label: 'lookup, 16 concurrent', concurrency: 16, op: (c) => c.lookup(blockKey(1 + randomInt(BLOCKS))) },
  { label: 'publish (33 statements), 1 client', concurrency: 1, op: (c) => c.publish(publication()) },
  { label: 'publish (33 statements), 8 concurrent', concurrency: 8, op: (c) => c.publish(publication()) },
  { label: 'publish (unnest), 1 client', concurrency: 1, op: (c) => c.publishBatched(publication()) },
  { label: 'publish (unnest), 8 concurrent', concurrency: 8, op: (c) => c.publishBatched(publication()) },
  { label: 'page of 100, 1 client', concurrency: 1, op: (c) => c.page(`t${randomInt(TENANTS)}`, 20_000 + randomInt(INVENTORY_ROWS - 20_000)) },
  { label: 'page of 100, 8 concurrent', concurrency: 8, op: (c) => c.page(`t${randomInt(TENANTS)}`, 20_000 + randomInt(INVENTORY_ROWS - 20_000)) },
];

/** Runs `op` from `concurrency` loops for `ms`; ops/s and client CPU µs per op. */
async function measure(client: CatalogClient, cell: Cell, ms: number): Promise<{ rate: number; cpuUs: number }> {
  let ops = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + ms;
  await Promise.all(Array.from({ length: cell.concurrency }, async () => {
    while (performance.now() < deadline) {
      await cell.op(client);
      ops++;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { rate: ops / seconds, cpuUs: (cpu.user + cpu.system) / ops };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function versionOf(pkg: string): string {
  const file = fileURLToPath(new URL(`../../node_modules/${pkg}/package.json`, import.meta.url));
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

async function checkResults(clients: CatalogClient[]): Promise<void> {
  for (const c of clients) {
    if ((await c.lookup(blockKey(42))) !== 208) throw new Error(`${c.name}: lookup returned a wrong row`);
    if ((await c.page('t3', 50_000)) !== 100) throw new Error(`${c.name}: page is not 100 rows`);
    await c.publish(publication());
    await c.publishBatched(publication());
  }
}

async function main(): Promise<void> {
  const server = await requirePostgres();
  const started = new Date().toISOString();
  let clients: CatalogClient[] = [];
  try {
    const setup = postgres(server.url, { max: 1, onnotice: () => {} });
    await setup.unsafe(SCHEMA);
    await setup.unsafe(preloadSql(BLOCKS, INVENTORY_ROWS, TENANTS));
    await setup.unsafe('VACUUM ANALYZE'); // its own statement: VACUUM refuses a multi-statement batch
    const [{ server_version: serverVersion }] = await setup`SHOW server_version`;
    await setup.end();

    clients = [postgresJsClient(server.url, POOL), pgClient(server.url, POOL, false), pgClient(server.url, POOL, true)];
    await checkResults(clients);
    const samples = new Map<string, { rate: number[]; cpu: number[] }>();
    // Round 0 warms every driver and statement on every connection and is not counted.
    for (let round = 0; round <= ROUNDS; round++) {
      for (const cell of CELLS) {
        // Rotate which driver goes first, round by round.
        const order = clients.map((_, i) => clients[(i + round) % clients.length]!);
        for (const client of order) {
          const { rate, cpuUs } = await measure(client, cell, round === 0 ? Math.min(500, WINDOW_MS) : WINDOW_MS);
          if (round === 0) continue;
          const key = `${cell.label}|${client.name}`;
          const s = samples.get(key) ?? { rate: [], cpu: [] };
          s.rate.push(rate);
          s.cpu.push(cpuUs);
          samples.set(key, s);
        }
      }
      if (round > 0) process.stderr.write(`round ${round}/${ROUNDS} done\n`);
    }

    const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
    console.log(`\nPostgreSQL driver benchmark, ${started}: postgres ${versionOf('postgres')}, pg ${versionOf('pg')}, ` +
      `PostgreSQL ${serverVersion}; pool ${POOL}; ${ROUNDS} rounds x ${WINDOW_MS} ms, median ops/s [min-max] (client CPU µs/op), ` +
      `ratios: median of the rounds' paired ratios; ${os.cpus().length} cores, load average ${os.loadavg()[0]!.toFixed(1)}\n`);
    console.log('| Work | postgres | pg | pg (pipeline) | postgres / pg | postgres / pg (pipeline) |');
    console.log('|---|---|---|---|---|---|');
    for (const cell of CELLS) {
      const stat = (name: string) => samples.get(`${cell.label}|${name}`)!;
      const show = (name: string) => {
        const s = stat(name);
        return `${fmt(median(s.rate))} [${fmt(Math.min(...s.rate))}-${fmt(Math.max(...s.rate))}] (${fmt(median(s.cpu))})`;
      };
      // Paired within each round: the drivers ran seconds apart, under the same host load.
      const ratio = (other: string) => median(stat('postgres').rate.map((r, i) => r / stat(other).rate[i]!)).toFixed(2) + 'x';
      console.log(`| ${cell.label} | ${show('postgres')} | ${show('pg')} | ${show('pg (pipeline)')} | ${ratio('pg')} | ${ratio('pg (pipeline)')} |`);
    }
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
