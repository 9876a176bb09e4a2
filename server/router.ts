// One router for every surface: a route is a method (or several), a pattern and a handler that
// gets the exchange, the path parameters and the query. The router starts the exchange, answers
// whatever the handler throws or rejects with in the surface's envelope, and, for surfaces that
// ask for it, answers CORS preflights and other methods with 405 and `Allow`. This is where
// authentication and tenancy plug in (a step before the handler).

import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { SvcError } from '../engine/errors.js';
import { Exchange, header } from './exchange.js';
import type { Surface } from './surface.js';

export type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Call {
  readonly ex: Exchange;
  /** The uWS request: valid only until the handler first awaits (read headers before). */
  readonly req: HttpRequest;
  /** Path parameters in pattern order, as sent (percent-encoded). */
  readonly params: string[];
  readonly query: URLSearchParams;
}

export type Handler = (call: Call) => void | Promise<void>;

interface RouteOptions {
  /** The metrics label (default: the pattern). */
  name?: string;
  /** The code of a 500 answer to an unknown error. */
  fallbackCode?: string;
}

interface RouterOptions {
  /** Headers every answer of these routes carries (CORS). */
  baseHeaders?: ReadonlyArray<[string, string]>;
  /** Request headers a CORS preflight allows; with it, OPTIONS and 405 are answered for every pattern. */
  preflightHeaders?: string;
}

const REGISTER: Record<Method, 'get' | 'head' | 'post' | 'put' | 'patch' | 'del'> = { GET: 'get', HEAD: 'head', POST: 'post', PUT: 'put', PATCH: 'patch', DELETE: 'del' };

export class Router {
  private readonly methods = new Map<string, Method[]>();
  /** Every route registered, in order (what the API documents must cover). */
  readonly routes: Array<{ method: Method; pattern: string }> = [];

  constructor(
    private readonly app: TemplatedApp,
    private readonly surface: Surface,
    private readonly options: RouterOptions = {},
  ) {}

  on(methods: Method | Method[], pattern: string, handler: Handler, options: RouteOptions = {}): void {
    const paramCount = pattern.split(':').length - 1;
    const name = options.name ?? pattern;
    for (const method of typeof methods === 'string' ? [methods] : methods) {
      this.app[REGISTER[method]](pattern, (res, req) => {
        const ex = this.exchange(res, req, name);
        const params: string[] = [];
        for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
        run(ex, () => handler({ ex, req, params, query: new URLSearchParams(req.getQuery() ?? '') }), options.fallbackCode);
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

  /** With `preflightHeaders`: OPTIONS (CORS preflight) and 405 for the other methods of each pattern. Call after the routes. */
  answerOtherMethods(): void {
    const allowHeaders = this.options.preflightHeaders;
    if (allowHeaders === undefined) return;
    for (const [pattern, registered] of this.methods) {
      const methods = [...registered].sort();
      const allow = [...methods, 'OPTIONS'].join(', ');
      this.app.options(pattern, (res, req) => {
        const origin = header(req, 'origin');
        new Exchange(res, req, pattern, this.surface).send(204, {
          'Access-Control-Allow-Origin': origin ?? '*',
          'Access-Control-Allow-Methods': methods.join(', '),
          'Access-Control-Allow-Headers': allowHeaders,
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
    return new Exchange(res, req, name, this.surface, this.options.baseHeaders);
  }
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
