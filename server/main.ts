import net from 'node:net';
import { parseArgs } from 'node:util';
import type * as uWS from 'uWebSockets.js';
import uws from './uws.js';
import { type Config, ConfigError, VARIABLES, loadConfig } from '../engine/base/config.js';
import { Engine } from '../engine/engine.js';
import { DataDirLockError, S3OnlyRefused, StartRefused } from '../engine/store/index.js';
import { PolicyError } from '../engine/tenancy/index.js';
import { nativeSharedCopy } from '../engine/cas/index.js';
import { Logger } from '../engine/base/log.js';
import { createApp } from './app.js';
import { mountListeners } from './listeners.js';
import { mountS3Api } from './s3/s3-listener.js';
import { KeysFileError } from '../engine/s3/keys.js';
import { parseArgsMessage } from '../cli/args.js';
import { VERSION } from '../engine/base/version.js';

const USAGE = `svc ${VERSION}: content-addressed storage service

Usage:
  svc serve        run the server (what \`npm start\` runs); takes no arguments
  svc put FILE     upload a file (resumable above --threshold), print its blob id
  svc get ID       download a blob to stdout or -o FILE (resumable), checked against ID
  svc stat ID      a blob's headers and summary as JSON
  svc ls           the inventory (--limit N, --all)
  svc gc [PHASE]   garbage collection: mark, quarantine, purge or run (default), --apply to act
  svc nodes [forget ID | release-documents [--force]]
                   the nodes sharing the server's catalog; forget a node that is gone for good;
                   take the document platform over from a holder that is gone (s3)
  svc legacy import REPO (--all | DOCID...) [--concurrency N] [--placement HINT]
                   import legacy documents as documents (docs/legacy.md)
  svc models example DIR
                   write a small example MLeap bundle into DIR to try the model runtime
  svc catalog rebuild [--force]
                   recreate the pg-s3 catalog from its bucket alone (server-side, SVC_* variables)
  svc reload       make the server of SVC_FS_ROOT (default ./data) read SVC_TENANT_POLICY_FILE
                   again: SIGHUP to that server's process alone (its pid is in svc.lock)
  svc help [COMMAND], svc --help, svc COMMAND --help
                   this text, or one command's usage and options
  svc --version    print the version

Client commands talk to --server URL, else $SVC_SERVER, else http://127.0.0.1:8081;
docs/cli.md describes them. Install the command from the checkout with \`npm link\`.

Configuration comes from environment variables only:
`;

function helpText(): string {
  const width = Math.max(...VARIABLES.map((v) => v.name.length));
  const rows = VARIABLES.map((v) => `  ${v.name.padEnd(width)}  ${v.help} (default: ${v.default === '' ? 'empty' : v.default})`);
  return `${USAGE}${rows.join('\n')}\n`;
}

interface RunningServer {
  /** Reads SVC_TENANT_POLICY_FILE again. */
  reloadPolicies(): void;
  port: number;
  /** Port of the model runtime listener. */
  modelPort: number;
  /** Port of the S3 listener (null: SVC_S3_API_PORT=off). */
  s3Port: number | null;
  /** Closes the listeners, then the engine; with the signal that asked for it, logs `stopped` once closed. */
  close(signal?: NodeJS.Signals): Promise<void>;
}

/** Opens the engine, then listens: the port answers only once the stores are open. */
export async function serve(config: Config, log = new Logger(config.logLevel)): Promise<RunningServer> {
  // Opening the stores takes seconds (more on pg-s3); a port in use is said before that.
  await portFree(config.host, config.httpPort, 'SVC_HTTP_PORT');
  await portFree(config.host, config.model.httpPort, 'HTTP_PORT');
  if (config.s3Api.port !== null) await portFree(config.host, config.s3Api.port, 'SVC_S3_API_PORT');
  const engine = await Engine.open(config, log);
  const app = createApp((message) => JSON.stringify({ error: 'invalid_request', message }));
  const modelApp = createApp((message) => JSON.stringify({ error: 'BadRequest', message, code: 400 }));
  mountListeners(app, modelApp, engine, config, log);
  // The S3 listener (SVC_S3_API_PORT): its refusals before routing are S3's XML error.
  const s3App = config.s3Api.port === null ? undefined : createApp((message) => `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidRequest</Code><Message>${message.replace(/[<>&]/g, ' ')}</Message></Error>`);
  if (s3App) mountS3Api(s3App, { engine, keys: engine.s3Keys });
  const sockets: uWS.us_listen_socket[] = [];
  const close = async (signal?: NodeJS.Signals) => {
    const started = performance.now();
    for (const socket of sockets) uws.us_listen_socket_close(socket);
    app.close();
    modelApp.close();
    s3App?.close();
    await engine.close();
    // A clean stop's last line: the listeners and the stores are closed.
    if (signal) log.info('stopped', { signal, ms: Math.round(performance.now() - started) });
  };
  try {
    sockets.push(await listen(app, config.host, config.httpPort, 'SVC_HTTP_PORT'));
    sockets.push(await listen(modelApp, config.host, config.model.httpPort, 'HTTP_PORT'));
    if (s3App) sockets.push(await listen(s3App, config.host, config.s3Api.port!, 'SVC_S3_API_PORT'));
  } catch (err) {
    await close();
    throw err;
  }
  const [port, modelPort, s3Socket] = sockets.map((socket) => uws.us_socket_local_port(socket)) as [number, number, number?];
  const s3Port = s3Socket ?? null;
  engine.liveNodes.listening(`${config.host}:${port}`);
  const blockHashing = engine.scanner.pairHashing ? 'scanning thread (native SHA-256 pair)' : 'worker threads (node:crypto)';
  log.info('listening', { host: config.host, port, modelPort, s3Port, fsRoot: config.fsRoot, durability: config.durability, workers: config.workers, blockHashing, bodyCopy: nativeSharedCopy ? 'native memcpy' : 'TypedArray.set' });
  // SIGHUP: the tenant policy and the S3 keys are read again (an invalid file keeps what is in force).
  const reloadPolicies = () => {
    void engine.policies.reload();
    engine.s3Keys.reload();
  };
  return { port, modelPort, s3Port, close, reloadPolicies };
}

/** A port that cannot be bound: in use (by any process: the socket is exclusive) or not allowed. */
class ListenError extends Error {}

/**
 * Fails with a ListenError when `port` cannot be bound now (bound exclusively and released at
 * once). Only an early word: `listen` still decides, should another process take the port between.
 */
async function portFree(host: string, port: number, variable: string): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', () => reject(new ListenError(`cannot listen on ${host}:${port} (${variable}): the port is in use or not available`)));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

function listen(app: uWS.TemplatedApp, host: string, port: number, variable: string): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    const fail = () => reject(new ListenError(`cannot listen on ${host}:${port} (${variable}): the port is in use or not available`));
    // Exclusive: without it, a second server on the same port would share its connections.
    const exclusive = app.listen as unknown as (host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void) => void;
    exclusive.call(app, host, port, (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) => (socket ? resolve(socket) : fail()));
  });
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined) return usageError('which command? (svc serve runs the server)');
  if (command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const client = await import('../cli/main.js');
  // `svc help COMMAND` is `svc COMMAND --help`.
  const topic = command === 'help' ? rest[0] : undefined;
  if (command === '--help' || command === '-h' || (command === 'help' && (topic === undefined || topic === 'serve'))) {
    process.stdout.write(helpText());
    return;
  }
  if (topic !== undefined) {
    if (!client.isClientCommand(topic) && topic !== 'catalog' && topic !== 'reload') return usageError(`unknown command "${topic}"`);
    return main([topic, '--help']);
  }
  if (command === 'catalog') {
    const { runCatalogCommand } = await import('./catalog-command.js');
    process.exitCode = await runCatalogCommand(rest);
    return;
  }
  if (command === 'reload') {
    const { runReloadCommand } = await import('./reload-command.js');
    process.exitCode = runReloadCommand(rest);
    return;
  }
  if (client.isClientCommand(command)) {
    process.exitCode = await client.run(argv);
    return;
  }
  if (command !== 'serve') return usageError(`unknown command "${command}"`);
  let help: boolean | undefined;
  try {
    help = parseArgs({ args: rest, options: { help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }).values.help;
  } catch (err) {
    process.stderr.write(`svc serve: ${parseArgsMessage(err)}: the server is configured by environment variables only (svc serve --help)\n`);
    process.exitCode = 2;
    return;
  }
  if (help) {
    process.stdout.write(helpText());
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
  let stopAsked: NodeJS.Signals | undefined;
  const close = (running: RunningServer, signal: NodeJS.Signals) => void running.close(signal).then(() => process.exit(0), () => process.exit(1));
  const stop = (signal: NodeJS.Signals) => {
    if (stopAsked) return;
    stopAsked = signal;
    if (server) close(server, signal);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // The tenant policy file and the S3 keys file are read again on SIGHUP (an invalid one keeps what is in force).
  process.on('SIGHUP', () => server?.reloadPolicies());
  try {
    server = await serve(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      // Found while starting (a legacy repository root that does not exist).
      process.stderr.write(`svc: invalid configuration: ${err.message}\n`);
      process.exit(2);
    }
    if (err instanceof StartRefused) {
      // A configuration that cannot work (a missing bucket, refused credentials, an unreachable
      // PostgreSQL or S3): one line naming the variable and the cause.
      process.stderr.write(`svc: ${err.message}\n`);
      process.exit(2);
    }
    if (!(err instanceof ListenError || err instanceof DataDirLockError || err instanceof PolicyError || err instanceof KeysFileError || err instanceof S3OnlyRefused)) throw err;
    process.stderr.write(`svc: ${err.message}\n`);
    process.exit(1);
  }
  if (stopAsked) return close(server, stopAsked);
  // One line on stdout for whoever started us (tests, scripts): where to connect.
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: server.port, modelPort: server.modelPort, s3Port: server.s3Port })}\n`);
}

function usageError(message: string): void {
  process.stderr.write(`svc: ${message}\n\n${helpText()}`);
  process.exitCode = 2;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  void main(process.argv.slice(2));
}
