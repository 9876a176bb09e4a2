/**
 * The tus reference server for the resumable-upload scenario (bench/resumable.ts): `@tus/server`
 * with `@tus/file-store` on node:http, as its README shows, in a process of its own so that it
 * does not share a thread with the bench's client (the same arrangement as svc).
 *
 *   node dist/bench/tus-server.js <directory> [port]
 *
 * Listens on 127.0.0.1 (port 0: the kernel picks a free one), serves tus 1.0.0 under /files and
 * stores uploads in <directory> (FileStore: one file per upload plus its `.json` metadata; it
 * writes with fs streams and never fsyncs). Prints `{"event":"listening","port":N}` on stdout
 * once it listens; exits on SIGTERM.
 */
import http from 'node:http';
import { FileStore } from '@tus/file-store';
import { Server } from '@tus/server';

const directory = process.argv[2];
const port = Number(process.argv[3] ?? 0);
if (!directory || !Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write('usage: node dist/bench/tus-server.js <directory> [port]\n');
  process.exit(2);
}

const tus = new Server({ path: '/files', datastore: new FileStore({ directory }) });
const server = http.createServer((req, res) => {
  tus.handle(req, res).catch((err: unknown) => {
    process.stderr.write(`tus-server: ${req.method} ${req.url}: ${err instanceof Error ? err.stack : String(err)}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.on('clientError', (err, socket) => {
  process.stderr.write(`tus-server: client error: ${err.message}\n`);
  socket.destroy();
});
server.listen(port, '127.0.0.1', () => {
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: bound, directory })}\n`);
});

process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
});
