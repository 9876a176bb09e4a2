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
 * once it listens; exits on SIGTERM. With TUS_S3_ENDPOINT it stores in that S3 server's bucket
 * (TUS_S3_BUCKET) with `@tus/s3-store` instead.
 */
import http from 'node:http';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import { Server } from '@tus/server';
import { benchArgs } from './args.js';

const args = benchArgs({
  usage: 'usage: node dist/bench/tus-server.js <directory> [port]',
  options: {},
  positionals: [
    { name: '<directory>', help: 'where the file store keeps the uploads' },
    { name: 'port', help: 'the port on 127.0.0.1 (default 0: the kernel picks a free one)', optional: true },
  ],
});
const [directory, portText] = args.positionals as [string, string?];
const port = Number(portText ?? 0);
if (!directory) args.fail('<directory> must not be empty');
if (!Number.isInteger(port) || port < 0 || port > 65535) args.fail(`port must be an integer from 0 to 65535, not "${portText}"`);

// With TUS_S3_ENDPOINT (and TUS_S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY): @tus/s3-store
// on that S3 server instead of the file store (bench/tus-clients.ts --pg-s3).
const s3 = process.env.TUS_S3_ENDPOINT;
const datastore = s3
  ? new S3Store({
      partSize: 8 * 1024 * 1024,
      s3ClientConfig: {
        endpoint: s3,
        bucket: process.env.TUS_S3_BUCKET!,
        region: process.env.AWS_REGION ?? 'us-east-1',
        forcePathStyle: true,
        // As svc's own client: radosgw refuses the SDK's default CRC32 trailers on PutObject/UploadPart.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        credentials: { accessKeyId: process.env.AWS_ACCESS_KEY_ID!, secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY! },
      },
    })
  : new FileStore({ directory });
const tus = new Server({ path: '/files', datastore });
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
