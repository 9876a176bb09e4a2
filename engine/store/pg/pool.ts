// The connection pool to the PostgreSQL catalog, on `pg` (node-postgres; chosen by
// bench/pg-catalog.ts, docs/performance.md). Nothing outside this file imports the driver: the
// catalog writes its statements as tagged templates, sent as named prepared statements.
import pg from 'pg';
import { SvcError } from '../../errors.js';

const INT8 = 20;

/**
 * bigint columns (sizes, sequences, times in ms) come back as numbers: every value is below 2^53.
 * Per pool, not pg.types.setTypeParser: that would change every other pg user in the process.
 */
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** A statement as a tagged template: `${}` values become parameters ($1...); the result is its rows. */
export interface PgSql {
  <T extends readonly object[] = Record<string, unknown>[]>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T>;
  /** Runs `text` as is (several statements, no parameters): for migrations. */
  unsafe(text: string): Promise<void>;
}

/** A connection kept by its caller (released with its failure, if it had one: the pool then drops it). */
export interface Reserved extends PgSql {
  release(): void;
}

/** A LISTEN of its own connection (PgPool.listen), until closed. */
export interface Listening {
  close(): Promise<void>;
}

export interface ListenHandlers {
  /** A notification on the channel, with its payload. */
  onNotify(payload: string): void;
  /**
   * LISTEN is in place, at first and after every reconnection: notifications sent while the
   * connection was down are lost, so the caller reads what it watches again.
   */
  onListening(): void;
  /**
   * The connection was lost or could not be opened; it is tried again after a pause. Said once
   * per loss: attempts that fail until LISTEN is in place again are not reported.
   */
  onLost(err: Error): void;
}

export interface PgPool extends PgSql {
  /** Runs `work` in one transaction on one connection: committed if it resolves, rolled back if it throws. */
  begin<T>(work: (tx: PgSql) => Promise<T>): Promise<T>;
  /** One connection of the pool for the caller alone (session state: advisory locks) until it releases it. */
  reserve(): Promise<Reserved>;
  /**
   * LISTENs on `channel` on a connection of its own (a pooled one would be handed to others and its
   * notifications lost), reopened `retryMs` after every loss until `close`. The connection's
   * application_name is `svc-listen:<channel>`.
   */
  listen(channel: string, handlers: ListenHandlers, retryMs?: number): Listening;
  /** Closes the pool; connections still busy after `timeout` seconds are cut. */
  end(options?: { timeout?: number }): Promise<void>;
}

/**
 * Each call site is a prepared statement of its own: a template's strings are one object per site
 * (ECMAScript caches them), so it names the statement, which each connection parses once and
 * then only binds. The set of names is the set of sites: bounded.
 */
const statements = new WeakMap<TemplateStringsArray, { name: string; text: string }>();
let named = 0;

function statementOf(strings: TemplateStringsArray): { name: string; text: string } {
  let statement = statements.get(strings);
  if (!statement) {
    statement = { name: `svc_${++named}`, text: strings.reduce((text, part, i) => `${text}$${i}${part}`) };
    statements.set(strings, statement);
  }
  return statement;
}

/**
 * Values are sent as pg prepares them: Buffers as bytea, numbers as text the server casts to the
 * parameter's type, arrays (of Buffers, of numbers) as array literals for bytea[] and int8[].
 */
function sqlOn(target: pg.Pool | pg.PoolClient): PgSql {
  const sql = async <T extends readonly object[]>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T> => {
    const result = await target.query({ ...statementOf(strings), values }).catch(asUnavailable);
    return result.rows as unknown as T;
  };
  return Object.assign(sql, {
    async unsafe(text: string): Promise<void> {
      await target.query(text).catch(asUnavailable); // no values: the simple protocol, which takes several statements
    },
  });
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', '57P01', '57P02', '57P03', '53300']);

/**
 * A query that failed because PostgreSQL cannot be reached (refused, reset, shut down, no
 * connection within the timeout) is a 503 `catalog_unavailable`: the request is refused whole
 * (the statement either ran in its own transaction or not at all) and may be retried once
 * PostgreSQL is back; readiness says the same. Other errors pass through as they are. A
 * units-store commit whose connection is lost after it was sent may have landed: that one is
 * 503 `commit_unknown` (pg/unit-store.ts), safe to retry with its Idempotency-Key.
 */
export function asUnavailable(err: unknown): never {
  const e = err as { code?: string; message?: string };
  const connection =
    (e?.code !== undefined && (CONNECTION_CODES.has(e.code) || e.code.startsWith('08'))) ||
    /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/.test(e?.message ?? '');
  if (!connection) throw err;
  // The original stays as the cause: readiness and start-up put it in words (dependency-failure.ts).
  const unavailable = new SvcError('unavailable', 'catalog_unavailable', 'PostgreSQL (the catalog) is not answering; retry once it is back', { retryAfterSeconds: 5 });
  // As Error's own `cause` option makes it: not enumerable (never in a JSON of the error).
  Object.defineProperty(unavailable, 'cause', { value: err, enumerable: false, writable: true, configurable: true });
  throw unavailable;
}

export function openPool(url: string, poolSize: number): PgPool {
  // pg's pipeline mode is off: every catalog operation is one statement on the connection it
  // checks out, so there is never a second query to write before the first one's answer.
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types, connectionTimeoutMillis: 10_000 });
  // A connection that fails while idle is dropped from the pool (the next query opens another);
  // without a listener the error event would end the process. pg drops notices (the migration's
  // IF NOT EXISTS ones) unless a 'notice' listener is added: none is.
  pool.on('error', () => {});
  const clients = new Set<pg.PoolClient>();
  pool.on('connect', (client) => {
    clients.add(client);
    client.once('end', () => clients.delete(client));
  });

  return Object.assign(sqlOn(pool), {
    async begin<T>(work: (tx: PgSql) => Promise<T>): Promise<T> {
      const client = await pool.connect().catch(asUnavailable);
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await work(sqlOn(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        // A connection whose ROLLBACK fails is in an unknown state: it is closed, not reused.
        await client.query('ROLLBACK').catch((rollbackErr: Error) => {
          broken = rollbackErr;
        });
        throw err;
      } finally {
        client.release(broken);
      }
    },
    async reserve(): Promise<Reserved> {
      const client = await pool.connect().catch(asUnavailable);
      // A checked-out client has no error listener of the pool's: without one, a connection that
      // dies between two statements would end the process.
      let failed: Error | undefined;
      const onError = (err: Error) => (failed ??= err);
      client.on('error', onError);
      return Object.assign(sqlOn(client), {
        release: () => {
          client.removeListener('error', onError);
          client.release(failed);
        },
      });
    },
    listen(channel: string, handlers: ListenHandlers, retryMs = 1000): Listening {
      return listenOn(url, channel, handlers, retryMs);
    },
    async end(options: { timeout?: number } = {}): Promise<void> {
      const ended = pool.end();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), (options.timeout ?? 5) * 1000);
      });
      // pool.end() waits for every checked-out connection to come back; cut the ones that do not.
      if ((await Promise.race([ended, late])) === 'late') {
        await Promise.all([...clients].map((client) => client.end().catch(() => {})));
        await ended;
      }
      clearTimeout(timer);
    },
  });
}

/** PgPool.listen: one client at a time, replaced after each loss. */
function listenOn(url: string, channel: string, handlers: ListenHandlers, retryMs: number): Listening {
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let reported = false;
  const connect = async () => {
    retry = undefined;
    const attempt = new pg.Client({ connectionString: url, application_name: `svc-listen:${channel}`, connectionTimeoutMillis: 10_000 });
    let lost = false;
    const onLost = (err: Error) => {
      if (lost) return;
      lost = true;
      if (client === attempt) client = undefined;
      attempt.end().catch(() => {});
      if (closed) return;
      if (!reported) handlers.onLost(err);
      reported = true;
      retry = setTimeout(() => void connect(), retryMs);
    };
    // A connection that dies while idle says so by 'error' or 'end'; without an 'error' listener
    // the event would end the process.
    attempt.on('error', onLost);
    attempt.on('end', () => onLost(new Error('the connection was closed')));
    attempt.on('notification', (message) => {
      if (message.channel === channel) handlers.onNotify(message.payload ?? '');
    });
    try {
      await attempt.connect();
      await attempt.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (closed) {
      await attempt.end().catch(() => {});
      return;
    }
    client = attempt;
    reported = false;
    handlers.onListening();
  };
  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      const open = client;
      client = undefined;
      await open?.end().catch(() => {});
    },
  };
}
