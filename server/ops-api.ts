import type { HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { Exchange, type ServerContext } from './http.js';

export const VERSION = '0.1.0';

export function mountOpsApi(app: TemplatedApp, ctx: ServerContext): void {
  const { engine, metrics } = ctx;
  const ex = (res: HttpResponse, path: string) => new Exchange(res, 'GET', path, ctx);

  app.get('/api/health/live', (res) => {
    ex(res, '/api/health/live').json(200, { status: 'ok', version: VERSION, uptimeSeconds: engine.stats.uptimeSeconds() });
  });

  app.get('/api/health/ready', (res) => {
    const e = ex(res, '/api/health/ready');
    engine.readiness().then(
      (checks) => {
        const ready = checks.every((c) => c.status === 'ok');
        e.json(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks });
      },
      (err) => e.error(err),
    );
  });

  app.get('/api/stats', (res) => {
    ex(res, '/api/stats').json(200, engine.stats.toJSON());
  });

  app.get('/metrics', (res) => {
    const e = ex(res, '/metrics');
    metrics.render().then(
      (text) => e.send(200, { 'Content-Type': metrics.registry.contentType }, text),
      (err) => e.error(err),
    );
  });
}
