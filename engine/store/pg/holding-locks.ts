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

/** A lock or unlock waiting for the kept connection; an unlock names the connection its lock was taken on. */
interface Op {
  kind: 'lock' | 'unlock';
  key: number;
  on?: Reserved;
  tries: number;
  done(result: { ok: boolean; on: Reserved }): void;
  failed(err: unknown): void;
}

export class HoldingLocks {
  private shared?: Promise<Reserved>;
  /**
   * The kept connection runs one statement at a time (a pg client must not be given a second
   * query before the first one's answer): what arrives meanwhile goes in the next statement,
   * so under load it is one statement for many locks.
   */
  private pending: Op[] = [];
  private sending = false;

  /** `locks`: a pool of one connection of its own (not taken from the catalog's pool); `waits`: the catalog's pool. */
  constructor(
    private readonly locks: PgPool,
    private readonly waits: PgPool,
  ) {}

  async acquire(tenant: string, id: string): Promise<HeldLock> {
    const key = objectKey(tenant, id);
    const tried = await this.send('lock', key);
    if (tried.ok) return { release: async () => (await this.send('unlock', key, tried.on)).ok };
    // Another node holds it (or another key of this node with the same 32-bit hash): wait.
    const own = await this.waits.reserve();
    try {
      await own`SELECT pg_advisory_lock(${HOLDING_CLASS}::int4, ${key}::int4)`;
    } catch (err) {
      own.release();
      throw err;
    }
    return {
      release: async () => {
        try {
          const [row] = await own<{ ok: boolean }[]>`SELECT pg_advisory_unlock(${HOLDING_CLASS}::int4, ${key}::int4) AS ok`;
          return row!.ok && !own.broken();
        } catch {
          return false;
        } finally {
          own.release();
        }
      },
    };
  }

  async close(): Promise<void> {
    const shared = await this.shared?.catch(() => undefined);
    shared?.release();
    await this.locks.end({ timeout: 5 });
  }

  private send(kind: Op['kind'], key: number, on?: Reserved): Promise<{ ok: boolean; on: Reserved }> {
    return new Promise((done, failed) => {
      this.pending.push({ kind, key, on, tries: 0, done, failed });
      void this.drain();
    });
  }

  private async drain(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0);
        let conn: Reserved;
        try {
          conn = await this.connection();
        } catch (err) {
          for (const op of batch) op.failed(err);
          continue;
        }
        // An unlock for a connection that has been replaced: that lock went with it.
        for (const op of batch) if (op.kind === 'unlock' && op.on !== conn) op.done({ ok: false, on: conn });
        await this.run(conn, batch.filter((op) => op.kind === 'unlock' && op.on === conn));
        await this.run(conn, batch.filter((op) => op.kind === 'lock'));
      }
    } finally {
      this.sending = false;
    }
  }

  private async run(conn: Reserved, ops: Op[]): Promise<void> {
    if (ops.length === 0) return;
    const keys = ops.map((op) => op.key);
    try {
      const rows = ops[0]!.kind === 'lock'
        ? await conn<{ ok: boolean }[]>`SELECT pg_try_advisory_lock(${HOLDING_CLASS}::int4, k) AS ok FROM unnest(${keys}::int4[]) WITH ORDINALITY AS t(k, i) ORDER BY i`
        : await conn<{ ok: boolean }[]>`SELECT pg_advisory_unlock(${HOLDING_CLASS}::int4, k) AS ok FROM unnest(${keys}::int4[]) WITH ORDINALITY AS t(k, i) ORDER BY i`;
      ops.forEach((op, i) => op.done({ ok: rows[i]!.ok && !conn.broken(), on: conn }));
    } catch (err) {
      for (const op of ops) {
        // The kept connection had died (the server restarted, an idle timeout): a lock is tried
        // once more on a new one; an unlock's lock went with it.
        if (op.kind === 'unlock') op.done({ ok: false, on: conn });
        else if (conn.broken() && op.tries++ === 0) this.pending.push(op);
        else op.failed(err);
      }
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
