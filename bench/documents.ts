/**
 * The document platform scenario (issue 5), on the real server in the same run:
 *
 * 1. Documents created per second. One document = `POST /v1/documents` (a small `initialMetadata`
 *    bundle validated by a schema registered here) + `PUT /v1/uploads/{id}/bytes` of 64 KiB
 *    (fresh random bytes per document: nothing deduplicates) + `POST /v1/uploads/{id}/finalize`,
 *    the three in sequence on one keep-alive connection per client; closed loop with 8, 16 and
 *    32 clients. The same-run reference, alternating with it at the same client counts: the same
 *    loop doing `POST /api/v1/blobs` of 64 KiB alone (the CAS ingest part of a document).
 * 2. Canonical metadata writes (`POST /v1/documents/{id}/metadata`, mode canonical: a new version
 *    each) spread round-robin over a pool of 200 finalized documents, 16 and 32 connections.
 * 3. `GET /v1/documents/{id}/metadata` over the same pool with 32 connections: p50/p99/max.
 *
 * Every request carries `Authorization: Bearer <token>` from `POST /dev/token`. Every answer's
 * status is checked (201/204/201, 201, 200); unexpected answers are counted over each whole cell
 * (warm-up and drain included) and any of them fails the scenario. CPU is % of one core over the
 * measured window (server: all its threads, /proc/<pid>/stat).
 */
import { randomFillSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type CpuReport, CpuWindow, ticksPerSecond } from './cpu.js';
import { type LatencySummary, type LoadResult, runLoad, summarize } from './load.js';
import { RawConnection, type RawResponse } from './raw-http.js';
import { type Results, type Target, f, ms, pct, renderErrors, renderHeader, renderServer, renderTargets } from './report.js';
import type { ServerProcess } from './server-process.js';

const KiB = 1024;
export const DOCUMENT_BYTES = 64 * KiB;
export const POOL_SIZE = 200;
const CREATE_CONNECTIONS = [8, 16, 32] as const;
const WRITE_CONNECTIONS = [16, 32] as const;
const READ_CONNECTIONS = 32;
const DOCS_PER_SECOND_TARGET = 1000;
/** Every request's own time limit: a stalled server fails the cell instead of hanging the bench. */
export const REQUEST_TIMEOUT_MS = 30_000;
export const NAMESPACE = 'urn:svc:bench-case';
export const SCHEMA_URN = 'urn:svc:schema:bench-case@1.0.0';
export const TENANT = 'bench';

export const SCHEMA = {
  schemaUrn: SCHEMA_URN,
  namespaceUrn: NAMESPACE,
  lifecycle: 'published',
  jsonSchema: {
    type: 'object',
    required: ['caseNumber', 'title'],
    additionalProperties: false,
    properties: {
      caseNumber: { type: 'string', pattern: '^C-[0-9]+$' },
      title: { type: 'string', minLength: 1, maxLength: 200 },
      pages: { type: 'integer', minimum: 1 },
      filedAt: { type: 'string', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' },
      court: { type: 'string' },
      tags: { type: 'array', items: { type: 'string' }, maxItems: 10 },
    },
  },
};

/** The `data` of the bench namespace for document / write `n`. */
export function caseData(n: number, court?: string) {
  return { caseNumber: `C-${n}`, title: `Benchmark filing ${n}`, pages: (n % 500) + 1, filedAt: '2026-11-21', ...(court ? { court } : {}), tags: ['bench', 'issue-5'] };
}

// ---------------------------------------------------------------------------------------------
// Requests (raw HTTP/1.1 bytes with the bearer token)

function head(method: string, target: string, auth: string, contentType: string | undefined, length: number): string {
  return `${method} ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}${contentType ? `Content-Type: ${contentType}\r\n` : ''}Content-Length: ${length}\r\n\r\n`;
}

export function jsonRequest(method: string, target: string, auth: string, body: unknown): Buffer {
  const bytes = Buffer.from(JSON.stringify(body), 'utf8');
  return Buffer.concat([Buffer.from(head(method, target, auth, 'application/json', bytes.length), 'latin1'), bytes]);
}

/** A request whose body is `bytes` fresh random bytes, written straight after the head (one allocation). */
export function randomBodyRequest(method: string, target: string, auth: string, contentType: string, bytes: number): Buffer {
  const h = head(method, target, auth, contentType, bytes);
  const buf = Buffer.allocUnsafe(h.length + bytes);
  buf.write(h, 0, 'latin1');
  randomFillSync(buf, h.length);
  return buf;
}

export function describe(res: RawResponse): string {
  return `HTTP ${res.status}${res.body?.length ? `: ${res.body.toString('utf8').slice(0, 300)}` : ''}`;
}

/** CPU seconds of the server's main thread (the event loop: uWS, JSON, tokens, LMDB calls), from /proc/<pid>/task/<pid>/stat. */
function mainThreadSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'latin1');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** The main thread's CPU over a window, % of one core. */
class MainThreadWindow {
  private readonly t0 = performance.now();
  private readonly cpu0: number | undefined;

  constructor(private readonly pid: number) {
    this.cpu0 = mainThreadSeconds(pid);
  }

  end(): number | undefined {
    const cpu1 = mainThreadSeconds(this.pid);
    return this.cpu0 === undefined || cpu1 === undefined ? undefined : ((cpu1 - this.cpu0) / ((performance.now() - this.t0) / 1000)) * 100;
  }
}

/** The body of `POST /v1/documents` for document `n`: an externalRef and an initialMetadata bundle. */
export const createBody = (n: number) => ({ externalRefs: [{ system: 'bench', value: `doc-${n}` }], initialMetadata: { namespaces: { [NAMESPACE]: { schema: SCHEMA_URN, data: caseData(n) } } } });

/** The body of canonical metadata write `n` (the namespace's data replaced: a new version). */
export const writeBody = (n: number) => ({ mode: 'canonical', reason: 'bench write', bundle: { namespaces: { [NAMESPACE]: { schema: SCHEMA_URN, data: caseData(1_000_000 + n, `Court ${n % 37}`) } } } });

/**
 * One document per call on `conn`: `POST /v1/documents` (createBody of `next()`), `PUT` of
 * DOCUMENT_BYTES fresh random bytes, `POST …/finalize`, each answer checked; the three steps'
 * times in the outcome. `onDocument` gets each finished document's id.
 */
export function makeDocumentIteration(auth: string, next: () => number, onDocument?: (id: string) => void): (conn: RawConnection) => Promise<Outcome> {
  const finalizeRequest = (uploadId: string) => jsonRequest('POST', `/v1/uploads/${uploadId}/finalize`, auth, { reason: 'bench' });
  return async (conn: RawConnection): Promise<Outcome> => {
    const n = next();
    const a = performance.now();
    const created = await conn.request(jsonRequest('POST', '/v1/documents', auth, createBody(n)), true, REQUEST_TIMEOUT_MS);
    if (created.status !== 201) return { ok: false, step: 'POST /v1/documents', detail: describe(created) };
    const { documentId, uploadId } = JSON.parse(created.body!.toString('utf8')) as { documentId?: string; uploadId?: string };
    if (typeof documentId !== 'string' || typeof uploadId !== 'string') return { ok: false, step: 'POST /v1/documents', detail: `201 without documentId/uploadId: ${created.body!.toString('utf8').slice(0, 300)}` };
    const bytes = randomBodyRequest('PUT', `/v1/uploads/${uploadId}/bytes`, auth, 'application/octet-stream', DOCUMENT_BYTES);
    const b = performance.now();
    const put = await conn.request(bytes, false, REQUEST_TIMEOUT_MS);
    if (put.status !== 204) return { ok: false, step: 'PUT bytes', detail: describe(put) };
    const c = performance.now();
    const fin = await conn.request(finalizeRequest(uploadId), true, REQUEST_TIMEOUT_MS);
    if (fin.status !== 201) return { ok: false, step: 'POST finalize', detail: describe(fin) };
    const key = (JSON.parse(fin.body!.toString('utf8')) as { contentRef?: { key?: string } }).contentRef?.key;
    if (typeof key !== 'string' || !key.startsWith('b3:')) return { ok: false, step: 'POST finalize', detail: `201 without a b3: contentRef: ${fin.body!.toString('utf8').slice(0, 300)}` };
    const d = performance.now();
    onDocument?.(documentId);
    return { ok: true, steps: [b - a, c - b, d - c] };
  };
}

// ---------------------------------------------------------------------------------------------
// A closed loop of multi-request iterations

export type Outcome = { ok: true; steps: number[] } | { ok: false; step: string; detail: string };

export interface LoopSpec {
  port: number;
  /** Client i connects to ports[i % ports.length] (several nodes); default [port]. */
  ports?: number[];
  /** The server process whose CPU (and main thread) the result reports. */
  server: Pick<ServerProcess, 'pid'>;
  /** Called at the start and at the end of the timed window (the caller's own CPU samples). */
  window?: { begin(): void; end(): void };
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Names of the timed steps an iteration reports (`steps` in its outcome). */
  stepNames: string[];
  /** One iteration on `conn`; throws on a connection failure or a timeout. */
  iteration: (conn: RawConnection) => Promise<Outcome>;
}

export interface StepLatency {
  step: string;
  p50Ms: number;
  p99Ms: number;
}

export interface LoopResult {
  connections: number;
  durationSeconds: number;
  /** Iterations completed (every answer as expected) inside the window. */
  completed: number;
  perSecond: number;
  /** Unexpected answers and connection failures over the whole cell (warm-up and drain included). */
  errors: number;
  errorsByStep: Record<string, number>;
  firstError?: string;
  /** Whole iteration: first request written → last answer read. */
  latency: LatencySummary;
  steps: StepLatency[];
  cpu: CpuReport;
  /** The server's main thread, % of one core over the window. */
  mainThreadPercent?: number;
  /** Server CPU-milliseconds (all threads) per completed iteration. */
  serverCpuMsPerItem?: number;
}

/**
 * `connections` clients, each running `iteration` back to back on its own keep-alive connection;
 * a warm-up, then a timed window. Iterations that complete inside the window count (rate and
 * latency); errors count over the whole cell. A client whose connection fails (or times out)
 * counts an error and reconnects; if the server no longer accepts connections the loop throws.
 */
export async function closedLoop(spec: LoopSpec): Promise<LoopResult> {
  const ports = spec.ports?.length ? spec.ports : [spec.port];
  const portOf = (i: number) => ports[i % ports.length]!;
  const conns = await Promise.all(Array.from({ length: spec.connections }, (_, i) => RawConnection.connect(portOf(i))));
  const latencies: number[] = [];
  const stepLatencies: number[][] = spec.stepNames.map(() => []);
  const errorsByStep: Record<string, number> = {};
  let errors = 0;
  let firstError: string | undefined;
  let completed = 0;
  let measuring = false;
  let stopping = false;
  let fatal: Error | undefined;
  let window: CpuWindow | undefined;
  let mainWindow: MainThreadWindow | undefined;
  let mainThreadPercent: number | undefined;
  let cpu: CpuReport = { benchPercent: NaN };
  let t0 = 0;
  let t1 = 0;
  const warm = setTimeout(() => {
    measuring = true;
    window = new CpuWindow(spec.server.pid);
    mainWindow = new MainThreadWindow(spec.server.pid);
    spec.window?.begin();
    t0 = performance.now();
  }, spec.warmupMs);
  const stop = setTimeout(() => {
    measuring = false;
    stopping = true;
    t1 = performance.now();
    spec.window?.end();
    if (window) cpu = window.end();
    mainThreadPercent = mainWindow?.end();
  }, spec.warmupMs + spec.durationMs);

  const client = async (i: number): Promise<void> => {
    while (!stopping && !fatal) {
      const started = performance.now();
      let outcome: Outcome;
      try {
        outcome = await spec.iteration(conns[i]!);
      } catch (err) {
        outcome = { ok: false, step: 'connection', detail: err instanceof Error ? err.message : String(err) };
        conns[i]!.close();
        try {
          conns[i] = await RawConnection.connect(portOf(i));
        } catch (again) {
          fatal = new Error(`${outcome.detail}; reconnecting failed: ${again instanceof Error ? again.message : String(again)}`);
        }
      }
      if (outcome.ok) {
        if (measuring) {
          completed++;
          latencies.push(performance.now() - started);
          outcome.steps.forEach((v, k) => stepLatencies[k]?.push(v));
        }
      } else {
        errors++;
        errorsByStep[outcome.step] = (errorsByStep[outcome.step] ?? 0) + 1;
        firstError ??= `${outcome.step}: ${outcome.detail}`;
      }
    }
  };
  try {
    await Promise.all(conns.map((_, i) => client(i)));
  } finally {
    clearTimeout(warm);
    clearTimeout(stop);
    for (const c of conns) c.close();
  }
  if (fatal) throw fatal;
  const seconds = (t1 - t0) / 1000;
  return {
    connections: spec.connections,
    durationSeconds: seconds,
    completed,
    perSecond: completed / seconds,
    errors,
    errorsByStep,
    firstError,
    latency: summarize(latencies),
    steps: spec.stepNames.map((step, k) => {
      const s = summarize(stepLatencies[k]!);
      return { step, p50Ms: s.p50Ms, p99Ms: s.p99Ms };
    }),
    cpu,
    mainThreadPercent,
    serverCpuMsPerItem: cpu.serverPercent === undefined || completed === 0 ? undefined : (cpu.serverPercent / 100) * seconds * 1000 / completed,
  };
}

// ---------------------------------------------------------------------------------------------
// Results

export interface RequestCell extends LoadResult {
  /** Unexpected answers over the whole cell (warm-up and drain included); `errors` is the window's. */
  errorsWholeCell: number;
  /** The server's main thread, % of one core from the end of the warm-up to the end of the load (the drain included: a few ms). */
  mainThreadPercent?: number;
  serverCpuMsPerRequest?: number;
}

export interface DocumentsResult {
  skipped?: string;
  /** Why the scenario stopped early (the cells before it are kept). */
  error?: string;
  durability: 'strict' | 'relaxed';
  quick: boolean;
  settings: { warmupMs: number; storeWarmupMs: number; createMs: number; writeMs: number; readMs: number };
  documentBytes: number;
  /** Size of a `POST /v1/documents` body (its initialMetadata bundle). */
  createBodyBytes?: number;
  writeBodyBytes?: number;
  schemaUrn: string;
  schemaStatus?: number;
  /**
   * The untimed document loop run before the cells (16 clients): a fresh store creates its block
   * partition directories (4,096) and the server's code is compiled; its rate is kept for the record.
   */
  storeWarmup?: LoopResult;
  /** Documents (create + bytes + finalize) and, alternating at the same client counts, 64 KiB blob uploads. */
  documents: LoopResult[];
  blobs: LoopResult[];
  poolSize: number;
  poolSeconds?: number;
  writes: RequestCell[];
  reads: RequestCell[];
  /** Unexpected answers over every phase (the pool's creation included). */
  totalErrors: number;
  targets: Target[];
}

export interface DocumentsOptions {
  server: ServerProcess;
  durability: 'strict' | 'relaxed';
  quick: boolean;
  progress: (msg: string) => void;
}

// ---------------------------------------------------------------------------------------------
// The scenario

/** Runs the scenario; a failure ends it (`error`; the cells so far are kept). */
export async function runDocuments(opts: DocumentsOptions): Promise<DocumentsResult> {
  const warmupMs = opts.quick ? 500 : 1000;
  const result: DocumentsResult = {
    durability: opts.durability,
    quick: opts.quick,
    settings: { warmupMs, storeWarmupMs: opts.quick ? 1500 : 3000, createMs: opts.quick ? 2000 : 5000, writeMs: opts.quick ? 2000 : 5000, readMs: opts.quick ? 2000 : 10_000 },
    documentBytes: DOCUMENT_BYTES,
    schemaUrn: SCHEMA_URN,
    documents: [],
    blobs: [],
    poolSize: POOL_SIZE,
    writes: [],
    reads: [],
    totalErrors: 0,
    targets: [],
  };
  try {
    await scenario(opts, result);
  } catch (err) {
    let message = err instanceof Error ? err.message : String(err);
    if (!opts.server.alive) message += `; ${opts.server.describeExit()}`;
    result.error = message;
  }
  result.totalErrors =
    (result.storeWarmup?.errors ?? 0) +
    result.documents.reduce((n, c) => n + c.errors, 0) + result.blobs.reduce((n, c) => n + c.errors, 0) + result.writes.reduce((n, c) => n + c.errorsWholeCell, 0) + result.reads.reduce((n, c) => n + c.errorsWholeCell, 0);
  result.targets = documentsTargets(result);
  return result;
}

async function scenario(opts: DocumentsOptions, result: DocumentsResult): Promise<void> {
  const server = opts.server;
  const port = server.port;
  const { warmupMs } = result.settings;
  const once = async (request: Buffer, what: string, expect: number[]): Promise<RawResponse> => {
    const res = await RawConnection.requestOnce(port, request, REQUEST_TIMEOUT_MS);
    if (!expect.includes(res.status)) throw new Error(`${what} answered ${describe(res)}`);
    return res;
  };

  // A token with every capability, then the schema.
  const tokenRes = await once(jsonRequest('POST', '/dev/token', '', { org_id: TENANT, sub: 'bench', roles: ['clerk'], ttl_seconds: 3600 }), 'POST /dev/token', [200]);
  const token = (JSON.parse(tokenRes.body!.toString('utf8')) as { access_token?: string }).access_token;
  if (typeof token !== 'string') throw new Error(`POST /dev/token answered no access_token: ${tokenRes.body!.toString('utf8').slice(0, 300)}`);
  const auth = `Authorization: Bearer ${token}\r\n`;
  const schemaRes = await once(jsonRequest('POST', '/v1/schemas', auth, SCHEMA), 'POST /v1/schemas', [200, 201]);
  result.schemaStatus = schemaRes.status;

  let seq = 0;
  result.createBodyBytes = Buffer.byteLength(JSON.stringify(createBody(100_000)));

  /** One document: create, bytes, finalize; `onDocument` gets its id. */
  const documentIteration = (onDocument?: (id: string) => void) => makeDocumentIteration(auth, () => seq++, onDocument);
  const blobIteration = async (conn: RawConnection): Promise<Outcome> => {
    const res = await conn.request(randomBodyRequest('POST', '/api/v1/blobs', '', 'application/octet-stream', DOCUMENT_BYTES), false, REQUEST_TIMEOUT_MS);
    if (res.status !== 201) return { ok: false, step: 'POST /api/v1/blobs', detail: describe(res) };
    return { ok: true, steps: [] };
  };

  // A first document by hand: the whole path answers before anything is timed.
  {
    const conn = await RawConnection.connect(port);
    try {
      const first = await documentIteration()(conn);
      if (!first.ok) throw new Error(`the first document failed at ${first.step}: ${first.detail}`);
    } finally {
      conn.close();
    }
  }

  // Warm-up of the store and the code: on a fresh data directory the first few thousand blocks
  // each create a partition directory, and the document routes are not compiled yet.
  opts.progress(`documents: warm-up, the document loop with 16 clients for ${result.settings.storeWarmupMs / 1000} s (not counted)`);
  result.storeWarmup = await closedLoop({ port, server, connections: 16, warmupMs: 0, durationMs: result.settings.storeWarmupMs, stepNames: ['POST /v1/documents', 'PUT bytes', 'POST finalize'], iteration: documentIteration() });
  opts.progress(`documents: warm-up: ${f(result.storeWarmup.perSecond)} documents/s, ${result.storeWarmup.errors} error(s)`);

  // 1. Documents per second, alternating with the 64 KiB blob reference at the same client counts.
  for (const connections of CREATE_CONNECTIONS) {
    opts.progress(`documents: create + PUT ${DOCUMENT_BYTES / KiB} KiB + finalize, ${connections} clients, ${result.settings.createMs / 1000} s`);
    const docs = await closedLoop({ port, server, connections, warmupMs, durationMs: result.settings.createMs, stepNames: ['POST /v1/documents', 'PUT bytes', 'POST finalize'], iteration: documentIteration() });
    result.documents.push(docs);
    opts.progress(`documents: ${connections} clients: ${f(docs.perSecond)} documents/s, p50 ${ms(docs.latency.p50Ms)}, p99 ${ms(docs.latency.p99Ms)}, server ${pct(docs.cpu.serverPercent)} (main thread ${pct(docs.mainThreadPercent)}), other ${pct(docs.cpu.otherPercent)}, ${docs.errors} error(s)`);
    opts.progress(`documents: reference, POST /api/v1/blobs of ${DOCUMENT_BYTES / KiB} KiB, ${connections} clients, ${result.settings.createMs / 1000} s`);
    const blobs = await closedLoop({ port, server, connections, warmupMs, durationMs: result.settings.createMs, stepNames: [], iteration: blobIteration });
    result.blobs.push(blobs);
    opts.progress(`documents: reference ${connections} clients: ${f(blobs.perSecond)} blobs/s, p50 ${ms(blobs.latency.p50Ms)}, server ${pct(blobs.cpu.serverPercent)} (main thread ${pct(blobs.mainThreadPercent)}), ${blobs.errors} error(s)`);
  }

  // The pool for metadata writes and reads: POOL_SIZE finalized documents (16 clients, untimed).
  opts.progress(`documents: creating a pool of ${POOL_SIZE} documents`);
  const pool: string[] = [];
  {
    const t = performance.now();
    const conns = await Promise.all(Array.from({ length: 16 }, () => RawConnection.connect(port)));
    try {
      const make = documentIteration((id) => pool.push(id));
      await Promise.all(
        conns.map(async (conn) => {
          while (pool.length < POOL_SIZE) {
            const o = await make(conn);
            if (!o.ok) throw new Error(`creating the pool: ${o.step} answered ${o.detail}`);
          }
        }),
      );
    } finally {
      for (const c of conns) c.close();
    }
    pool.length = POOL_SIZE;
    result.poolSeconds = (performance.now() - t) / 1000;
  }

  // One write and its read back, checked, before the timed cells.
  let writeSeq = 0;
  const writeRequest = (id: string) => jsonRequest('POST', `/v1/documents/${id}/metadata`, auth, writeBody(writeSeq++));
  result.writeBodyBytes = Buffer.byteLength(JSON.stringify(writeBody(100_000)));
  {
    await once(writeRequest(pool[0]!), `POST /v1/documents/${pool[0]}/metadata (canonical)`, [201]);
    const read = await once(Buffer.from(`GET /v1/documents/${pool[0]}/metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n`, 'latin1'), `GET /v1/documents/${pool[0]}/metadata`, [200]);
    const got = JSON.parse(read.body!.toString('utf8')) as { namespaces?: Record<string, { schema?: string; data?: { caseNumber?: string }; mode?: string }> };
    const entry = got.namespaces?.[NAMESPACE];
    if (entry?.schema !== SCHEMA_URN || entry.data?.caseNumber !== 'C-1000000' || entry.mode !== 'canonical') {
      throw new Error(`GET metadata after a canonical write answered ${read.body!.toString('utf8').slice(0, 400)}; expected ${NAMESPACE} with caseNumber C-1000000, mode canonical`);
    }
  }

  /** runLoad over the pool (round-robin), with unexpected answers counted over the whole cell. */
  const poolLoad = async (connections: number, durationMs: number, build: (id: string) => Buffer | string, expectStatus: number): Promise<RequestCell> => {
    let sent = 0;
    let ok = 0;
    let next = 0;
    let mainWindow: MainThreadWindow | undefined;
    const warm = setTimeout(() => {
      mainWindow = new MainThreadWindow(server.pid);
    }, warmupMs);
    const r = await runLoad({
      port,
      server,
      connections,
      pipeline: 1,
      warmupMs,
      durationMs,
      next: () => {
        sent++;
        return build(pool[next++ % pool.length]!);
      },
      expectStatus,
      onOk: () => {
        ok++;
      },
    }).finally(() => clearTimeout(warm));
    return { ...r, errorsWholeCell: sent - ok, mainThreadPercent: mainWindow?.end(), serverCpuMsPerRequest: r.cpu.serverPercent === undefined || r.requests === 0 ? undefined : ((r.cpu.serverPercent / 100) * r.durationSeconds * 1000) / r.requests };
  };

  // 2. Canonical metadata writes.
  for (const connections of WRITE_CONNECTIONS) {
    opts.progress(`documents: canonical metadata writes over ${POOL_SIZE} documents, ${connections} connections, ${result.settings.writeMs / 1000} s`);
    const w = await poolLoad(connections, result.settings.writeMs, writeRequest, 201);
    result.writes.push(w);
    opts.progress(`documents: writes ${connections} connections: ${f(w.requestsPerSecond)}/s, p50 ${ms(w.latency.p50Ms)}, p99 ${ms(w.latency.p99Ms)}, server ${pct(w.cpu.serverPercent)}, ${w.errorsWholeCell} error(s)${w.firstError ? ` (${w.firstError})` : ''}`);
  }

  // 3. Metadata reads.
  const readRequests = new Map(pool.map((id) => [id, `GET /v1/documents/${id}/metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth}\r\n`]));
  opts.progress(`documents: GET metadata over ${POOL_SIZE} documents, ${READ_CONNECTIONS} connections, ${result.settings.readMs / 1000} s`);
  const reads = await poolLoad(READ_CONNECTIONS, result.settings.readMs, (id) => readRequests.get(id)!, 200);
  result.reads.push(reads);
  opts.progress(`documents: reads: ${f(reads.requestsPerSecond)}/s, p50 ${ms(reads.latency.p50Ms)}, p99 ${ms(reads.latency.p99Ms)}, max ${ms(reads.latency.maxMs)}, server ${pct(reads.cpu.serverPercent)}, ${reads.errorsWholeCell} error(s)`);
}

/** Why the scenario failed (stopped early, unexpected answers), for the run's Errors; undefined when it did not. */
export function documentsFailure(m: DocumentsResult): string | undefined {
  const parts: string[] = [];
  if (m.error) parts.push(m.error);
  if (m.totalErrors > 0) {
    const first = [...m.documents, ...m.blobs].find((c) => c.firstError)?.firstError ?? [...m.writes, ...m.reads].find((c) => c.firstError)?.firstError;
    parts.push(`${m.totalErrors} unexpected answer(s) or connection failure(s)${first ? `; first: ${first}` : ' (outside the measured windows)'}`);
  }
  return parts.length ? parts.join('; ') : undefined;
}

// ---------------------------------------------------------------------------------------------
// Targets and report

function best(cells: LoopResult[]): LoopResult | undefined {
  return cells.length ? cells.reduce((a, b) => (b.perSecond > a.perSecond ? b : a)) : undefined;
}

export function documentsTargets(m: DocumentsResult): Target[] {
  const top = best(m.documents);
  const docErrors = m.documents.reduce((n, c) => n + c.errors, 0);
  const targets: Target[] = [
    {
      name: `Documents created per second (POST /v1/documents with initialMetadata + PUT ${m.documentBytes / KiB} KiB + finalize), best of ${m.documents.map((c) => c.connections).join(' / ') || 'n/a'} clients`,
      value: top ? `${f(top.perSecond)} documents/s (${top.connections} clients; ${m.documents.map((c) => `${c.connections}: ${f(c.perSecond)}`).join(', ')})${docErrors ? `, ${docErrors} error(s)` : ''}` : 'n/a',
      target: '≥ 1,000 documents/s on this 2-core machine (Alfresco\'s published benchmark: about 100/s per node)',
      pass: top && m.documents.length === CREATE_CONNECTIONS.length ? top.perSecond >= DOCS_PER_SECOND_TARGET && docErrors === 0 : undefined,
    },
  ];
  const complete = m.documents.length === CREATE_CONNECTIONS.length && m.blobs.length === CREATE_CONNECTIONS.length && m.writes.length === WRITE_CONNECTIONS.length && m.reads.length === 1;
  targets.push({
    name: 'Document platform: unexpected answers and connection failures, all cells (warm-up included)',
    value: `${f(m.totalErrors)}${complete ? '' : ' (the scenario did not finish)'}`,
    target: '0',
    pass: complete ? m.totalErrors === 0 : m.totalErrors > 0 ? false : undefined,
  });
  return targets;
}

const errorText = (n: number, first?: string) => `${n}${first ? ` (${first.replace(/\|/g, '/').replace(/\n/g, ' ').slice(0, 160)})` : ''}`;

/** The document platform section of the report (Markdown, `##` headings). */
export function renderDocumentsSection(m: DocumentsResult): string {
  const L: string[] = [];
  L.push('## Document platform (issue 5): documents, metadata writes and reads');
  L.push('');
  if (m.skipped) {
    L.push(`Skipped: ${m.skipped}`, '');
    return L.join('\n');
  }
  if (m.error) L.push(`**Stopped early**: ${m.error.replace(/\n/g, ' ')}`, '');
  const s = m.settings;
  L.push(`- SVC_DURABILITY=${m.durability}; one tenant, a \`POST /dev/token\` bearer token on every request; schema \`${m.schemaUrn}\` registered first (HTTP ${m.schemaStatus ?? 'n/a'}), JSON Schema with 6 properties`);
  L.push(`- One document = \`POST /v1/documents\` (an externalRef and an initialMetadata bundle validated by that schema; ${f(m.createBodyBytes)} bytes of JSON) → 201, \`PUT /v1/uploads/{id}/bytes\` of ${m.documentBytes / KiB} KiB fresh random bytes (nothing deduplicates) → 204, \`POST /v1/uploads/{id}/finalize\` → 201 with a \`b3:\` contentRef; the three in sequence on each client's own keep-alive connection (closed loop). Reference, alternating at the same client counts: \`POST /api/v1/blobs\` of ${m.documentBytes / KiB} KiB fresh random bytes → 201, the CAS ingest part of a document, in the same loop`);
  L.push(`- Metadata: a pool of ${m.poolSize} finalized documents${m.poolSeconds ? ` (created in ${f(m.poolSeconds, 1)} s)` : ''}; canonical writes \`POST /v1/documents/{id}/metadata\` (${f(m.writeBodyBytes)} bytes of JSON, the namespace's data replaced: each write a new version) → 201 and reads \`GET /v1/documents/{id}/metadata\` → 200, round-robin over the pool, one request in flight per connection`);
  if (m.storeWarmup) L.push(`- Before the cells, ${f(m.storeWarmup.durationSeconds, 1)} s of the document loop with 16 clients, not counted (${f(m.storeWarmup.completed)} documents, ${f(m.storeWarmup.perSecond)}/s, server CPU ${pct(m.storeWarmup.cpu.serverPercent)}): the server's code gets compiled, and a fresh store creates most of its 4,096 block partition directories, which the first few thousand blocks otherwise pay for`);
  L.push(`- Each cell: ${s.warmupMs / 1000} s warm-up, then ${s.createMs / 1000} s (documents, blobs), ${s.writeMs / 1000} s (writes), ${s.readMs / 1000} s (reads); counted are iterations completing inside the window; errors are counted over the whole cell`);
  L.push('');
  L.push(...renderTargets(m.targets));

  if (m.documents.length) {
    L.push('### Documents per second, and the 64 KiB blob upload alone');
    L.push('');
    L.push('| Loop | Clients | Per second | p50 | p90 | p99 | max | Errors | Server CPU (main thread) | Server CPU-ms each | Bench CPU | Other CPU |');
    L.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
    const row = (label: string, c: LoopResult) =>
      `| ${label} | ${c.connections} | ${f(c.perSecond)} | ${ms(c.latency.p50Ms)} | ${ms(c.latency.p90Ms)} | ${ms(c.latency.p99Ms)} | ${ms(c.latency.maxMs)} | ${errorText(c.errors, c.firstError)} | ${pct(c.cpu.serverPercent)} (${pct(c.mainThreadPercent)}) | ${f(c.serverCpuMsPerItem, 2)} | ${pct(c.cpu.benchPercent)} | ${pct(c.cpu.otherPercent)}${c.cpu.stealPercent ? ` (steal ${pct(c.cpu.stealPercent)})` : ''} |`;
    for (let i = 0; i < Math.max(m.documents.length, m.blobs.length); i++) {
      if (m.documents[i]) L.push(row('document: create + PUT + finalize', m.documents[i]!));
      if (m.blobs[i]) L.push(row(`blob: POST /api/v1/blobs ${m.documentBytes / KiB} KiB`, m.blobs[i]!));
    }
    L.push('');
    L.push('Per-request latency inside a document (p50 / p99):');
    L.push('');
    L.push(`| Clients | ${m.documents[0]!.steps.map((x) => x.step).join(' | ')} |`);
    L.push(`|---|${m.documents[0]!.steps.map(() => '---').join('|')}|`);
    for (const c of m.documents) L.push(`| ${c.connections} | ${c.steps.map((x) => `${ms(x.p50Ms)} / ${ms(x.p99Ms)}`).join(' | ')} |`);
    L.push('');
    const top = best(m.documents)!;
    const ref = m.blobs.find((b) => b.connections === top.connections);
    if (ref && top.serverCpuMsPerItem !== undefined && ref.serverCpuMsPerItem !== undefined) {
      L.push(
        `At ${top.connections} clients a document takes ${f(top.serverCpuMsPerItem, 2)} ms of server CPU and the ${m.documentBytes / KiB} KiB blob upload alone ${f(ref.serverCpuMsPerItem, 2)} ms: the document platform (token checks, JSON and schema validation, LMDB records of document, upload, content key, version and labels, BLAKE3 beside the CAS hashes, three requests instead of one) accounts for ${pct(100 * (1 - ref.serverCpuMsPerItem / top.serverCpuMsPerItem))} of a document's server CPU; rate ${f(top.perSecond)} documents/s vs ${f(ref.perSecond)} blobs/s (${f(top.perSecond / ref.perSecond, 2)}×).`,
      );
      L.push('');
    }
  }
  const requestRow = (label: string, c: RequestCell) =>
    `| ${label} | ${c.connections} | ${f(c.requestsPerSecond)} | ${ms(c.latency.p50Ms)} | ${ms(c.latency.p90Ms)} | ${ms(c.latency.p99Ms)} | ${ms(c.latency.maxMs)} | ${errorText(c.errorsWholeCell, c.firstError)} | ${pct(c.cpu.serverPercent)} (${pct(c.mainThreadPercent)}) | ${f(c.serverCpuMsPerRequest, 3)} | ${pct(c.cpu.benchPercent)} | ${pct(c.cpu.otherPercent)} |`;
  if (m.writes.length || m.reads.length) {
    L.push(`### Metadata over ${m.poolSize} documents`);
    L.push('');
    L.push('| Request | Connections | Requests/s | p50 | p90 | p99 | max | Errors | Server CPU (main thread) | Server CPU-ms each | Bench CPU | Other CPU |');
    L.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const w of m.writes) L.push(requestRow('canonical write, POST …/metadata → 201', w));
    for (const r of m.reads) L.push(requestRow('GET …/metadata → 200', r));
    L.push('');
  }
  L.push('Latency: a document from writing its first request to reading its finalize answer; a request from writing it to the last byte of its answer. CPU is % of one core over the window (2 cores = 200%): server = all its threads (in brackets its main thread, the event loop: HTTP, JSON, token checks, LMDB calls, hand-offs to the workers), bench = this load generator (one Node.js thread, which also generates the random bodies), other = the rest of the host. Server CPU-ms each = server CPU over the window / items completed in it.');
  L.push('');
  return L.join('\n');
}

/** The whole report of a `--documents-only` run. */
export function renderDocumentsReport(r: Results, m: DocumentsResult): string {
  const L = renderHeader(r, `svc benchmark: document platform only (--documents-only${r.mode === 'quick' ? ', --quick' : ''}; SVC_DURABILITY=${r.durability})`, r.startedAt, [
    `- Load generator: ${r.environment.loadGenerator}; server and load generator share the host's CPUs`,
  ]);
  L.push(...renderErrors(r), renderDocumentsSection(m), ...renderServer(r));
  return L.join('\n');
}

/**
 * Canonical metadata writes over a pool of POOL_SIZE documents made first on `port` (create, PUT,
 * finalize): the iteration of a closed loop, each a `POST …/metadata` of writeBody(n) answered 201.
 */
export async function canonicalWrites(port: number, auth: string): Promise<(conn: RawConnection) => Promise<Outcome>> {
  const pool: string[] = [];
  let seq = 0;
  const conn = await RawConnection.connect(port);
  try {
    const make = makeDocumentIteration(auth, () => seq++, (id) => pool.push(id));
    while (pool.length < POOL_SIZE) {
      const o = await make(conn);
      if (!o.ok) throw new Error(`creating the pool: ${o.step}: ${o.detail}`);
    }
  } finally {
    conn.close();
  }
  let w = 0;
  return async (c) => {
    const n = w++;
    const res = await c.request(jsonRequest('POST', `/v1/documents/${pool[n % pool.length]}/metadata`, auth, writeBody(n)), true, REQUEST_TIMEOUT_MS);
    return res.status === 201 ? { ok: true, steps: [] } : { ok: false, step: 'POST …/metadata', detail: describe(res) };
  };
}
