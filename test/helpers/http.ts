import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { checkedFetch } from './openapi.js';

/** `fetch` with every answer checked against the API description (./openapi.ts): the blob tests import it as their fetch. */
export { checkedFetch };

export const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
export const contentId = (b: Uint8Array) => `sha-256:${sha256(b)}:${b.length}`;

/** Deterministic pseudo-random bytes (xorshift), so failures reproduce. */
export function seededBytes(size: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(Math.ceil(size / 4) * 4);
  let x = seed | 0 || 1;
  for (let i = 0; i < out.length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out.writeInt32LE(x, i);
  }
  return out.subarray(0, size);
}

export const random = (n: number) => randomBytes(n);

export async function upload(url: string, body: Uint8Array, headers: Record<string, string> = {}) {
  const res = await checkedFetch(`${url}/api/v1/blobs`, { method: 'POST', body: body as Uint8Array<ArrayBuffer>, headers });
  return { res, json: (await res.json()) as any };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  raw: string;
}

/** Sends raw bytes and reads until the server closes or `waitMs` passes: for framing tests. */
export function rawRequest(port: number, data: string | Buffer, waitMs = 1500, options: { endAfterWrite?: boolean } = {}): Promise<RawResponse | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(data);
      if (options.endAfterWrite) socket.end();
    });
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseRaw(Buffer.concat(chunks)));
    });
  });
}

function parseRaw(buf: Buffer): RawResponse | null {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(head[0].split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status, headers, body: buf.subarray(end + 4), raw: buf.toString('latin1') };
}
