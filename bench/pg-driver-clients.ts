/**
 * The catalog-shaped operations of bench/pg-driver.ts, written once per driver the way svc's
 * catalog would use each one: prepared statements (postgres: automatic; pg: named queries), and
 * the publication's statements pipelined on the transaction's connection where the driver can.
 */
import pg from 'pg';
import postgres from 'postgres';

export const SCHEMA = `
  CREATE TABLE blocks (key bytea PRIMARY KEY, size integer NOT NULL, locator bytea NOT NULL, touched_at bigint NOT NULL);
  CREATE TABLE manifests (id bytea PRIMARY KEY, size bigint NOT NULL, media_type text NOT NULL, blocks bytea NOT NULL);
  CREATE TABLE inventory (tenant text NOT NULL, seq bigint GENERATED ALWAYS AS IDENTITY, id bytea NOT NULL, size bigint NOT NULL,
                          PRIMARY KEY (tenant, seq));`;

/** Preloaded rows, generated server-side: block keys are sha256(int8send(g)), see blockKey(). */
export function preloadSql(blocks: number, inventoryRows: number, tenants: number): string {
  return `
    INSERT INTO blocks SELECT sha256(int8send(g)), 1048576, decode(repeat(md5(g::text), 13), 'hex'), 0 FROM generate_series(1, ${blocks}) g;
    INSERT INTO inventory (tenant, id, size) SELECT 't' || (g % ${tenants}), sha256(int8send(-g)), g FROM generate_series(1, ${inventoryRows}) g;`;
}

export type Publication = {
  id: Buffer;
  size: number;
  mediaType: string;
  blockList: Buffer; // ~2 KB
  blockKeys: Buffer[]; // sorted: concurrent publications lock rows in one order (no deadlocks)
  tenant: string;
};

export interface CatalogClient {
  readonly name: string;
  /** A block row by its 32-byte key; returns its locator's length. */
  lookup(key: Buffer): Promise<number>;
  /** Manifest + one upsert statement per block + inventory row, one transaction. */
  publish(p: Publication): Promise<void>;
  /** The same with the 32 upserts as one statement over unnest() arrays. */
  publishBatched(p: Publication): Promise<void>;
  /** One page of a tenant's inventory below `before`; returns the row count. */
  page(tenant: string, before: number): Promise<number>;
  close(): Promise<void>;
}

const LOOKUP = 'SELECT key, size, locator, touched_at FROM blocks WHERE key = $1';
const INSERT_MANIFEST = 'INSERT INTO manifests (id, size, media_type, blocks) VALUES ($1, $2, $3, $4)';
const UPSERT_BLOCK = 'INSERT INTO blocks (key, size, locator, touched_at) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO UPDATE SET touched_at = EXCLUDED.touched_at';
const UPSERT_BLOCKS = `INSERT INTO blocks (key, size, locator, touched_at)
  SELECT k, 1048576, '\\x00'::bytea, $2 FROM unnest($1::bytea[]) AS k ON CONFLICT (key) DO UPDATE SET touched_at = EXCLUDED.touched_at`;
const INSERT_INVENTORY = 'INSERT INTO inventory (tenant, id, size) VALUES ($1, $2, $3)';
const PAGE = 'SELECT seq, id, size FROM inventory WHERE tenant = $1 AND seq < $2 ORDER BY seq DESC LIMIT 100';
const BLOCK_LOCATOR = Buffer.alloc(8); // a new block's locator: pack id + offset, small

/** `postgres` (porsager): prepares every query, pipelines queries issued together on a connection. */
export function postgresJsClient(url: string, pool: number): CatalogClient {
  const sql = postgres(url, { max: pool, prepare: true, onnotice: () => {} });
  return {
    name: 'postgres',
    async lookup(key) {
      const rows = await sql.unsafe(LOOKUP, [key], { prepare: true });
      return (rows[0]!.locator as Buffer).length;
    },
    async publish(p) {
      const now = Date.now();
      await sql.begin((tx) => [
        tx.unsafe(INSERT_MANIFEST, [p.id, p.size, p.mediaType, p.blockList], { prepare: true }),
        ...p.blockKeys.map((key) => tx.unsafe(UPSERT_BLOCK, [key, 1048576, BLOCK_LOCATOR, now], { prepare: true })),
        tx.unsafe(INSERT_INVENTORY, [p.tenant, p.id, p.size], { prepare: true }),
      ]);
    },
    async publishBatched(p) {
      const now = Date.now();
      await sql.begin((tx) => [
        tx.unsafe(INSERT_MANIFEST, [p.id, p.size, p.mediaType, p.blockList], { prepare: true }),
        tx.unsafe(UPSERT_BLOCKS, [sql.array(p.blockKeys), now], { prepare: true }),
        tx.unsafe(INSERT_INVENTORY, [p.tenant, p.id, p.size], { prepare: true }),
      ]);
    },
    async page(tenant, before) {
      return (await sql.unsafe(PAGE, [tenant, before], { prepare: true })).length;
    },
    async close() {
      await sql.end({ timeout: 5 });
    },
  };
}

/**
 * `pg` (node-postgres): named queries are prepared once per connection. With `pipeline: true`
 * (pg >= 8.20) a client writes queued queries without waiting for each answer; without it the
 * publication's statements go one round trip each, as pg code normally awaits them.
 */
export function pgClient(url: string, pool: number, pipeline: boolean): CatalogClient {
  const pgPool = new pg.Pool({ connectionString: url, max: pool, pipeline });
  pgPool.on('error', (err) => console.error(`pg: idle connection failed: ${err.message}`)); // else it throws
  const named = (name: string, text: string, values: unknown[]) => ({ name, text, values });
  const inTransaction = async (work: (client: pg.PoolClient) => Promise<unknown>) => {
    const client = await pgPool.connect();
    try {
      await client.query('BEGIN');
      await work(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  };
  // Pipelined: issue everything, then await; otherwise one statement at a time.
  const all = async (client: pg.PoolClient, queries: Array<{ name: string; text: string; values: unknown[] }>) => {
    if (pipeline) await Promise.all(queries.map((q) => client.query(q)));
    else for (const q of queries) await client.query(q);
  };
  return {
    name: pipeline ? 'pg (pipeline)' : 'pg',
    async lookup(key) {
      const res = await pgPool.query(named('lookup', LOOKUP, [key]));
      return (res.rows[0].locator as Buffer).length;
    },
    async publish(p) {
      const now = Date.now();
      await inTransaction((client) => all(client, [
        named('insert_manifest', INSERT_MANIFEST, [p.id, p.size, p.mediaType, p.blockList]),
        ...p.blockKeys.map((key) => named('upsert_block', UPSERT_BLOCK, [key, 1048576, BLOCK_LOCATOR, now])),
        named('insert_inventory', INSERT_INVENTORY, [p.tenant, p.id, p.size]),
      ]));
    },
    async publishBatched(p) {
      const now = Date.now();
      await inTransaction((client) => all(client, [
        named('insert_manifest', INSERT_MANIFEST, [p.id, p.size, p.mediaType, p.blockList]),
        named('upsert_blocks', UPSERT_BLOCKS, [p.blockKeys, now]),
        named('insert_inventory', INSERT_INVENTORY, [p.tenant, p.id, p.size]),
      ]));
    },
    async page(tenant, before) {
      return (await pgPool.query(named('page', PAGE, [tenant, before]))).rowCount ?? 0;
    },
    async close() {
      await pgPool.end();
    },
  };
}
