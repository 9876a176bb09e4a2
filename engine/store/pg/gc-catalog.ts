// The shared catalog's side of garbage collection in PostgreSQL (engine/store/shared-gc-catalog.ts).
// Block records move live → quarantined (unstamped while their bytes move, then stamped) →
// removed; a publication that references a quarantined block makes it live again
// (svc_record_blocks), and so does a run that finds it marked.
import type { ClusterNode, ForgetOutcome, KeyedBlock, NodeRecord, SharedGcCatalog } from '../shared-gc-catalog.js';
import type { PgPool } from './pool.js';
import { MODELS_CHANNEL } from './model-registry.js';
import { UNITS_CHANNEL } from './unit-store.js';

/** The advisory lock key of a GC run (one at a time across nodes). */
const GC_LOCK = 'svc_gc';

export class PgGcCatalog implements SharedGcCatalog {
  constructor(private readonly sql: PgPool) {}

  async lock(): Promise<{ release(): Promise<void> } | undefined> {
    // A session lock on a connection of its own: released by unlock, or by the server when the
    // holder's connection dies with its node.
    const reserved = await this.sql.reserve();
    try {
      const [row] = await reserved<{ locked: boolean }[]>`SELECT pg_try_advisory_lock(hashtext(${GC_LOCK})) AS locked`;
      if (!row?.locked) {
        reserved.release();
        return undefined;
      }
    } catch (err) {
      reserved.release();
      throw err;
    }
    return {
      release: async () => {
        try {
          await reserved`SELECT pg_advisory_unlock(hashtext(${GC_LOCK}))`;
        } finally {
          reserved.release();
        }
      },
    };
  }

  /** Every published manifest's blocks and every live resumable session's. */
  async markManifests(): Promise<number> {
    await this.sql`TRUNCATE gc_marks`;
    // A manifest's refs are 40-byte entries: the block's SHA-256 (32 bytes), then its xxh64.
    const [row] = await this.sql<{ n: number }[]>`
      WITH inserted AS (
        INSERT INTO gc_marks (key)
        SELECT substring(m.refs FROM i * 40 + 1 FOR 32)
        FROM manifests m CROSS JOIN LATERAL generate_series(0, length(m.refs) / 40 - 1) AS i
        WHERE NOT m.inline
        ON CONFLICT DO NOTHING
        RETURNING 1)
      SELECT count(*)::int8 AS n FROM inserted`;
    // Blocks of resumable sessions that may still commit, from every node: a part's blocks are
    // packed 45 bytes each, the SHA-256 first.
    const [sessions] = await this.sql<{ n: number }[]>`
      WITH inserted AS (
        INSERT INTO gc_marks (key)
        SELECT substring(p.blocks FROM i * 45 + 1 FOR 32)
        FROM upload_parts p JOIN upload_sessions s ON s.id = p.session_id
        CROSS JOIN LATERAL generate_series(0, length(p.blocks) / 45 - 1) AS i
        WHERE s.state IN ('Open', 'Committing')
        ON CONFLICT DO NOTHING
        RETURNING 1)
      SELECT count(*)::int8 AS n FROM inserted`;
    return row!.n + sessions!.n;
  }

  async mark(keys: readonly Buffer[]): Promise<void> {
    if (keys.length === 0) return;
    await this.sql`INSERT INTO gc_marks (key) SELECT unnest(${[...keys]}::bytea[]) ON CONFLICT DO NOTHING`;
  }

  async markedCount(): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`SELECT count(*)::int8 AS n FROM gc_marks`;
    return row!.n;
  }

  async clearMarks(): Promise<void> {
    await this.sql`TRUNCATE gc_marks`;
  }

  async candidates(before: number, limit: number, after?: Buffer): Promise<KeyedBlock[]> {
    const from = after ?? Buffer.alloc(0);
    return this.sql<KeyedBlock[]>`
      SELECT b.key, b.size FROM blocks b
      WHERE b.state = 'live' AND b.key > ${from} AND greatest(b.created_at, b.touched_at) < ${before}
        AND NOT EXISTS (SELECT 1 FROM gc_marks g WHERE g.key = b.key)
      ORDER BY b.key LIMIT ${limit}`;
  }

  async beginQuarantine(keys: readonly Buffer[], before: number): Promise<KeyedBlock[]> {
    if (keys.length === 0) return [];
    return this.sql.begin(async (tx) => {
      const changed = await tx<KeyedBlock[]>`
        UPDATE blocks b SET state = 'quarantined', quarantined_at = NULL
        WHERE b.key = ANY(${[...keys]}::bytea[]) AND b.state = 'live'
          AND greatest(b.created_at, b.touched_at) < ${before}
          AND NOT EXISTS (SELECT 1 FROM gc_marks g WHERE g.key = b.key)
        RETURNING b.key, b.size`;
      const bytes = changed.reduce((n, b) => n + b.size, 0);
      if (changed.length) await tx`SELECT svc_add_totals(0, ${-changed.length}, ${-bytes})`;
      return [...changed];
    });
  }

  async stampQuarantined(keys?: readonly Buffer[]): Promise<void> {
    const now = await this.now();
    if (keys === undefined) {
      await this.sql`UPDATE blocks SET quarantined_at = ${now} WHERE state = 'quarantined' AND quarantined_at IS NULL`;
    } else if (keys.length) {
      await this.sql`UPDATE blocks SET quarantined_at = ${now}
        WHERE key = ANY(${[...keys]}::bytea[]) AND state = 'quarantined' AND quarantined_at IS NULL`;
    }
  }

  async reviveMarked(limit: number): Promise<KeyedBlock[]> {
    return this.sql.begin(async (tx) => {
      const revived = await tx<KeyedBlock[]>`
        UPDATE blocks b SET state = 'live', quarantined_at = NULL, touched_at = svc_now_ms()
        WHERE b.key IN (
          SELECT q.key FROM blocks q JOIN gc_marks g ON g.key = q.key
          WHERE q.state = 'quarantined' ORDER BY q.key LIMIT ${limit} FOR UPDATE OF q)
        RETURNING b.key, b.size`;
      const bytes = revived.reduce((n, b) => n + b.size, 0);
      if (revived.length) await tx`SELECT svc_add_totals(0, ${revived.length}, ${bytes})`;
      return [...revived];
    });
  }

  async countPurgeable(stampedBefore: number): Promise<{ count: number; bytes: number }> {
    const [row] = await this.sql<{ count: number; bytes: number }[]>`
      SELECT count(*)::int8 AS count, coalesce(sum(q.size), 0)::int8 AS bytes FROM blocks q
      WHERE q.state = 'quarantined' AND q.quarantined_at IS NOT NULL AND q.quarantined_at < ${stampedBefore}
        AND NOT EXISTS (SELECT 1 FROM gc_marks g WHERE g.key = q.key)`;
    return row!;
  }

  async takePurgeable(stampedBefore: number, limit: number): Promise<KeyedBlock[]> {
    return this.sql<KeyedBlock[]>`
      DELETE FROM blocks b WHERE b.key IN (
        SELECT q.key FROM blocks q
        WHERE q.state = 'quarantined' AND q.quarantined_at IS NOT NULL AND q.quarantined_at < ${stampedBefore}
          AND NOT EXISTS (SELECT 1 FROM gc_marks g WHERE g.key = q.key)
        ORDER BY q.key LIMIT ${limit} FOR UPDATE OF q SKIP LOCKED)
      AND b.state = 'quarantined'
      RETURNING b.key, b.size`;
  }

  async markedAmong(keys: readonly Buffer[]): Promise<Set<string>> {
    if (keys.length === 0) return new Set();
    const rows = await this.sql<{ key: Buffer }[]>`SELECT key FROM gc_marks WHERE key = ANY(${[...keys]}::bytea[])`;
    return new Set(rows.map((r) => r.key.toString('hex')));
  }

  async states(keys: readonly Buffer[]): Promise<Map<string, 'live' | 'quarantined'>> {
    const out = new Map<string, 'live' | 'quarantined'>();
    if (keys.length === 0) return out;
    const rows = await this.sql<{ key: Buffer; state: 'live' | 'quarantined' }[]>`
      SELECT key, state FROM blocks WHERE key = ANY(${[...keys]}::bytea[])`;
    for (const r of rows) out.set(r.key.toString('hex'), r.state);
    return out;
  }

  async quarantinedCount(): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`SELECT count(*)::int8 AS n FROM blocks WHERE state = 'quarantined'`;
    return row!.n;
  }

  async saveRun(runId: string, report: unknown, keep: number): Promise<void> {
    await this.sql.begin(async (tx) => {
      await tx`INSERT INTO gc_runs (run_id, finished_at, report) VALUES (${runId}, svc_now_ms(), ${JSON.stringify(report)}::jsonb)
        ON CONFLICT (run_id) DO UPDATE SET report = excluded.report, finished_at = excluded.finished_at`;
      await tx`DELETE FROM gc_runs WHERE run_id NOT IN (SELECT run_id FROM gc_runs ORDER BY finished_at DESC LIMIT ${keep})`;
    });
  }

  async lastRun<R>(): Promise<R | undefined> {
    const [row] = await this.sql<{ report: R }[]>`SELECT report FROM gc_runs ORDER BY finished_at DESC LIMIT 1`;
    return row?.report;
  }

  async heartbeat(nodeId: string, address: string, oldestIngestAgeMs: number | null, summary?: Record<string, unknown>): Promise<{ markEpoch?: number }> {
    const said = summary === undefined ? null : JSON.stringify(summary);
    const [row] = await this.sql<{ epoch: number }[]>`
      WITH beat AS (
        INSERT INTO nodes (node_id, address, last_seen_at, oldest_ingest_at, summary)
        VALUES (${nodeId}, ${address}, svc_now_ms(), CASE WHEN ${oldestIngestAgeMs}::int8 IS NULL THEN NULL ELSE svc_now_ms() - ${oldestIngestAgeMs}::int8 END, ${said}::jsonb)
        ON CONFLICT (node_id) DO UPDATE SET address = excluded.address, last_seen_at = excluded.last_seen_at, oldest_ingest_at = excluded.oldest_ingest_at, summary = excluded.summary
        RETURNING marked_epoch)
      SELECT g.epoch FROM gc_marking g, beat WHERE g.open AND beat.marked_epoch < g.epoch`;
    return row ? { markEpoch: row.epoch } : {};
  }

  async endListenersOfDownNodes(ttlMs: number): Promise<number> {
    // A LISTEN connection is named svc-listen:<channel>:<nodeId> (pool.ts), cut at PostgreSQL's 63
    // bytes. Only the LISTEN ones: a down node's pool connections hold nothing (a transaction
    // left open ends at the idle-in-transaction timeout), and one whose heartbeat merely
    // lagged keeps its requests; its LISTEN connection is opened again at once.
    const [row] = await this.sql<{ n: number }[]>`
      SELECT count(*) FILTER (WHERE pg_terminate_backend(a.pid))::int8 AS n
      FROM pg_stat_activity a JOIN nodes n
        ON a.application_name IN (left('svc-listen:' || ${UNITS_CHANNEL}::text || ':' || n.node_id, 63), left('svc-listen:' || ${MODELS_CHANNEL}::text || ':' || n.node_id, 63))
      WHERE a.datname = current_database() AND n.last_seen_at <= svc_now_ms() - ${ttlMs}::int8 AND a.pid <> pg_backend_pid()`;
    return row?.n ?? 0;
  }

  async openMarking(): Promise<number> {
    const [row] = await this.sql<{ epoch: number }[]>`UPDATE gc_marking SET epoch = epoch + 1, open = true RETURNING epoch`;
    return row!.epoch;
  }

  async closeMarking(epoch: number): Promise<void> {
    await this.sql`UPDATE gc_marking SET open = false WHERE epoch = ${epoch}`;
  }

  async markedBy(nodeId: string, epoch: number): Promise<void> {
    await this.sql`UPDATE nodes SET marked_epoch = greatest(marked_epoch, ${epoch}) WHERE node_id = ${nodeId}`;
  }

  async unmarkedNodes(epoch: number, ttlMs: number): Promise<string[]> {
    const rows = await this.sql<{ nodeId: string }[]>`
      SELECT node_id AS "nodeId" FROM nodes WHERE last_seen_at > svc_now_ms() - ${ttlMs} AND marked_epoch < ${epoch} ORDER BY node_id`;
    return rows.map((r) => r.nodeId);
  }

  async nodes(ttlMs: number): Promise<NodeRecord[]> {
    const rows = await this.sql<NodeRecord[]>`
      SELECT node_id AS "nodeId", address, last_seen_at AS "lastSeenAt", oldest_ingest_at AS "oldestIngestAt"
      FROM nodes WHERE last_seen_at > svc_now_ms() - ${ttlMs} ORDER BY node_id`;
    return [...rows];
  }

  async registerRootHolder(nodeId: string): Promise<{ forgottenAt?: number }> {
    return this.sql.begin(async (tx) => {
      const [prior] = await tx<{ forgottenAt: number | null }[]>`SELECT forgotten_at AS "forgottenAt" FROM nodes WHERE node_id = ${nodeId} FOR UPDATE`;
      // Before its first heartbeat the row is made here (the heartbeat fills in the address).
      await tx`
        INSERT INTO nodes (node_id, address, last_seen_at, oldest_ingest_at, root_holder_since)
        VALUES (${nodeId}, '', svc_now_ms(), NULL, svc_now_ms())
        ON CONFLICT (node_id) DO UPDATE SET root_holder_since = coalesce(nodes.root_holder_since, excluded.root_holder_since), forgotten_at = NULL`;
      return prior?.forgottenAt != null ? { forgottenAt: prior.forgottenAt } : {};
    });
  }

  async isRootHolder(nodeId: string): Promise<boolean> {
    const [row] = await this.sql<{ holder: boolean }[]>`SELECT root_holder_since IS NOT NULL AS holder FROM nodes WHERE node_id = ${nodeId}`;
    return row?.holder ?? false;
  }

  async rootHoldersUnmarked(epoch: number, ttlMs: number): Promise<ClusterNode[]> {
    const rows = await this.sql<ClusterRow[]>`
      SELECT node_id AS "nodeId", address, last_seen_at AS "lastSeenAt", last_seen_at > svc_now_ms() - ${ttlMs}::int8 AS live, root_holder_since AS "rootHolderSince"
      FROM nodes
      WHERE root_holder_since IS NOT NULL AND marked_epoch < ${epoch} ORDER BY node_id`;
    return rows.map(clusterNode);
  }

  async knownNodes(ttlMs: number): Promise<ClusterNode[]> {
    // A forgotten node shows again once it beats again.
    const rows = await this.sql<ClusterRow[]>`
      SELECT node_id AS "nodeId", address, last_seen_at AS "lastSeenAt", last_seen_at > svc_now_ms() - ${ttlMs}::int8 AS live, root_holder_since AS "rootHolderSince", summary
      FROM nodes
      WHERE forgotten_at IS NULL OR last_seen_at > forgotten_at ORDER BY node_id`;
    return rows.map(clusterNode);
  }

  async forgetNode(nodeId: string, ttlMs: number): Promise<ForgetOutcome> {
    return this.sql.begin(async (tx) => {
      // The row's lock orders this against the node's own heartbeat and registration.
      const [row] = await tx<(ClusterRow & { forgottenAt: number | null })[]>`
        SELECT node_id AS "nodeId", address, last_seen_at AS "lastSeenAt", last_seen_at > svc_now_ms() - ${ttlMs}::int8 AS live, root_holder_since AS "rootHolderSince",
          forgotten_at AS "forgottenAt" FROM nodes WHERE node_id = ${nodeId} FOR UPDATE`;
      if (!row || (row.forgottenAt !== null && row.lastSeenAt <= row.forgottenAt)) return { outcome: 'unknown' } as const;
      const node = clusterNode(row);
      if (node.live) return { outcome: 'live', node } as const;
      await tx`UPDATE nodes SET forgotten_at = svc_now_ms(), root_holder_since = NULL WHERE node_id = ${nodeId}`;
      return { outcome: 'forgotten', node } as const;
    });
  }

  async now(): Promise<number> {
    const [row] = await this.sql<{ now: number }[]>`SELECT svc_now_ms() AS now`;
    return row!.now;
  }
}

/** A node's row as knownNodes and forgetNode read it (liveness on the catalog's clock). */
interface ClusterRow {
  nodeId: string;
  address: string;
  lastSeenAt: number;
  live: boolean;
  rootHolderSince: number | null;
  summary?: Record<string, unknown> | null;
}

function clusterNode(row: ClusterRow): ClusterNode {
  const node: ClusterNode = { nodeId: row.nodeId, address: row.address, lastSeenAt: row.lastSeenAt, live: row.live };
  if (row.rootHolderSince !== null) node.rootHolderSince = row.rootHolderSince;
  if (row.summary) node.summary = row.summary;
  return node;
}
