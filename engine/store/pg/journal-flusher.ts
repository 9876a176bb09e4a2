// Moves the catalog's journal entries (journal_outbox, written by svc_publish and svc_remove in
// their own transactions) to segments in the bucket. Every node runs one; a flush locks the rows
// it takes (SKIP LOCKED: nodes never write the same entries at once), writes them as one segment
// and deletes them in the same transaction, so an entry leaves the catalog only once it is in the
// bucket. A node that dies mid-flush leaves its rows to the next flush (possibly a second segment
// with the same entries: the rebuild keeps one per number). The catalog nudges the flusher after
// each commit that journaled; the flush starts GATHER_MS later, so that the publications of that
// time share its segment (a PUT costs svc about 1.5 ms of CPU in the SDK: one per publication
// would double a small upload's cost), and a flush that found a full group goes on at once.
import type { CatalogJournal, Holding, JournalRecord } from '../catalog-journal.js';
import { formatContentId } from '../../base/content-id.js';
import type { PgPool } from './pool.js';

/** Entries per segment. */
const GROUP = 1000;
/** How long a nudge waits for more entries before the flush. */
const GATHER_MS = 50;
/** How often an idle flusher looks anyway (entries of a node that died before its nudge). */
const IDLE_MS = 1000;

interface OutboxRow {
  seq: number;
  op: 'put' | 'remove';
  tenant: string;
  hex: Buffer;
  size: number;
  createdAt: number | null;
  mediaType: string | null;
  chunker: string | null;
  refs: Buffer | null;
  sizes: Buffer | null;
  inline: Buffer | null;
  claims: boolean | null;
}

export class JournalFlusher {
  private running?: Promise<void>;
  private again = false;
  private idle?: NodeJS.Timeout;
  private gathering?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly sql: PgPool,
    private readonly journal: CatalogJournal,
    private readonly onError: (err: unknown) => void,
  ) {
    this.schedule();
  }

  /** Entries were committed: flush soon (after GATHER_MS, or after the flush in progress). */
  nudge(): void {
    if (this.closed || this.gathering) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.gathering = setTimeout(() => {
      this.gathering = undefined;
      this.flushNow();
    }, GATHER_MS);
    this.gathering.unref();
  }

  private flushNow(): void {
    if (this.closed || this.running) return;
    this.running = this.loop().finally(() => {
      this.running = undefined;
      this.schedule();
      // Entries committed during the flush gather for the next one.
      if (this.again) {
        this.again = false;
        this.nudge();
      }
    });
  }

  /** Stops, after one last flush of what is waiting (bounded: one flush). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    clearTimeout(this.gathering);
    await this.running;
    await this.flushOnce().catch(this.onError);
  }

  private schedule(): void {
    clearTimeout(this.idle);
    if (this.closed) return;
    this.idle = setTimeout(() => this.flushNow(), IDLE_MS);
    this.idle.unref();
  }

  private async loop(): Promise<void> {
    for (;;) {
      let taken: number;
      try {
        taken = await this.flushOnce();
      } catch (err) {
        // The entries stay in the catalog; the idle timer tries again.
        this.onError(err);
        return;
      }
      if (taken < GROUP) return;
    }
  }

  /** One segment: the oldest entries no other node is writing. Returns how many it took. */
  private flushOnce(): Promise<number> {
    return this.sql.begin(async (tx) => {
      const rows = await tx<OutboxRow[]>`
        SELECT seq, op, tenant, hex, size, created_at AS "createdAt", media_type AS "mediaType", chunker, refs, sizes, inline, claims
        FROM journal_outbox ORDER BY seq LIMIT ${GROUP} FOR UPDATE SKIP LOCKED`;
      if (rows.length === 0) return 0;
      await this.journal.write(rows.map(recordOf));
      await tx`DELETE FROM journal_outbox WHERE seq = ANY(${rows.map((r) => r.seq)}::int8[])`;
      return rows.length;
    });
  }
}

function recordOf(row: OutboxRow): JournalRecord {
  const id = formatContentId(row.hex.toString('hex'), row.size);
  if (row.op === 'remove') return { seq: row.seq, entry: { op: 'remove', tenant: row.tenant, id } };
  const holding: Holding = {
    tenant: row.tenant, id, size: row.size, mediaType: row.mediaType!, createdAt: row.createdAt!, chunker: row.chunker!, refs: row.refs!, sizes: row.sizes!,
    ...(row.inline ? { inline: row.inline } : {}),
    ...(row.claims ? { claims: true as const } : {}),
  };
  return { seq: row.seq, entry: { op: 'put', holding } };
}
