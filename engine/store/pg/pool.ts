// The connection pool to the PostgreSQL catalog, on `pg` (node-postgres; chosen by
// bench/pg-catalog.ts, docs/performance.md). Nothing outside this file imports the driver: the
// catalog writes its statements as tagged templates, sent as named prepared statements.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PG_CONNECT_TIMEOUT_MS, PG_KEEPALIVE_IDLE_MS, PG_LISTEN_PING_BOUND_MS, PG_LISTEN_PING_MS, PG_QUERY_TIMEOUT_MARGIN_MS } from '../../base/limits.js';
import { SvcError } from '../../base/errors.js';

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
  /**
   * Runs `work` in one transaction on one connection: committed if it resolves, rolled back if it
   * throws. `unbounded`: no statement timeout and no idle-in-transaction timeout (migrations and
   * `svc catalog rebuild`, whose statements may run long and which read the bucket between them).
   */
  begin<T>(work: (tx: PgSql) => Promise<T>, options?: { unbounded?: boolean }): Promise<T>;
  /** One connection of the pool for the caller alone (session state: advisory locks) until it releases it. */
  reserve(): Promise<Reserved>;
  /**
   * LISTENs on `channel` on a connection of its own (a pooled one would be handed to others and its
   * notifications lost), reopened `retryMs` after every loss until `close`. The connection's
   * application_name is `svc-listen:<channel>`, with `:<nodeId>` when the pool has a node id
   * (live nodes end the LISTEN connections of a node whose heartbeat expired: PgGcCatalog).
   * Every PG_LISTEN_PING_MS the pool sends the channel a ping that this connection must hear
   * within PG_LISTEN_PING_BOUND_MS, or it is closed and opened again: a half-open connection, or
   * one that falls behind, is replaced rather than left holding PostgreSQL's notification queue.
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
function sqlOn(target: pg.Pool | pg.PoolClient, queryTimeoutMs?: number): PgSql {
  // A checked-out client whose statement the client gave up on still has it in flight: it must be
  // closed at its release, not handed to the next caller behind the unanswered statement.
  const failed = (err: unknown): never => {
    if (target instanceof pg.Pool || !isReadTimeout(err)) return asUnavailable(err);
    timedOut.add(target);
    return asUnavailable(err);
  };
  const sql = async <T extends readonly object[]>(strings: TemplateStringsArray, ...values: unknown[]): Promise<T> => {
    const result = await target.query({ ...statementOf(strings), values, ...(queryTimeoutMs ? { query_timeout: queryTimeoutMs } : {}) } as pg.QueryConfig).catch(failed);
    return result.rows as unknown as T;
  };
  return Object.assign(sql, {
    async unsafe(text: string): Promise<void> {
      // No values: the simple protocol, which takes several statements.
      await target.query({ text, ...(queryTimeoutMs ? { query_timeout: queryTimeoutMs } : {}) } as pg.QueryConfig).catch(failed);
    },
  });
}

/** Clients whose statement the client side gave up on (pg's query_timeout): closed at release. */
const timedOut = new WeakSet<pg.PoolClient>();

const isReadTimeout = (err: unknown) => (err as Error | undefined)?.message === 'Query read timeout';

/** The client-side bound of an unbounded transaction's statements (pg cannot turn query_timeout off per query): about 24 days. */
const UNBOUNDED_MS = 2 ** 31 - 1;

// 57014: a statement cancelled (SVC_PG_STATEMENT_TIMEOUT); 25P03: a transaction idle past its timeout.
const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', '57P01', '57P02', '57P03', '53300', '57014', '25P03']);

/**
 * A query that failed because PostgreSQL cannot be reached (refused, reset, shut down, no
 * connection within the timeout, no answer within the statement timeout) is a 503
 * `catalog_unavailable`: the request is refused whole
 * (the statement either ran in its own transaction or not at all) and may be retried once
 * PostgreSQL is back; readiness says the same. Other errors pass through as they are. A
 * units-store commit whose connection is lost after it was sent may have landed: that one is
 * 503 `commit_unknown` (pg/unit-store.ts), safe to retry with its Idempotency-Key.
 */
export function asUnavailable(err: unknown): never {
  const e = err as { code?: string; message?: string };
  const connection =
    (e?.code !== undefined && (CONNECTION_CODES.has(e.code) || e.code.startsWith('08'))) ||
    /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout)/.test(e?.message ?? '');
  if (!connection) throw err;
  // The original stays as the cause: readiness and start-up put it in words (dependency-failure.ts).
  const unavailable = new SvcError('unavailable', 'catalog_unavailable', 'PostgreSQL (the catalog) is not answering; retry once it is back', { retryAfterSeconds: 5 });
  // As Error's own `cause` option makes it: not enumerable (never in a JSON of the error).
  Object.defineProperty(unavailable, 'cause', { value: err, enumerable: false, writable: true, configurable: true });
  throw unavailable;
}

export interface PoolOptions {
  /**
   * SVC_PG_STATEMENT_TIMEOUT: the server cancels a statement that runs longer (and ends a
   * transaction left idle as long); the client gives up PG_QUERY_TIMEOUT_MARGIN_MS later.
   */
  statementTimeoutMs?: number;
  /** This node's id, in the application_name of its LISTEN connections. */
  nodeId?: string;
}

/** The default of SVC_PG_STATEMENT_TIMEOUT (engine/base/config.ts), for pools opened by tools and tests. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 30_000;

/** Keepalive and timeouts every connection to PostgreSQL has, the LISTEN ones included. */
function connectionSettings(statementTimeoutMs: number): pg.ClientConfig {
  return {
    keepAlive: true,
    keepAliveInitialDelayMillis: PG_KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
    statement_timeout: statementTimeoutMs,
    idle_in_transaction_session_timeout: statementTimeoutMs,
    query_timeout: statementTimeoutMs + PG_QUERY_TIMEOUT_MARGIN_MS,
  };
}

export function openPool(url: string, poolSize: number, options: PoolOptions = {}): PgPool {
  const settings = connectionSettings(options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS);
  // pg's pipeline mode is off: every catalog operation is one statement on the connection it
  // checks out, so there is never a second query to write before the first one's answer.
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types, ...settings });
  // A connection that fails while idle is dropped from the pool (the next query opens another);
  // without a listener the error event would end the process. pg drops notices (the migration's
  // IF NOT EXISTS ones) unless a 'notice' listener is added: none is.
  pool.on('error', () => {});
  const clients = new Set<pg.PoolClient>();
  pool.on('connect', (client) => {
    clients.add(client);
    client.once('end', () => clients.delete(client));
  });
  const sql = sqlOn(pool);

  return Object.assign(sql, {
    async begin<T>(work: (tx: PgSql) => Promise<T>, txOptions: { unbounded?: boolean } = {}): Promise<T> {
      const client = await pool.connect().catch(asUnavailable);
      let broken: Error | undefined;
      // As in reserve: a connection that dies while the work awaits something else (the server
      // ends a transaction idle past its timeout) must not end the process; it is closed at release.
      const onError = (err: Error) => (broken ??= err);
      client.on('error', onError);
      try {
        await sqlOn(client).unsafe(txOptions.unbounded ? 'BEGIN; SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0' : 'BEGIN');
        const result = await work(sqlOn(client, txOptions.unbounded ? UNBOUNDED_MS : undefined));
        await sqlOn(client).unsafe('COMMIT');
        return result;
      } catch (err) {
        // A connection whose ROLLBACK fails is in an unknown state, and one with a statement still
        // in flight (the client gave up on it) would only queue the ROLLBACK behind it: closed, not reused.
        if (timedOut.has(client) || broken) broken ??= err as Error;
        else {
          await client.query('ROLLBACK').catch((rollbackErr: Error) => {
            broken = rollbackErr;
          });
        }
        throw err;
      } finally {
        client.removeListener('error', onError);
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
          client.release(failed ?? (timedOut.has(client) ? new Error('Query read timeout') : undefined));
        },
      });
    },
    listen(channel: string, handlers: ListenHandlers, retryMs = 1000): Listening {
      const name = options.nodeId ? `svc-listen:${channel}:${options.nodeId}` : `svc-listen:${channel}`;
      return listenOn({ connectionString: url, application_name: name, ...settings }, channel, handlers, retryMs, sql);
    },
    async end(endOptions: { timeout?: number } = {}): Promise<void> {
      const ended = pool.end();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), (endOptions.timeout ?? 5) * 1000);
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

/** The payloads of pings (PgPool.listen): every listener of the channel hears them and passes them over. */
const PING_PREFIX = 'svc-listen-ping:';

/**
 * PgPool.listen: one client at a time, replaced after each loss, and when it does not hear its
 * own ping in time (sent through `pool`, so that a stalled LISTEN connection cannot hide it).
 */
function listenOn(config: pg.ClientConfig, channel: string, handlers: ListenHandlers, retryMs: number, pool: PgSql): Listening {
  let closed = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  let reported = false;
  const me = `${PING_PREFIX}${randomUUID()}`;
  // The pings sent and not heard yet (at most a few: one each PG_LISTEN_PING_MS), by payload.
  const unheard = new Map<string, number>();
  let pings = 0;
  let drop: ((err: Error) => void) | undefined;
  const connect = async () => {
    retry = undefined;
    const attempt = new pg.Client(config);
    let lost = false;
    const onLost = (err: Error) => {
      if (lost) return;
      lost = true;
      if (client === attempt) {
        client = undefined;
        drop = undefined;
      }
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
      if (message.channel !== channel) return;
      const payload = message.payload ?? '';
      if (!payload.startsWith(PING_PREFIX)) handlers.onNotify(payload);
      else if (payload.startsWith(me)) unheard.delete(payload);
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
    drop = onLost;
    unheard.clear();
    reported = false;
    handlers.onListening();
  };
  const ping = async () => {
    if (!client || !drop) return;
    const now = Date.now();
    // A ping still being sent counts from Infinity: never late.
    for (const sentAt of unheard.values()) {
      if (now - sentAt < PG_LISTEN_PING_BOUND_MS) continue;
      drop(new Error(`the LISTEN connection did not hear its own notification within ${PG_LISTEN_PING_BOUND_MS} ms: replaced`));
      return;
    }
    const payload = `${me}:${++pings}`;
    const listening = client;
    // Waited for before the answer comes (the notification may arrive first). A ping the pool
    // could not send, or sent while the connection was replaced, says nothing of the one listening.
    // The bound counts from when PostgreSQL took the ping (a slow send is the pool's trouble).
    unheard.set(payload, Infinity);
    const sent = await pool`SELECT pg_notify(${channel}, ${payload})`.then(() => true, () => false);
    if (!sent || client !== listening) unheard.delete(payload);
    else if (unheard.has(payload)) unheard.set(payload, Date.now());
  };
  const pinging = setInterval(() => void ping(), PG_LISTEN_PING_MS);
  pinging.unref();
  void connect();
  return {
    async close() {
      closed = true;
      clearInterval(pinging);
      clearTimeout(retry);
      const open = client;
      client = undefined;
      await open?.end().catch(() => {});
    },
  };
}
