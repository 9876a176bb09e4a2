import type * as uWS from 'uWebSockets.js';
import uws from './uws.js';
import { type Config, ConfigError, VARIABLES, loadConfig } from '../engine/config.js';
import { Engine } from '../engine/engine.js';
import { nativeSharedCopy } from '../engine/cas/shared-copy.js';
import { Logger } from '../engine/log.js';
import { Metrics } from '../engine/ops/metrics.js';
import { ModelService } from '../engine/models/service.js';
import { mountBlobApi } from './blob-api.js';
import { mountUploadsApi } from './uploads-api.js';
import { mountDocsApi } from './docs-api.js';
import { mountGcApi } from './gc-api.js';
import { TokenVerifier } from '../engine/auth/tokens.js';
import { DocumentService } from '../engine/docs/documents.js';
import { SchemaRegistry } from '../engine/docs/schemas.js';
import { MigrationRegistry } from '../engine/docs/migrations.js';
import { mountModelApi } from './model-api.js';
import { createApp } from './app.js';
import { Exchange, type ServerContext } from './http.js';
import { VERSION, mountOpsApi } from './ops-api.js';

const USAGE = `svc ${VERSION}: content-addressed storage service

Usage:
  svc serve        run the server (what \`npm start\` runs)
  svc put FILE     upload a file (resumable above --threshold), print its blob id
  svc get ID       download a blob to stdout or -o FILE (resumable), checked against ID
  svc stat ID      a blob's headers and summary as JSON
  svc ls           the inventory (--limit N, --all)
  svc gc [PHASE]   garbage collection: mark, quarantine, purge or run (default), --apply to act
  svc --help       this text
  svc --version    print the version

Client commands talk to --server URL, else $SVC_SERVER, else http://127.0.0.1:8081.
\`svc put --help\` shows their options; docs/cli.md describes them.

Configuration comes from environment variables only:
`;

const CLIENT_COMMANDS = new Set(['put', 'get', 'stat', 'ls', 'gc']);

export function helpText(): string {
  const width = Math.max(...VARIABLES.map((v) => v.name.length));
  const rows = VARIABLES.map((v) => `  ${v.name.padEnd(width)}  ${v.help} (default: ${v.default === '' ? 'empty' : v.default})`);
  return `${USAGE}${rows.join('\n')}\n`;
}

export interface RunningServer {
  port: number;
  /** Port of the model runtime listener. */
  modelPort: number;
  close(): Promise<void>;
}

/** Opens the engine, then listens: the port answers only once the stores are open. */
export async function serve(config: Config, log = new Logger(config.logLevel)): Promise<RunningServer> {
  const engine = await Engine.open(config, log);
  const ctx: ServerContext = { engine, metrics: new Metrics(engine) };
  const app = createApp((message) => JSON.stringify({ error: 'invalid_request', message }));
  mountBlobApi(app, ctx);
  mountUploadsApi(app, ctx);
  mountOpsApi(app, ctx);
  mountGcApi(app, ctx);
  const schemas = new SchemaRegistry(engine.catalog);
  const docs = new DocumentService(engine.catalog, schemas, new MigrationRegistry(engine.catalog, schemas), engine.jobs, (options) => engine.startIngest(options));
  engine.blockRoots.push(docs.blockRoots());
  mountDocsApi(app, ctx, { docs, tokens: TokenVerifier.open(config.auth, config.fsRoot, log), maxJsonBytes: config.docMaxJsonBytes });
  app.any('/*', (res, req) => {
    new Exchange(res, req, '/*', ctx).json(404, { error: 'not_found', message: `No route for ${req.getCaseSensitiveMethod()} ${req.getUrl()}` });
  });
  const listenSocket = await listen(app, config.host, config.httpPort);
  const port = uws.us_socket_local_port(listenSocket);
  const models = new ModelService(config.model, engine.catalog, config.fsRoot, engine.pool, log);
  const modelApp = createApp((message) => JSON.stringify({ error: 'BadRequest', message, code: 400 }));
  mountModelApi(modelApp, models, { log, lingerBytes: config.httpLingerBytes }, VERSION);
  const modelSocket = await listen(modelApp, config.host, config.model.httpPort);
  const modelPort = uws.us_socket_local_port(modelSocket);
  const blockHashing = engine.scanner.pairHashing ? 'scanning thread (native SHA-256 pair)' : 'worker threads (node:crypto)';
  log.info('listening', { host: config.host, port, modelPort, fsRoot: config.fsRoot, durability: config.durability, workers: config.workers, blockHashing, bodyCopy: nativeSharedCopy ? 'native memcpy' : 'TypedArray.set' });
  return {
    port,
    modelPort,
    async close() {
      uws.us_listen_socket_close(listenSocket);
      uws.us_listen_socket_close(modelSocket);
      app.close();
      modelApp.close();
      models.close();
      await engine.close();
    },
  };
}

function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket) => (socket ? resolve(socket) : reject(new Error(`cannot listen on ${host}:${port}`))));
  });
}

export async function main(argv: string[]): Promise<void> {
  const command = argv[0] ?? 'serve';
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(helpText());
    return;
  }
  if (command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  if (CLIENT_COMMANDS.has(command)) {
    const { run } = await import('../cli/main.js');
    process.exitCode = await run(argv);
    return;
  }
  if (command !== 'serve') {
    process.stderr.write(`svc: unknown command "${command}"\n\n${helpText()}`);
    process.exitCode = 2;
    return;
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`svc: invalid configuration: ${err.message}\n`);
      process.exitCode = 2;
      return;
    }
    throw err;
  }
  // The listeners are installed before the service starts and never removed (one removed while
  // its signal is pending loses that signal): a stop asked for while the service starts is
  // carried out, as a clean close, once it has started. They are `once`: a second signal ends the
  // process at once (the signal's default action).
  let server: RunningServer | undefined;
  let stopAsked = false;
  const close = (running: RunningServer) => void running.close().then(() => process.exit(0), () => process.exit(1));
  const stop = () => {
    if (stopAsked) return;
    stopAsked = true;
    if (server) close(server);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  server = await serve(config);
  if (stopAsked) return close(server);
  // One line on stdout for whoever started us (tests, scripts): where to connect.
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: server.port, modelPort: server.modelPort })}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  void main(process.argv.slice(2));
}
