/**
 * What one PostgreSQL statement costs svc's own process (issue 40), on the patterns the unit store
 * uses (engine/store/pg/pool.ts, unit-store.ts), on a throwaway cluster over loopback TCP:
 *   select1        a prepared `SELECT $1`: the driver's floor
 *   point/pool     a unit's point read through the pool (a checkout per statement)
 *   point/held     the same on one connection held for many statements
 *   point/svc      the same through svc's PgPool (openPool: named statement per call site)
 *   commit/text    a commit-shaped statement (18 array parameters, a document step's sizes) with
 *                  bytea[] and text[] sent as pg sends them: array literals, each value hex-encoded
 *   commit/binary  the same statement, each array sent in PostgreSQL's binary array format (one Buffer)
 * Each cell runs at concurrency 1 and 4 for a window; reported: the process's CPU µs per statement
 * (process.cpuUsage: user + system, every thread; and the system part), the median of the rounds, cells alternating.
 * CPU per statement depends little on the host's load (unlike rates): a fair A/B on a busy host.
 *
 *   npm run build && node dist/bench/pg-statement-cost.js [--quick]
 */
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { openPool } from '../engine/store/pg/pool.js';
import { benchArgs } from './args.js';
import { requirePostgres } from './postgres-server.js';

// PostgreSQL's binary array format (array_recv), one Buffer parameter: what commit/binary sends.
type ArrayElement = 'bytea' | 'text' | 'bool' | 'int8' | 'int4' | 'float8';

const OID: Record<ArrayElement, number> = { bool: 16, bytea: 17, int8: 20, int4: 23, text: 25, float8: 701 };
const FIXED: Partial<Record<ArrayElement, number>> = { bool: 1, int8: 8, int4: 4, float8: 8 };

type Value<E extends ArrayElement> = E extends 'bytea' ? Buffer : E extends 'text' ? string : E extends 'bool' ? boolean : number;

/**
 * `values` as a binary array of `element` (null: SQL NULL). int8 values are safe integers; text
 * is UTF-8. The header: dimensions, has-nulls, element type, then length and lower bound (1).
 */
function binaryArray<E extends ArrayElement>(element: E, values: ReadonlyArray<Value<E> | null>): Buffer {
  const fixed = FIXED[element];
  let size = values.length === 0 ? 12 : 20;
  let nulls = 0;
  for (const v of values) {
    if (v === null || v === undefined) nulls = 1;
    else size += 4 + (fixed ?? (element === 'text' ? Buffer.byteLength(v as string) : (v as Buffer).length));
    if (v === null || v === undefined) size += 4;
  }
  const out = Buffer.allocUnsafe(size);
  out.writeInt32BE(values.length === 0 ? 0 : 1, 0);
  out.writeInt32BE(nulls, 4);
  out.writeInt32BE(OID[element], 8);
  if (values.length === 0) return out;
  out.writeInt32BE(values.length, 12);
  out.writeInt32BE(1, 16);
  let at = 20;
  for (const v of values) {
    if (v === null || v === undefined) {
      out.writeInt32BE(-1, at);
      at += 4;
      continue;
    }
    switch (element) {
      case 'bytea':
        out.writeInt32BE((v as Buffer).length, at);
        (v as Buffer).copy(out, at + 4);
        at += 4 + (v as Buffer).length;
        break;
      case 'text': {
        const written = out.write(v as string, at + 4, 'utf8');
        out.writeInt32BE(written, at);
        at += 4 + written;
        break;
      }
      case 'bool':
        out.writeInt32BE(1, at);
        out.writeUInt8(v ? 1 : 0, at + 4);
        at += 5;
        break;
      case 'int4':
        out.writeInt32BE(4, at);
        out.writeInt32BE(v as number, at + 4);
        at += 8;
        break;
      case 'int8':
        out.writeInt32BE(8, at);
        out.writeBigInt64BE(BigInt(v as number), at + 4);
        at += 12;
        break;
      case 'float8':
        out.writeInt32BE(8, at);
        out.writeDoubleBE(v as number, at + 4);
        at += 12;
        break;
    }
  }
  return out;
}

const args = benchArgs({
  usage: 'usage: node dist/bench/pg-statement-cost.js [--quick]',
  options: { quick: { type: 'boolean', help: '3 rounds of 500 ms windows (default: 7 of 1500 ms)' } },
});
const ROUNDS = args.values.quick ? 3 : 7;
const WINDOW_MS = args.values.quick ? 500 : 1500;

const server = await requirePostgres();
const url = await server.createDatabase('stmtcost');
const setup = new pg.Client({ connectionString: url });
await setup.connect();
await setup.query('CREATE TABLE rows (tbl text, key bytea, value bytea, PRIMARY KEY (tbl, key))');
const keys = Array.from({ length: 1000 }, (_, i) => Buffer.from(`key-${i}`));
for (const key of keys) await setup.query('INSERT INTO rows VALUES ($1, $2, $3)', ['docs', key, randomBytes(300)]);
await setup.end();

const pool = new pg.Pool({ connectionString: url, max: 10 });
const held = Array.from({ length: 4 }, () => new pg.Client({ connectionString: url }));
await Promise.all(held.map((c) => c.connect()));
const svc = openPool(url, 10);

const POINT = { name: 'point', text: 'SELECT value FROM rows WHERE tbl = $1 AND key = $2' };
const key = () => keys[Math.floor(Math.random() * keys.length)]!;

// A document step's commit: 3 points, 4 writes of ~300 bytes, 1 add, as svc_unit_commit's 18 parameters.
const COMMIT_TEXT = `SELECT cardinality($1::text[]) + cardinality($2::bytea[]) + cardinality($3::bytea[]) + cardinality($4::text[])
  + cardinality($5::bytea[]) + cardinality($6::bytea[]) + cardinality($7::boolean[]) + cardinality($8::bigint[]) + cardinality($9::integer[])
  + cardinality($10::bytea[]) + cardinality($11::bytea[]) + cardinality($12::text[]) + cardinality($13::bytea[]) + cardinality($14::bytea[])
  + cardinality($15::text[]) + cardinality($16::bytea[]) + cardinality($17::float8[]) + cardinality($18::text[]) AS n`;
const points = Array.from({ length: 3 }, (_, i) => ({ table: 'docs', key: Buffer.from(`document-key-${i}`), bytes: randomBytes(300) }));
const puts = Array.from({ length: 4 }, (_, i) => ({ table: 'docs', key: Buffer.from(`written-key-${i}`), value: randomBytes(300) }));
const commitValues = (binary: boolean): unknown[] => {
  const arr = (type: 'text' | 'bytea' | 'bool' | 'int8' | 'int4' | 'float8', values: unknown[]) => (binary ? binaryArray(type, values as never) : values);
  return [
    arr('text', points.map((p) => p.table)), arr('bytea', points.map((p) => p.key)), arr('bytea', points.map((p) => p.bytes)),
    arr('text', []), arr('bytea', []), arr('bytea', []), arr('bool', []), arr('int8', []), arr('int4', []), arr('bytea', []), arr('bytea', []),
    arr('text', puts.map((w) => w.table)), arr('bytea', puts.map((w) => w.key)), arr('bytea', puts.map((w) => w.value)),
    arr('text', ['counters']), arr('bytea', [Buffer.from('tenant')]), arr('float8', [300]), arr('text', ['docs']),
  ];
};

type Cell = { label: string; op: (lane: number) => Promise<unknown> };
const cells: Cell[] = [
  { label: 'select1', op: (lane) => held[lane]!.query({ name: 'one', text: 'SELECT $1::int AS one', values: [1] }) },
  { label: 'point/pool', op: () => pool.query({ ...POINT, values: ['docs', key()] }) },
  { label: 'point/held', op: (lane) => held[lane]!.query({ ...POINT, values: ['docs', key()] }) },
  { label: 'point/svc', op: () => svc`SELECT value FROM rows WHERE tbl = ${'docs'} AND key = ${key()}` },
  { label: 'commit/text', op: (lane) => held[lane]!.query({ name: 'commit', text: COMMIT_TEXT, values: commitValues(false) }) },
  { label: 'commit/binary', op: (lane) => held[lane]!.query({ name: 'commit', text: COMMIT_TEXT, values: commitValues(true) }) },
];

/** CPU µs of this process per statement over one window at `concurrency` lanes. */
async function window(cell: Cell, concurrency: number): Promise<{ all: number; system: number }> {
  let count = 0;
  const until = performance.now() + WINDOW_MS;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      while (performance.now() < until) {
        await cell.op(lane);
        count++;
      }
    }),
  );
  const used = process.cpuUsage(before);
  return { all: (used.user + used.system) / count, system: used.system / count };
}

const results = new Map<string, number[]>();
/** Of it, the kernel's (system time: the socket's writes and reads). */
const systems = new Map<string, number[]>();
for (let round = 0; round <= ROUNDS; round++) {
  const order = round % 2 === 0 ? cells : [...cells].reverse();
  for (const concurrency of [1, 4]) {
    for (const cell of order) {
      const { all, system } = await window(cell, concurrency);
      // Round 0 warms every connection and statement up: not counted.
      if (round === 0) continue;
      const label = `${cell.label} c=${concurrency}`;
      results.set(label, [...(results.get(label) ?? []), all]);
      systems.set(label, [...(systems.get(label) ?? []), system]);
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`CPU µs of this process per statement, median of ${ROUNDS} rounds of ${WINDOW_MS} ms [min-max]; load average ${(await import('node:os')).loadavg()[0]!.toFixed(2)}`);
for (const [label, xs] of results) console.log(`${label.padEnd(20)} ${median(xs).toFixed(1).padStart(7)}  [${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)}]  system ${median(systems.get(label)!).toFixed(1)}`);
await Promise.all([pool.end(), svc.end(), ...held.map((c) => c.end())]);
await server.stop();
