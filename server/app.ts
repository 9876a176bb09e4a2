// The uWS app every listener starts from: nothing on the wire names the library, and every route
// first refuses a request whose framing is ambiguous, before its handler sees it.

import type * as uWS from 'uWebSockets.js';
import { requestIdOf } from './request-id.js';
import uws from './uws.js';

// Without it, uWS adds `uWebSockets: 20` to every answer.
(uws as unknown as { _cfg(key: string): void })._cfg('silent');

const METHODS = ['get', 'post', 'put', 'patch', 'del', 'head', 'options', 'connect', 'trace', 'any'] as const;

/** The surface's error envelope for a request refused before routing: status 400, then the connection closes. */
type RefusalBody = (message: string) => string;

export function createApp(refusalBody: RefusalBody): uWS.TemplatedApp {
  const app = uws.App();
  // After a refusal, uWS still parses the rest of that connection's buffer (the answer's close waits
  // for the parse to end): whatever it finds there is not a request and is not served. The parse is
  // synchronous, so the flag ends with this turn of the event loop, or before when a connection closes.
  let refusing = false;
  app.filter((_res, count) => {
    if (count < 0) refusing = false;
  });
  for (const method of METHODS) {
    const register = app[method].bind(app);
    app[method] = (pattern, handler) =>
      register(pattern, (res, req) => {
        // Left unanswered: a close here would drop the refusal still corked for this connection;
        // it is not kept alive after the refusal, and uWS's idle timeout ends it.
        if (refusing) return void res.onAborted(() => {});
        const conflict = framingConflict(req);
        if (conflict === undefined) return handler(res, req);
        const requestId = requestIdOf(req.getHeader('x-request-id'));
        refusing = true;
        setImmediate(() => (refusing = false));
        res.cork(() => {
          res.writeStatus('400 Bad Request');
          res.writeHeader('X-Request-Id', requestId);
          res.writeHeader('Content-Type', 'application/json; charset=utf-8');
          res.end(refusalBody(conflict), true);
        });
      });
  }
  return app;
}

/** RFC 9112 6.3: Content-Length headers that disagree leave the body's end unknown (400, close). */
function framingConflict(req: uWS.HttpRequest): string | undefined {
  const first = req.getHeader('content-length');
  if (first === '') return undefined;
  let conflict: string | undefined;
  req.forEach((name, value) => {
    if (name === 'content-length' && value !== first) conflict = `Conflicting Content-Length headers (${first.slice(0, 20)}, ${value.slice(0, 20)})`;
  });
  return conflict;
}
