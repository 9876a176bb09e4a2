// The catalog's running totals (blobs, live blocks, their bytes), changed in the transactions that
// change what they count, so that totals() reads a few rows instead of counting tables.
import type { PgQueryable, PgTransaction } from './pool.js';
import { TOTALS_SLOTS } from './schema.js';

export interface TotalsDelta {
  blobs: number;
  blocks: number;
  bytes: number;
}

/**
 * Inside a transaction, as its last write: adds the delta to a random slot (sent at once, so it
 * keeps its place in a pipeline). Last, because the slot's row stays locked until commit and a
 * transaction holding it must wait for nothing else.
 */
export function addTotals(tx: PgTransaction, delta: TotalsDelta): Promise<unknown> {
  if (!delta.blobs && !delta.blocks && !delta.bytes) return Promise.resolve();
  const slot = Math.floor(Math.random() * TOTALS_SLOTS);
  return tx`UPDATE catalog_totals
    SET blobs = blobs + ${delta.blobs}, blocks = blocks + ${delta.blocks}, stored_bytes = stored_bytes + ${delta.bytes}
    WHERE slot = ${slot}`.execute();
}

export async function readTotals(sql: PgQueryable): Promise<{ blobs: number; blocks: number; storedBytes: number }> {
  const [row] = await sql<{ blobs: number; blocks: number; storedBytes: number }[]>`SELECT
    coalesce(sum(blobs), 0)::int8 AS blobs, coalesce(sum(blocks), 0)::int8 AS blocks,
    coalesce(sum(stored_bytes), 0)::int8 AS "storedBytes"
    FROM catalog_totals`;
  return row;
}
