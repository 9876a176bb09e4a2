// A tenant's publication and removal of one blob write the bucket (the holding) and the catalog
// (the row) in two steps that are not one transaction. Interleaved across nodes, a removal's late
// DELETE could remove the holding of a publication that followed it, or a refused publication's
// rollback the holding of one that succeeded. So each takes a PostgreSQL advisory lock keyed by
// (tenant, blob) for both steps.
//
// The common case, nobody else holding the key, costs two short statements and no connection
// held across the S3 write: the lock is tried on one connection this node keeps for the purpose
// (a session holds any number of advisory locks at once). Only when another node holds the key
// does the caller wait, on a pool connection of its own (pg_advisory_lock). A dead node's
// connection, and with it its locks, is ended by the server.
import { createHash } from 'node:crypto';
import type { PgPool, Reserved } from './pool.js';

/** The first key of every holding lock (the two-int key space: apart from GC's and the schema's one-bigint keys). */
const HOLDING_CLASS = 0x7376_6368; // 'svch'

export interface HeldLock {
  /** Unlocks; false if the lock may have been lost meanwhile (its connection failed): the caller reconciles. */
  release(): Promise<boolean>;
}

function objectKey(tenant: string, id: string): number {
  return createHash('sha256').update(tenant).update('\0').update(id).digest().readInt32BE(0);
}

export class HoldingLocks {
  private shared?: Promise<Reserved>;

  /** `locks`: a pool of one connection of its own (not taken from the catalog's pool). */
  constructor(
    private readonly locks: PgPool,
    private readonly waits: PgPool,
  ) {}

  async acquire(tenant: string, id: string): Promise<HeldLock> {
    const key = objectKey(tenant, id);
    let conn = await this.connection();
    let row: { locked: boolean } | undefined;
    try {
      [row] = await conn<{ locked: boolean }[]>`SELECT pg_try_advisory_lock(${HOLDING_CLASS}::int4, ${key}::int4) AS locked`;
    } catch (err) {
      if (!conn.broken()) throw err;
      // The kept connection had died (the server restarted, an idle timeout): once more on a new one.
      conn = await this.connection();
      [row] = await conn<{ locked: boolean }[]>`SELECT pg_try_advisory_lock(${HOLDING_CLASS}::int4, ${key}::int4) AS locked`;
    }
    if (row!.locked) return { release: () => this.unlock(conn, key, false) };
    // Another node holds it (or another key of this node with the same 32-bit hash): wait.
    const own = await this.waits.reserve();
    try {
      await own`SELECT pg_advisory_lock(${HOLDING_CLASS}::int4, ${key}::int4)`;
    } catch (err) {
      own.release();
      throw err;
    }
    return { release: () => this.unlock(own, key, true) };
  }

  async close(): Promise<void> {
    const shared = await this.shared?.catch(() => undefined);
    shared?.release();
    await this.locks.end({ timeout: 5 });
  }

  private async unlock(conn: Reserved, key: number, own: boolean): Promise<boolean> {
    try {
      const [row] = await conn<{ unlocked: boolean }[]>`SELECT pg_advisory_unlock(${HOLDING_CLASS}::int4, ${key}::int4) AS unlocked`;
      return row!.unlocked && !conn.broken();
    } catch {
      return false;
    } finally {
      if (own) conn.release(); // a broken kept connection is replaced by the next acquire
    }
  }

  /** The kept connection; a new one once it failed. */
  private async connection(): Promise<Reserved> {
    const kept = this.shared;
    if (kept) {
      const current = await kept.catch(() => undefined);
      if (current && !current.broken()) return current;
      if (this.shared === kept) {
        this.shared = undefined;
        current?.release();
      }
    }
    this.shared ??= this.locks.reserve();
    return this.shared;
  }
}
