// The connection pool to the PostgreSQL catalog. Nothing outside engine/store imports the driver.
import postgres from 'postgres';

/** bigint columns (sizes, sequences, times in ms) come back as numbers: every value is below 2^53. */
const int8AsNumber = {
  to: 20,
  from: [20],
  serialize: (x: number) => String(x),
  parse: (x: string) => Number(x),
};

/** Element type oids for `sql.array` (a plain JS array would be sent as one value of its first element's type). */
export const BYTEA = 17;
export const INT8 = 20;

export type PgPool = postgres.Sql<{ int8AsNumber: number }>;

export function openPool(url: string, poolSize: number): PgPool {
  return postgres(url, {
    max: poolSize,
    types: { int8AsNumber },
    // Migrations' IF NOT EXISTS notices are expected; the driver would print them.
    onnotice: () => {},
    connect_timeout: 10,
  });
}
