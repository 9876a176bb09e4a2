import { createHash } from 'node:crypto';
import { closeSync, createReadStream, fsyncSync, openSync, readSync, writeSync } from 'node:fs';
import http from 'node:http';
import { type CpuReport, CpuWindow } from './cpu.js';
import { ByteStream } from './prng.js';
import { RawConnection, getRequest } from './raw-http.js';
import { RssSampler, type ServerProcess } from './server-process.js';

const MiB = 1024 * 1024;

/**
 * Writes `size` deterministic random bytes to `file` in 1 MiB chunks (never all in memory), and
 * flushes them: otherwise the kernel writes this file back during the measured upload, and the
 * server's block writes compete with the bench's own (measured: 0.09x instead of 0.2x).
 */
export function writeRandomFile(file: string, size: number, seed: string): void {
  const stream = new ByteStream(seed);
  const fd = openSync(file, 'w');
  try {
    for (let left = size; left > 0; ) {
      const chunk = stream.bytes(Math.min(left, MiB));
      for (let off = 0; off < chunk.length; ) off += writeSync(fd, chunk, off);
      left -= chunk.length;
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface ShaResult {
  bytes: number;
  /** Time inside hash.update/digest only (no file reads). */
  seconds: number;
  mbPerSecond: number;
  hex: string;
  cpu: CpuReport;
}

/** node:crypto SHA-256 on this thread over the file, 1 MiB updates; only hashing time counts. */
export function measureSha256(file: string): ShaResult {
  const fd = openSync(file, 'r');
  const buf = Buffer.allocUnsafe(MiB);
  const hash = createHash('sha256');
  const window = new CpuWindow();
  let total = 0;
  let ns = 0n;
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      const t = process.hrtime.bigint();
      hash.update(n === buf.length ? buf : buf.subarray(0, n));
      ns += process.hrtime.bigint() - t;
      total += n;
    }
  } finally {
    closeSync(fd);
  }
  const t = process.hrtime.bigint();
  const hex = hash.digest('hex');
  ns += process.hrtime.bigint() - t;
  const seconds = Number(ns) / 1e9;
  return { bytes: total, seconds, mbPerSecond: total / seconds / 1e6, hex, cpu: window.end() };
}

export interface UploadResponse {
  blob: { id: string; size: number; mediaType: string; chunker: string; blockCount: number; createdAt: string };
  freshBlocks: number;
  duplicateBlocks: number;
  durationSeconds: number;
}

export interface LargeUploadResult {
  bytes: number;
  seconds: number;
  mbPerSecond: number;
  /** From the last body byte handed to the socket to the 201 response. */
  tailSeconds: number;
  response: UploadResponse;
  cpu: CpuReport;
  rss: { baselineBytes: number; peakBytes: number; growthBytes: number; samples: number; hwmAfterBytes?: number };
}

/**
 * POST the file with Content-Length (node:http, streamed from disk) while sampling the server's
 * RSS every 50 ms. Baseline: the median of five samples taken just before the upload.
 */
export async function uploadFile(server: ServerProcess, file: string, size: number, contentType: string, timeoutMs: number): Promise<LargeUploadResult> {
  const pre: number[] = [];
  for (let i = 0; i < 5; i++) {
    const v = server.memoryField('VmRSS');
    if (v !== undefined) pre.push(v);
    await new Promise((r) => setTimeout(r, 50));
  }
  pre.sort((a, b) => a - b);
  const baseline = pre[Math.floor(pre.length / 2)] ?? 0;
  const sampler = new RssSampler(server, 50);
  const window = new CpuWindow(server.pid);
  sampler.start();
  const started = performance.now();
  let lastByteAt = started;
  let doneAt = started;
  try {
    const body = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        req.destroy(new Error(`upload did not complete within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const req = http.request(
        {
          host: '127.0.0.1',
          port: server.port,
          method: 'POST',
          path: '/api/v1/blobs',
          agent: false,
          headers: { 'Content-Type': contentType, 'Content-Length': String(size) },
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (d: Buffer) => parts.push(d));
          res.on('end', () => {
            doneAt = performance.now();
            clearTimeout(timer);
            const text = Buffer.concat(parts).toString('utf8');
            if (res.statusCode !== 201) reject(new Error(`upload answered HTTP ${res.statusCode}: ${text.slice(0, 500)}`));
            else resolve(text);
          });
          res.on('error', (err) => {
            clearTimeout(timer);
            reject(err);
          });
        },
      );
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(new Error(`upload request failed: ${err.message}${server.alive ? '' : `; ${server.describeExit()}`}`));
      });
      req.on('finish', () => {
        lastByteAt = performance.now();
      });
      const src = createReadStream(file, { highWaterMark: MiB });
      src.on('error', (err) => req.destroy(err));
      src.pipe(req);
    });
    const seconds = (doneAt - started) / 1000;
    sampler.stop();
    const cpu = window.end();
    return {
      bytes: size,
      seconds,
      mbPerSecond: size / seconds / 1e6,
      tailSeconds: (doneAt - lastByteAt) / 1000,
      response: JSON.parse(body) as UploadResponse,
      cpu,
      rss: { baselineBytes: baseline, peakBytes: sampler.peak, growthBytes: Math.max(0, sampler.peak - baseline), samples: sampler.samples, hwmAfterBytes: server.memoryField('VmHWM') },
    };
  } finally {
    sampler.stop();
  }
}

export interface LargeDownloadResult {
  bytes: number;
  seconds: number;
  mbPerSecond: number;
  status: number;
  cpu: CpuReport;
}

/** GET the blob over a raw socket (1 MiB reused read buffer), counting and discarding the bytes. */
export async function downloadBlob(server: ServerProcess, id: string, timeoutMs: number): Promise<LargeDownloadResult> {
  const conn = await RawConnection.connect(server.port, '127.0.0.1', MiB);
  const window = new CpuWindow(server.pid);
  let timer: NodeJS.Timeout | undefined;
  try {
    const started = performance.now();
    const res = await Promise.race([
      conn.request(getRequest(`/api/v1/blobs/${id}`), false),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`download did not complete within ${timeoutMs / 1000} s`)), timeoutMs);
      }),
    ]);
    const seconds = (res.doneAt - started) / 1000;
    const cpu = window.end();
    if (res.status !== 200) throw new Error(`download answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 500)}`);
    return {
      bytes: res.bodyBytes,
      seconds,
      mbPerSecond: res.bodyBytes / seconds / 1e6,
      status: res.status,
      cpu,
    };
  } finally {
    clearTimeout(timer);
    conn.close();
  }
}
