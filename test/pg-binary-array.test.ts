// The unit store's array parameters in PostgreSQL's binary array format (engine/store/pg/binary-array.ts):
// each element kind read back by PostgreSQL as the array it casts to, NULLs and empty arrays included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boolArray, byteaArray, float8Array, int4Array, int8Array, textArray } from '../dist/engine/store/pg/binary-array.js';
import { type PgPool, openPool } from '../dist/engine/store/pg/pool.js';
import { type PgServer, startPostgres } from './helpers/postgres.js';

describe('binary array parameters', () => {
  let server: PgServer | { skip: string };
  let sql: PgPool | undefined;
  beforeAll(async () => {
    server = await startPostgres();
    if ('skip' in server) return;
    sql = openPool(await server.createDatabase('binary_array'), 2);
  }, 60_000);
  afterAll(async () => {
    await sql?.end();
    if ('stop' in server) await server.stop();
  });

  it('reads back as the arrays they encode', async ({ skip }) => {
    if ('skip' in server) skip(server.skip);
    const bytes = [Buffer.from([0, 1, 255]), Buffer.alloc(0), null, Buffer.from('ünï', 'utf8')];
    const [row] = await sql!<Array<Record<string, string | null>>>`SELECT
      array_to_string(ARRAY(SELECT coalesce(encode(b, 'hex'), 'NULL') FROM unnest(${byteaArray(bytes)}::bytea[]) b), ',') AS bytea,
      array_to_string(${textArray(['a', 'ünïcode', ''])}::text[], '|') AS text,
      array_to_string(${boolArray([true, false])}::boolean[], ',') AS bool,
      array_to_string(${int8Array([0, -1, 2 ** 53 - 1, null])}::bigint[], ',', 'NULL') AS int8,
      array_to_string(${int4Array([2 ** 31 - 1, -(2 ** 31)])}::integer[], ',') AS int4,
      array_to_string(${float8Array([0.5, -1e300])}::float8[], ',') AS float8,
      cardinality(${byteaArray([])}::bytea[])::text AS empty`;
    expect(row).toEqual({
      bytea: '0001ff,,NULL,c3bc6ec3af',
      text: 'a|ünïcode|',
      bool: 't,f',
      int8: `0,-1,${2 ** 53 - 1},NULL`,
      int4: '2147483647,-2147483648',
      float8: '0.5,-1e+300',
      empty: '0',
    });
  });
});
