// Block records written by a publication: a record for each new block, a fresher touched_at for
// a reused one (at most once a minute: GC's minimum age counts from the last reference), and a
// quarantined one back to live. Batched: one statement per step whatever the block count.
import type { StoredBlock } from '../block-store.js';
import { BYTEA, INT8, type PgTransaction } from './pool.js';

const TOUCH_GRANULARITY_MS = 60_000;

/** What the publication added to the live blocks (for the catalog's totals). */
export interface RecordedBlocks {
  blocks: number;
  bytes: number;
}

/** Inside a transaction; leaves every referenced block's row locked until it ends. */
export async function recordBlocks(tx: PgTransaction, blocks: readonly StoredBlock[]): Promise<RecordedBlocks> {
  const sizeByHex = new Map<string, number>();
  for (const b of blocks) sizeByHex.set(b.hex, b.size);
  if (sizeByHex.size === 0) return { blocks: 0, bytes: 0 };
  // Rows are locked in key order in every transaction, so two publications never wait on each other in a cycle.
  const hexes = [...sizeByHex.keys()].sort();
  const keys = hexes.map((hex) => Buffer.from(hex, 'hex'));

  const existing = await tx<{ key: Buffer; size: number; quarantined: boolean; stale: boolean }[]>`
    SELECT key, size, state = 'quarantined' AS quarantined, touched_at < svc_now_ms() - ${TOUCH_GRANULARITY_MS} AS stale
    FROM blocks WHERE key = ANY(${tx.array(keys, BYTEA)}) ORDER BY key FOR UPDATE`;
  const present = new Set(existing.map((row) => row.key.toString('hex')));
  const restored = existing.filter((row) => row.quarantined);
  const refresh = existing.filter((row) => row.quarantined || row.stale).map((row) => row.key);
  const missing = hexes.filter((hex) => !present.has(hex));

  const inserting = missing.length === 0 ? Promise.resolve([] as { size: number }[]) : tx<{ size: number }[]>`
    INSERT INTO blocks (key, size, created_at, touched_at)
    SELECT key, size, svc_now_ms(), svc_now_ms()
    FROM unnest(${tx.array(missing.map((hex) => Buffer.from(hex, 'hex')), BYTEA)}, ${tx.array(missing.map((hex) => sizeByHex.get(hex)!), INT8)}) AS input(key, size)
    ORDER BY key
    ON CONFLICT (key) DO NOTHING
    RETURNING size`.execute();
  const refreshing = refresh.length === 0 ? Promise.resolve() : tx`
    UPDATE blocks SET touched_at = svc_now_ms(), state = 'live', quarantined_at = NULL
    WHERE key = ANY(${tx.array(refresh, BYTEA)})`.execute();
  // A block inserted meanwhile by another transaction is counted by that one.
  const [inserted] = await Promise.all([inserting, refreshing]);
  const added = [...inserted, ...restored];
  return { blocks: added.length, bytes: added.reduce((sum, row) => sum + row.size, 0) };
}
