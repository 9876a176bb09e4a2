// The PL/pgSQL helpers a unit's commit adds counters with (schema-v12-unit-add.ts): a counter's
// value is msgpack written by msgpackr (engine/store/pg/unit-store.ts), and the sum PostgreSQL
// writes back must be the bytes msgpackr itself writes for the JavaScript sum, so the same
// number reads and compares alike however it was written. Pinned here against msgpackr, through
// PostgreSQL, on the boundaries of every form and on sums that cross them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Packr } from 'msgpackr';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';

// As the unit store packs.
const packr = new Packr({ useRecords: false });

const EDGES = [
  0, 1, 31, 32, 33, 63, 64, 126, 127, 128, 129, 254, 255, 256, 257, 32767, 32768, 65534, 65535, 65536, 65537,
  2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 2, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 40, 2 ** 53 - 2, 2 ** 53 - 1, 2 ** 53,
];
const SIGNED = [...EDGES, ...EDGES.map((n) => -n), -(2 ** 31) - 1, -(2 ** 31), 123_456_789_012, -987_654_321_098];
const FRACTIONS = [0.5, -0.5, 1.1, -2.75, 1e-300, -1e-300, 5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 1e21, 2 ** 60, 1 / 3, 127.5, 4294967295.5, Infinity, -Infinity, NaN];

/** Deterministic pseudo-random numbers (a test that fails must fail again). */
function* randoms(count: number): Generator<number> {
  let seed = 0x9e3779b9;
  const next = () => ((seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
  for (let i = 0; i < count; i++) {
    const scale = 2 ** Math.floor(next() * 54);
    const n = Math.floor(next() * scale) * (next() < 0.3 ? -1 : 1);
    yield i % 5 === 4 ? n + next() : n;
  }
}

const VALUES = [...SIGNED, ...FRACTIONS, ...randoms(400)];

const bits = (b: Buffer) => b.readDoubleBE(0);
const same = (a: number, b: number) => Object.is(a, b) || (a === 0 && b === 0);

describe('msgpack numbers in PostgreSQL (svc_msgpack_number, svc_msgpack_number_bytes)', () => {
  let server: PgServer | { skip: string };
  let sql: PgPool | undefined;
  beforeAll(async () => {
    server = await startPostgres();
    if ('skip' in server) return;
    const url = await server.createDatabase('msgpack');
    await (await PgBlobCatalog.open(url, { poolSize: 1 })).close(); // migrates
    sql = openPool(url, 2);
  }, 60_000);
  afterAll(async () => {
    await sql?.end();
    if ('stop' in server) await server.stop();
  });

  function pool(skip: (note: string) => never): PgPool {
    if ('skip' in server) skip(server.skip);
    return sql!;
  }

  it('decodes every form msgpackr writes for a number to that number', async ({ skip }) => {
    const rows = await pool(skip)<Array<{ got: Buffer }>>`SELECT float8send(svc_msgpack_number(b)) AS got FROM unnest(${VALUES.map((v) => packr.pack(v))}::bytea[]) WITH ORDINALITY AS u(b, i) ORDER BY i`;
    const wrong = VALUES.filter((v, i) => !same(bits(rows[i]!.got), v));
    expect(wrong).toEqual([]);
    expect(rows).toHaveLength(VALUES.length);
  });

  it('decodes the forms msgpackr reads but svc never writes: float32, uint64, int64', async ({ skip }) => {
    const float32 = Buffer.from([0xca, 0, 0, 0, 0]);
    float32.writeFloatBE(-1.5, 1);
    const uint64 = Buffer.from([0xcf, 0, 0, 0, 0, 0, 0, 0, 0]);
    uint64.writeBigUInt64BE(2n ** 53n - 1n, 1);
    const int64 = Buffer.from([0xd3, 0, 0, 0, 0, 0, 0, 0, 0]);
    int64.writeBigInt64BE(-(2n ** 40n), 1);
    const rows = await pool(skip)<Array<{ got: Buffer }>>`SELECT float8send(svc_msgpack_number(b)) AS got FROM unnest(${[float32, uint64, int64]}::bytea[]) WITH ORDINALITY AS u(b, i) ORDER BY i`;
    expect(rows.map((r) => bits(r.got))).toEqual([-1.5, 2 ** 53 - 1, -(2 ** 40)]);
  });

  it('a value that is no number is refused, not counted', async ({ skip }) => {
    await expect(pool(skip)`SELECT svc_msgpack_number(${packr.pack('12')}::bytea)`).rejects.toThrow(/holds no number/);
    await expect(pool(skip)`SELECT svc_msgpack_number(${packr.pack(null)}::bytea)`).rejects.toThrow(/holds no number/);
  });

  it('encodes every number as msgpackr does: small integers compact, the rest float64', async ({ skip }) => {
    const rows = await pool(skip)<Array<{ got: Buffer }>>`SELECT svc_msgpack_number_bytes(x) AS got FROM unnest(${VALUES}::float8[]) WITH ORDINALITY AS u(x, i) ORDER BY i`;
    const wrong = VALUES.map((v, i) => ({ v, got: rows[i]!.got.toString('hex'), want: packr.pack(v).toString('hex') })).filter((w) => w.got !== w.want);
    expect(wrong).toEqual([]);
  });

  it('a sum written back is the bytes msgpackr writes for the JavaScript sum, across every boundary', async ({ skip }) => {
    const pairs: Array<[number, number]> = [];
    for (const a of SIGNED) for (const b of [1, -1, 2, -2, 128, -128, 65536, -65536, 2 ** 32, -(2 ** 32), 0.5]) pairs.push([a, b]);
    const random = [...randoms(300)];
    for (let i = 0; i + 1 < random.length; i += 2) pairs.push([random[i]!, random[i + 1]!]);
    const rows = await pool(skip)<Array<{ got: Buffer }>>`SELECT svc_msgpack_number_bytes(svc_msgpack_number(b) + d) AS got
      FROM unnest(${pairs.map(([a]) => packr.pack(a))}::bytea[], ${pairs.map(([, d]) => d)}::float8[]) WITH ORDINALITY AS u(b, d, i) ORDER BY i`;
    const wrong = pairs.map(([a, d], i) => ({ a, d, got: rows[i]!.got.toString('hex'), want: packr.pack(a + d).toString('hex') })).filter((w) => w.got !== w.want);
    expect(wrong).toEqual([]);
    // And msgpackr reads each back as the sum.
    pairs.forEach(([a, d], i) => expect(packr.unpack(rows[i]!.got)).toBe(a + d));
  });
});
