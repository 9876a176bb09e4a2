// Resumable sessions in PostgreSQL (pg-s3): every node sees every session, so a part, a commit or
// a cancel may reach any node. A change locks the session's row for its transaction, so leases
// and offsets move under one writer at a time across nodes.
import type { StoredBlock } from '../block-store.js';
import { type PartRecord, type SessionRecord, type UploadCatalog, unpackBlocks } from '../upload-catalog.js';
import type { PgPool, PgSql } from './pool.js';

/** Sessions read per round trip when every session is walked (cleanup). */
const PAGE = 500;

export class PgUploadCatalog implements UploadCatalog {
  readonly shared = true;

  constructor(private readonly sql: PgPool) {}

  async get(id: string): Promise<SessionRecord | undefined> {
    const [row] = await this.sql<{ record: SessionRecord }[]>`SELECT record FROM upload_sessions WHERE id = ${id}`;
    return row?.record;
  }

  /** A sum over the live sessions (the partial index upload_sessions_live), of this tenant. */
  async stagedBytes(tenant: string, now: number, except?: string): Promise<number> {
    const [row] = await this.sql<{ staged: string | null }[]>`
      SELECT sum(COALESCE((record->>'declaredLength')::bigint, (record->>'offset')::bigint)) AS staged
      FROM upload_sessions
      WHERE state IN ('Open', 'Committing') AND tenant = ${tenant} AND id::text <> ${except ?? ''}
        AND (state = 'Committing' OR (record->>'expiresAt')::bigint > ${now})`;
    return Number(row?.staged ?? 0);
  }

  async hasPart(id: string, partId: string): Promise<boolean> {
    const rows = await this.sql`SELECT 1 FROM upload_parts WHERE session_id = ${id} AND part_id = ${partId}`;
    return rows.length > 0;
  }

  update<R extends SessionRecord>(id: string, change: (current: SessionRecord | undefined) => R): Promise<R> {
    return this.sql.begin(async (tx) => {
      const current = await this.locked(tx, id);
      const next = change(current);
      if (current) {
        await this.write(tx, next);
        return next;
      }
      // No row to lock: of two creators at once, the one whose insert lands wins; the other sees
      // the winner's record, as if it had come first.
      const inserted = await tx`INSERT INTO upload_sessions (id, tenant, state, record)
        VALUES (${id}, ${next.tenant}, ${next.state}, ${next}) ON CONFLICT (id) DO NOTHING RETURNING 1`;
      if (inserted.length > 0) return next;
      const winner = change(await this.locked(tx, id));
      await this.write(tx, winner);
      return winner;
    });
  }

  addPart(session: SessionRecord, index: number, part: PartRecord, check: (current: SessionRecord | undefined) => void): Promise<void> {
    return this.sql.begin(async (tx) => {
      check(await this.locked(tx, session.id));
      await tx`INSERT INTO upload_parts (session_id, idx, part_id, part_offset, length, blocks)
        VALUES (${session.id}, ${index}, ${part.partId}, ${part.offset}, ${part.length}, ${part.blocks})`;
      await this.write(tx, session);
    });
  }

  async blocks(id: string): Promise<StoredBlock[]> {
    const rows = await this.sql<{ blocks: Buffer }[]>`SELECT blocks FROM upload_parts WHERE session_id = ${id} ORDER BY idx`;
    const out: StoredBlock[] = [];
    for (const row of rows) unpackBlocks(row.blocks, out);
    return out;
  }

  async dropParts(id: string): Promise<void> {
    await this.sql`DELETE FROM upload_parts WHERE session_id = ${id}`;
  }

  async remove(id: string): Promise<boolean> {
    const rows = await this.sql`DELETE FROM upload_sessions WHERE id = ${id} RETURNING 1`;
    return rows.length > 0;
  }

  async *all(): AsyncGenerator<SessionRecord> {
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const rows = await this.sql<{ id: string; record: SessionRecord }[]>`
        SELECT id::text AS id, record FROM upload_sessions WHERE id > ${after} ORDER BY id LIMIT ${PAGE}`;
      for (const row of rows) yield row.record;
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]!.id;
    }
  }

  private async locked(tx: PgSql, id: string): Promise<SessionRecord | undefined> {
    const [row] = await tx<{ record: SessionRecord }[]>`SELECT record FROM upload_sessions WHERE id = ${id} FOR UPDATE`;
    return row?.record;
  }

  private async write(tx: PgSql, record: SessionRecord): Promise<void> {
    await tx`UPDATE upload_sessions SET state = ${record.state}, record = ${record} WHERE id = ${record.id}`;
  }
}
