// One router for every surface: a route is a method (or several), a pattern and a handler that
// gets one Call: the exchange, the request, the path parameters, the query, (on a guarded router)
// the caller and (for a route that names a body reader) its body. The router starts the exchange; checks the bearer token and the route's capability
// (a guard); charges the caller's budgets (a meter); answers whatever the handler throws or
// rejects with in the surface's envelope (or the route's own form of it); and, for routes that
// ask for it, answers CORS preflights and other methods with 405 and `Allow`.

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { type Principal, holds } from '../engine/auth/index.js';
import { SvcError } from '../engine/base/errors.js';
import type { Release, ShareScope } from '../engine/tenancy/index.js';
import { Exchange, type RequestHead, header } from './exchange.js';
import type { Surface } from './surface.js';

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';


/** Every handler's one argument. `B`: what the route's body reader yields (nothing without one). */
export interface Call<B = undefined> {
  readonly ex: Exchange;
  /** The request's head: read headers before the handler's first await. */
  readonly req: RequestHead;
  /** Path parameters in pattern order, as sent (percent-encoded). */
  readonly params: string[];
  readonly query: URLSearchParams;
  /** The caller, on the guarded routes of a router that has a guard. */
  readonly principal?: Principal;
  /** Body bytes to or from the caller, against its budget (429 when spent); nothing without a meter. */
  readonly chargeBytes: (bytes: number) => void;
  /**
   * The body, read (bounded) from the moment the handler is called, before its first await: uWS
   * drops body data that arrives before a reader is set. Resolves to undefined without a reader.
   */
  readonly body: Promise<B>;
}

export type Handler<B = undefined> = (call: Call<B>) => void | Promise<void>;

/**
 * Reads a whole body its handler needs at once (a JSON document, a model frame), bounded; rejects
 * with the surface's error. `charge` takes each chunk's bytes as it arrives (the caller's byte
 * budget: it throws once the budget is spent, and the reader rejects with that).
 */
export type BodyReader<B> = (ex: Exchange, req: RequestHead, charge: (bytes: number) => void) => Promise<B>;

interface RouteOptions<B> {
  /** The metrics label (default: the pattern). */
  name?: string;
  /** The code of a 500 answer to an unknown error. */
  fallbackCode?: string;
  /**
   * Who may call the route when the router has a guard: a token that holds this capability;
   * `ANY_TOKEN`, any valid token (what the request may do depends on what it names, and the
   * engine checks that: a namespace's `meta.write:<ns>`, a workflow's `workflow.run:<urn>`);
   * absent, anyone (a public route).
   */
  capability?: string | typeof ANY_TOKEN;
  /** An operation that takes one of its tenant's slots (uploads, downloads, commits) while it runs. */
  operation?: boolean;
  /** The route's own form of every error it answers, the guard's and the meter's included (metadata writes: their rejected form). */
  errorForm?: (err: unknown) => unknown;
  /** The route's body reader (`Call.body`). */
  body?: BodyReader<B>;
}

/** A guarded route open to any valid token: its capability depends on what the request names, and the engine checks it. */
export const ANY_TOKEN = Symbol('any valid token');

/** Bearer tokens: a verified token's principal at once when it is known, else after its check. */
export interface Guard {
  cached(authorization: string | undefined): Principal | undefined;
  verify(authorization: string | undefined): Promise<Principal>;
}

/**
 * Cross-origin access. Open (security off): any origin, `*`. Otherwise only the exact origins
 * listed get a grant; a preflight from any other origin, for another method or with a header
 * outside the allow list is 403.
 */
export interface CorsPolicy {
  open: boolean;
  origins: ReadonlySet<string>;
  /** Request headers a preflight may name (lowercase, comma-separated). */
  allowHeaders: string;
  exposeHeaders: string;
}

/**
 * What a guarded request costs its caller (budgets; throws to refuse). `scope`: whose share of
 * the tenant's figures the route takes (engine/tenancy/cluster-share.ts): `documents` for the
 * document platform's routes (/v1), `cluster` for every other.
 */
export interface Meter {
  /** A request of `principal`, before the handler runs (429 when its budget is spent). */
  request(principal: Principal, scope: ShareScope): void;
  /**
   * One of the tenant's operation slots: at once (a release), later (a promise of one, rejected
   * when the wait is too long or `signal`'s signal aborts: the client went away), or none needed (undefined).
   */
  admit(principal: Principal, scope: ShareScope, signal: () => AbortSignal): Release | Promise<Release> | undefined;
  /** Body bytes to or from `principal`, as the handler learns them (429 when its budget is spent). */
  bytes(principal: Principal, bytes: number, scope: ShareScope): void;
}

/** The share a route's requests take of their tenant's figures: the document platform's (/v1) may be a node's alone. */
const scopeOf = (pattern: string): ShareScope => (pattern.startsWith('/v1/') ? 'documents' : 'cluster');

export interface RouterOptions {
  /** Budgets of the callers of guarded routes. */
  meter?: Meter;
  cors?: CorsPolicy;
  /** Answer OPTIONS (preflights) and 405 for every pattern (needs `cors`). */
  answerOtherMethods?: boolean;
  /** Bearer tokens: set, every route that names a capability (or ANY_TOKEN) needs one; unset, every route is open. */
  guard?: Guard;
  /**
   * Run first for every route, before its token is checked: throws to refuse the request (s3: a
   * node that does not serve the document platform now, server/documents-gate.ts).
   */
  before?: (pattern: string) => void;
  /** Headers every answer of the router carries (tus: Tus-Resumable). */
  headers?: ReadonlyArray<[string, string]>;
  /** Headers the OPTIONS answers carry besides Allow and CORS (tus: what the server supports). */
  discovery?: ReadonlyArray<[string, string]>;
}

const UNMETERED = () => {};
const NO_BODY = Promise.resolve(undefined);

/** Starts reading the body; a rejection the handler never awaits (it failed earlier) is not unhandled. */
function startBody<B>(reader: BodyReader<B> | undefined, ex: Exchange, req: RequestHead, charge: (bytes: number) => void = UNMETERED): Promise<B> {
  if (!reader) return NO_BODY as Promise<B>;
  const body = reader(ex, req, charge);
  body.catch(() => {});
  return body;
}

const REGISTER: Record<Method, 'get' | 'head' | 'post' | 'put' | 'patch' | 'del'> = { GET: 'get', HEAD: 'head', POST: 'post', PUT: 'put', PATCH: 'patch', DELETE: 'del' };

export const forbidden = (message: string) => new SvcError('forbidden', 'forbidden', message);

/** The answer to a request from an origin without a grant: caches must key on Origin. */
const NO_GRANT: ReadonlyArray<[string, string]> = [['Vary', 'Origin']];

export class Router {
  private readonly methods = new Map<string, Method[]>();
  /** Every route registered, in order, with the capability it names (what the API documents must cover). */
  readonly routes: Array<{ method: Method; pattern: string; capability?: string | typeof ANY_TOKEN }> = [];
  /** The open CORS grant, the same for every answer. */
  private readonly openCors?: ReadonlyArray<[string, string]>;

  constructor(
    private readonly app: TemplatedApp,
    private readonly surface: Surface,
    private readonly options: RouterOptions = {},
  ) {
    const cors = options.cors;
    const always = options.headers ?? [];
    if (cors?.open) this.openCors = [['Access-Control-Allow-Origin', '*'], ['Access-Control-Expose-Headers', cors.exposeHeaders], ...always];
    else if (always.length > 0) this.openCors = always;
    this.noGrant = [...NO_GRANT, ...always];
  }

  /** The answer headers for an origin without a grant. */
  private readonly noGrant: ReadonlyArray<[string, string]>;

  /** Whether the router checks bearer tokens (with security off, only the document platform's does). */
  get guarded(): boolean {
    return this.options.guard !== undefined;
  }

  on<B = undefined>(methods: Method | Method[], pattern: string, handler: Handler<B>, options: RouteOptions<B> = {}): void {
    const paramCount = pattern.split(':').length - 1;
    const name = options.name ?? pattern;
    const guard = options.capability === undefined ? undefined : this.options.guard;
    const { fallbackCode, errorForm } = options;
    const before = this.options.before;
    const capability = typeof options.capability === 'string' ? options.capability : undefined;
    const scope = scopeOf(pattern);
    for (const method of typeof methods === 'string' ? [methods] : methods) {
      this.app[REGISTER[method]](pattern, (res, req) => {
        const ex = this.exchange(res, req, name);
        const fail = (err: unknown) => ex.error(errorForm ? errorForm(err) : err, fallbackCode);
        if (before) {
          try {
            before(pattern);
          } catch (err) {
            return fail(err);
          }
        }
        const params: string[] = [];
        for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
        const query = new URLSearchParams(req.getQuery() ?? '');
        if (!guard) return run(() => handler({ ex, req, params, query, chargeBytes: UNMETERED, body: startBody(options.body, ex, req) }), fail);
        const authorization = header(req, 'authorization');
        const known = guard.cached(authorization);
        let head: RequestHead = req;
        /** The caller is known: its capability, its budget, its tenant's slot, then the handler. */
        const proceed = (principal: Principal): void => {
          if (capability !== undefined) allowed(principal, capability);
          const meter = this.options.meter;
          meter?.request(principal, scope);
          const admitted = meter && options.operation ? meter.admit(principal, scope, () => abortSignal(ex)) : undefined;
          const chargeBytes = meter ? (bytes: number) => meter.bytes(principal, bytes, scope) : UNMETERED;
          // A whole body read for the handler (JSON) is charged as it arrives, like an upload's.
          const call = () => handler({ ex, req: head, params, query, principal, chargeBytes, body: startBody(options.body, ex, head, chargeBytes) });
          if (admitted === undefined) return void run(call, fail);
          if (typeof admitted === 'function') {
            ex.onFinish(admitted);
            return void run(call, fail);
          }
          // Waits for a slot in the tenant's queue: the request must outlive this callback.
          if (head === req) head = snapshot(req, paramCount);
          ex.body.hold();
          // Past the queue wait: 503 tenant_queue_timeout; the client gone: it left the queue (no answer).
          admitted.then((release) => {
            ex.onFinish(release);
            if (!ex.live) return release();
            run(call, fail);
          }, fail);
        };
        if (known) return run(() => proceed(known), fail);
        // The token's first check waits for its keys: the request must outlive this callback.
        head = snapshot(req, paramCount);
        ex.body.hold();
        guard.verify(authorization).then((principal) => run(() => proceed(principal), fail), fail);
      });
      this.routes.push({ method, pattern, capability: options.capability });
      const known = this.methods.get(pattern) ?? [];
      if (known.length === 0) this.methods.set(pattern, known);
      if (!known.includes(method)) known.push(method);
    }
  }

  /** Every request to `pattern` no route took (a wildcard: not-found answers). */
  fallback(pattern: string, handler: Handler, options: Pick<RouteOptions<undefined>, 'name' | 'fallbackCode'> = {}): void {
    this.app.any(pattern, (res, req) => {
      const ex = this.exchange(res, req, options.name ?? pattern);
      run(() => handler({ ex, req, params: [], query: new URLSearchParams(req.getQuery() ?? ''), chargeBytes: UNMETERED, body: NO_BODY }), (err) => ex.error(err, options.fallbackCode));
    });
  }

  /** With `answerOtherMethods`: OPTIONS (CORS preflight) and 405 for the other methods of each pattern. Call after the routes. */
  answerOtherMethods(): void {
    const cors = this.options.cors;
    if (!this.options.answerOtherMethods || !cors) return;
    for (const [pattern, registered] of this.methods) {
      const methods = [...registered].sort();
      const allow = [...methods, 'OPTIONS'].join(', ');
      this.app.options(pattern, (res, req) => {
        const origin = header(req, 'origin');
        const ex = new Exchange(res, req, pattern, this.surface, this.options.headers);
        const discovery = Object.fromEntries(this.options.discovery ?? []);
        // Not a CORS preflight: what the resource allows (tus clients discover the server so).
        if (origin === undefined) return ex.send(204, { ...discovery, Allow: allow });
        if (!cors.open) {
          const refusal = preflightRefusal(cors, methods, origin, header(req, 'access-control-request-method'), header(req, 'access-control-request-headers'));
          if (refusal) return ex.error(forbidden(refusal));
        }
        ex.send(204, {
          'Access-Control-Allow-Origin': origin ?? '*',
          'Access-Control-Allow-Methods': methods.join(', '),
          'Access-Control-Allow-Headers': cors.allowHeaders,
          'Access-Control-Max-Age': '600',
          Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
          Allow: allow,
          ...discovery,
        });
      });
      this.app.any(pattern, (res, req) => {
        const ex = this.exchange(res, req, pattern);
        ex.error(new SvcError('method_not_allowed', 'method_not_allowed', `${ex.method} is not allowed here`, { allow }));
      });
    }
  }

  private exchange(res: HttpResponse, req: HttpRequest, name: string): Exchange {
    return new Exchange(res, req, name, this.surface, this.corsHeaders(req));
  }

  /** The CORS grant of an answer (`*` when open; the request's origin only when it is listed) and the router's own headers. */
  private corsHeaders(req: HttpRequest): ReadonlyArray<[string, string]> | undefined {
    const cors = this.options.cors;
    if (!cors || cors.open) return this.openCors;
    // Without listed origins no answer ever varies by Origin.
    if (cors.origins.size === 0) return this.options.headers;
    const origin = header(req, 'origin');
    if (origin === undefined || !cors.origins.has(origin)) return this.noGrant;
    let grant = this.grants.get(origin);
    if (!grant) this.grants.set(origin, (grant = [['Access-Control-Allow-Origin', origin], ['Access-Control-Expose-Headers', cors.exposeHeaders], ['Vary', 'Origin'], ...(this.options.headers ?? [])]));
    return grant;
  }

  /** The grant of each listed origin, made once. */
  private readonly grants = new Map<string, ReadonlyArray<[string, string]>>();
}

/** Aborted when the client of `ex` goes away (a queued operation then leaves its tenant's queue). */
function abortSignal(ex: Exchange): AbortSignal {
  const controller = new AbortController();
  ex.onAbort(() => controller.abort());
  return controller.signal;
}

/** The caller of a guarded route on a router that always has a guard (the document platform's). */
export function caller(call: Call<unknown>): Principal {
  if (!call.principal) throw new Error(`${call.ex.method} ${call.ex.route} was reached without a verified token: its router needs a guard`);
  return call.principal;
}

/** The principal when it holds `capability`; 403 otherwise. */
function allowed(principal: Principal, capability: string): Principal {
  if (!holds(principal, capability)) throw forbidden(`The token does not grant ${capability}`);
  return principal;
}

/** Why a preflight is refused with security on, or undefined when it is granted. */
function preflightRefusal(cors: CorsPolicy, methods: readonly string[], origin: string | undefined, method: string | undefined, headers: string | undefined): string | undefined {
  if (origin === undefined || !cors.origins.has(origin)) return 'The origin is not allowed (SVC_SECURITY_CORS_ALLOWED_ORIGINS)';
  if (method === undefined || !methods.includes(method)) return `The method ${JSON.stringify(method ?? '')} is not allowed here`;
  const allowedHeaders = new Set(cors.allowHeaders.split(',').map((h) => h.trim()));
  for (const name of (headers ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean)) {
    if (!allowedHeaders.has(name)) return `The request header ${JSON.stringify(name)} is not allowed`;
  }
  return undefined;
}

/** A copy of the request's head that outlives the uWS callback (a guarded request whose token is being checked). */
function snapshot(req: HttpRequest, paramCount: number): RequestHead {
  const headers: Array<[string, string]> = [];
  req.forEach((name, value) => headers.push([name, value]));
  const url = req.getUrl();
  const query = req.getQuery();
  const method = req.getMethod();
  const caseSensitiveMethod = req.getCaseSensitiveMethod();
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  const head = {
    getHeader: (name: string) => headers.find(([n]) => n === name)?.[1] ?? '',
    getUrl: () => url,
    getQuery: () => query,
    getMethod: () => method,
    getCaseSensitiveMethod: () => caseSensitiveMethod,
    getParameter: (i: number | string) => (typeof i === 'number' ? params[i] : undefined),
    forEach: (cb: (name: string, value: string) => void) => {
      for (const [n, v] of headers) cb(n, v);
      return head as unknown as HttpRequest;
    },
  };
  return head as unknown as RequestHead;
}

/** Runs a handler; a throw or a rejection goes to `fail` (which answers it in the route's envelope). */
function run(work: () => void | Promise<void>, fail: (err: unknown) => void): void {
  try {
    const pending = work();
    if (pending) pending.catch(fail);
  } catch (err) {
    fail(err);
  }
}
