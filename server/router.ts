// One router for every surface: a route is a method (or several), a pattern and a handler that
// gets the exchange, the request, the path parameters, the query and (with security on) the
// caller. The router starts the exchange; checks the bearer token and the route's capability
// (a guard); answers whatever the handler throws or rejects with in the surface's envelope;
// and, for routes that ask for it, answers CORS preflights and other methods with 405 and `Allow`.

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { type Principal, holds } from '../engine/auth/index.js';
import { SvcError } from '../engine/errors.js';
import { Exchange, type RequestHead, header } from './exchange.js';
import type { Surface } from './surface.js';

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';


export interface Call {
  readonly ex: Exchange;
  /** The request's head: read headers before the handler's first await. */
  readonly req: RequestHead;
  /** Path parameters in pattern order, as sent (percent-encoded). */
  readonly params: string[];
  readonly query: URLSearchParams;
  /** The caller, on guarded routes with security on. */
  readonly principal?: Principal;
}

export type Handler = (call: Call) => void | Promise<void>;

interface RouteOptions {
  /** The metrics label (default: the pattern). */
  name?: string;
  /** The code of a 500 answer to an unknown error. */
  fallbackCode?: string;
  /** The capability the caller's token must hold when a guard is set; absent: a public route. */
  capability?: string;
  /** An operation that takes one of its tenant's slots (uploads, downloads, commits) while it runs. */
  operation?: boolean;
}

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

/** What a guarded request costs its caller, before the handler runs (budgets; throws to refuse). */
export interface Meter {
  /** A request of `principal` (429 when its budget is spent). */
  request(principal: Principal): void;
  /** One of the tenant's operation slots: at once (a release), later (a promise of one), or none needed (undefined). */
  admit(principal: Principal): (() => void) | Promise<() => void> | undefined;
}

interface RouterOptions {
  meter?: Meter;
  cors?: CorsPolicy;
  /** Answer OPTIONS (preflights) and 405 for every pattern (needs `cors`). */
  answerOtherMethods?: boolean;
  guard?: Guard;
}

const REGISTER: Record<Method, 'get' | 'head' | 'post' | 'put' | 'patch' | 'del'> = { GET: 'get', HEAD: 'head', POST: 'post', PUT: 'put', PATCH: 'patch', DELETE: 'del' };

export const forbidden = (message: string) => new SvcError(403, 'forbidden', message);

/** The answer to a request from an origin without a grant: caches must key on Origin. */
const NO_GRANT: ReadonlyArray<[string, string]> = [['Vary', 'Origin']];

export class Router {
  private readonly methods = new Map<string, Method[]>();
  /** Every route registered, in order (what the API documents must cover). */
  readonly routes: Array<{ method: Method; pattern: string }> = [];
  /** The open CORS grant, the same for every answer. */
  private readonly openCors?: ReadonlyArray<[string, string]>;

  constructor(
    private readonly app: TemplatedApp,
    private readonly surface: Surface,
    private readonly options: RouterOptions = {},
  ) {
    const cors = options.cors;
    if (cors?.open) this.openCors = [['Access-Control-Allow-Origin', '*'], ['Access-Control-Expose-Headers', cors.exposeHeaders]];
  }

  on(methods: Method | Method[], pattern: string, handler: Handler, options: RouteOptions = {}): void {
    const paramCount = pattern.split(':').length - 1;
    const name = options.name ?? pattern;
    const guard = options.capability === undefined ? undefined : this.options.guard;
    for (const method of typeof methods === 'string' ? [methods] : methods) {
      this.app[REGISTER[method]](pattern, (res, req) => {
        const ex = this.exchange(res, req, name);
        const params: string[] = [];
        for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
        const query = new URLSearchParams(req.getQuery() ?? '');
        if (!guard) return run(ex, () => handler({ ex, req, params, query }), options.fallbackCode);
        const authorization = header(req, 'authorization');
        const known = guard.cached(authorization);
        let head: RequestHead = req;
        /** The caller is known: its capability, its budget, its tenant's slot, then the handler. */
        const proceed = (principal: Principal): void => {
          allowed(principal, options.capability!);
          const meter = this.options.meter;
          meter?.request(principal);
          const admitted = meter && options.operation ? meter.admit(principal) : undefined;
          const call = () => handler({ ex, req: head, params, query, principal });
          if (admitted === undefined) return void run(ex, call, options.fallbackCode);
          if (typeof admitted === 'function') {
            ex.onFinish(admitted);
            return void run(ex, call, options.fallbackCode);
          }
          // Waits for a slot in the tenant's queue: the request must outlive this callback.
          if (head === req) head = snapshot(req, paramCount);
          ex.body.hold();
          admitted.then((release) => {
            ex.onFinish(release);
            if (!ex.live) return release();
            run(ex, call, options.fallbackCode);
          });
        };
        if (known) return run(ex, () => proceed(known), options.fallbackCode);
        // The token's first check waits for its keys: the request must outlive this callback.
        head = snapshot(req, paramCount);
        ex.body.hold();
        guard.verify(authorization).then(
          (principal) => run(ex, () => proceed(principal), options.fallbackCode),
          (err: unknown) => ex.error(err),
        );
      });
      this.routes.push({ method, pattern });
      const known = this.methods.get(pattern) ?? [];
      if (known.length === 0) this.methods.set(pattern, known);
      if (!known.includes(method)) known.push(method);
    }
  }

  /** Every request to `pattern` no route took (a wildcard: not-found answers). */
  fallback(pattern: string, handler: Handler, options: RouteOptions = {}): void {
    this.app.any(pattern, (res, req) => {
      const ex = this.exchange(res, req, options.name ?? pattern);
      run(ex, () => handler({ ex, req, params: [], query: new URLSearchParams(req.getQuery() ?? '') }), options.fallbackCode);
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
        const ex = new Exchange(res, req, pattern, this.surface);
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
        });
      });
      this.app.any(pattern, (res, req) => {
        const ex = this.exchange(res, req, pattern);
        ex.error(new SvcError(405, 'method_not_allowed', `${ex.method} is not allowed here`, { Allow: allow }));
      });
    }
  }

  private exchange(res: HttpResponse, req: HttpRequest, name: string): Exchange {
    return new Exchange(res, req, name, this.surface, this.corsHeaders(req));
  }

  /** The CORS grant of an answer: `*` when open; the request's origin only when it is listed. */
  private corsHeaders(req: HttpRequest): ReadonlyArray<[string, string]> | undefined {
    const cors = this.options.cors;
    if (!cors || cors.open) return this.openCors;
    // Without listed origins no answer ever varies by Origin.
    if (cors.origins.size === 0) return undefined;
    const origin = header(req, 'origin');
    if (origin === undefined || !cors.origins.has(origin)) return NO_GRANT;
    let grant = this.grants.get(origin);
    if (!grant) this.grants.set(origin, (grant = [['Access-Control-Allow-Origin', origin], ['Access-Control-Expose-Headers', cors.exposeHeaders], ['Vary', 'Origin']]));
    return grant;
  }

  /** The grant of each listed origin, made once. */
  private readonly grants = new Map<string, ReadonlyArray<[string, string]>>();
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

/** Runs a handler; a throw or a rejection is answered with the error envelope. */
function run(ex: Exchange, work: () => void | Promise<void>, fallbackCode?: string): void {
  try {
    const pending = work();
    if (pending) pending.catch((err: unknown) => ex.error(err, fallbackCode));
  } catch (err) {
    ex.error(err, fallbackCode);
  }
}
