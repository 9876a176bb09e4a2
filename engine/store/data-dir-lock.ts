// One process at a time owns a data directory: it holds a Unix socket listening at
// <root>/svc.lock for its whole life (an abstract socket named by the directory where that path is
// too long for a socket address). The kernel closes the socket on any death, kill -9 included, so
// the lock is never left stuck: a socket file left behind answers no connection and is taken over.
// A process that finds the lock held connects to it and learns the holder's pid.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export class DataDirInUse extends Error {}

export interface DataDirLock {
  release(): Promise<void>;
}

/** Longest socket path that fits sockaddr_un on Linux and macOS (with its terminating NUL). */
const MAX_SOCKET_PATH = 103;

export async function lockDataDir(root: string): Promise<DataDirLock> {
  const file = path.join(root, 'svc.lock');
  const abstract = Buffer.byteLength(file) > MAX_SOCKET_PATH && process.platform === 'linux';
  const address = abstract ? `\0svc-lock-${createHash('sha256').update(fs.realpathSync(root)).digest('hex')}` : file;
  const server = net.createServer((socket) => socket.end(`${process.pid}\n`));
  for (let attempt = 0; ; attempt++) {
    const error = await listen(server, address);
    if (!error) break;
    if (error.code !== 'EADDRINUSE') throw new Error(`cannot lock the data directory ${root} (${file}): ${error.message}`);
    const holder = await ask(address);
    if (holder !== undefined || abstract || attempt > 0) {
      throw new DataDirInUse(`the data directory ${root} is in use by ${holder ? `process ${holder}` : 'another process'} (SVC_FS_ROOT): one svc process at a time`);
    }
    // Left by a process that died: nothing listens on it any more.
    fs.rmSync(file, { force: true });
  }
  // The lock does not keep the process alive by itself.
  server.unref();
  return {
    release: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
      }),
  };
}

function listen(server: net.Server, address: string): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const onError = (err: NodeJS.ErrnoException) => resolve(err);
    server.once('error', onError);
    server.listen(address, () => {
      server.off('error', onError);
      resolve(undefined);
    });
  });
}

/** The pid the holder answers with; undefined when nothing listens (the lock is stale). */
function ask(address: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    let answer = '';
    const socket = net.connect(address);
    socket.setTimeout(2000, () => socket.destroy());
    socket.on('data', (d) => (answer += d));
    socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? undefined : 'unknown'));
    socket.on('close', () => resolve(answer.trim() || 'unknown'));
  });
}
