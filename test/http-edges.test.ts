// The HTTP layer under abuse, as ordinary clients meet it: HEAD never carries a body (a keep-alive
// client would read it as the next answer), an answer given before the body's end reaches Node's
// http client, curl and a client that reads only after sending, conflicting framing is refused,
// the answers uWS writes by itself are JSON and nothing names the library, and curl's defaults do
// not store the wrong thing.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawRequest, seededBytes, upload } from './helpers/http.js';
import { expectConforms, modelApi } from './helpers/openapi.js';
import { syntheticPdf } from './helpers/pdf.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const MiB = 1024 * 1024;
const run = promisify(execFile);

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Bytes of the request body written before the answer ended. */
  sent: number;
}

/**
 * One request with Node's http client: the body is written in 64 KiB pieces (backpressure
 * respected) while the answer may already come; resolves with the answer, rejects on a client error.
 */
function request(port: number, method: string, pathname: string, headers: http.OutgoingHttpHeaders, body?: { bytes: number }, agent?: http.Agent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const req = http.request({ host: '127.0.0.1', port, method, path: pathname, headers, agent: agent ?? false }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('latin1');
      res.on('data', (d: string) => (text += d));
      res.on('error', reject);
      res.on('end', () => {
        resolve({ status: res.statusCode!, headers: res.headers, body: text, sent });
        // A client that got its answer stops sending (the server may have stopped reading).
        if (!req.writableFinished) req.destroy();
      });
    });
    // Once the answer came, a failed write of the rest (the client itself closes on
    // `Connection: close`) is not a lost answer.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (!body) return void req.end();
    const piece = Buffer.alloc(64 * 1024, 7);
    const pump = () => {
      while (!answered && sent < body.bytes) {
        const n = Math.min(piece.length, body.bytes - sent);
        sent += n;
        if (!req.write(piece.subarray(0, n))) return void req.once('drain', pump);
      }
      if (!answered) req.end();
    };
    pump();
  });
}

const envelope = (a: { body: string }) => JSON.parse(a.body) as { error: string; message: string };

/** An answer of the model listener checked against its document (helpers/openapi.ts). */
function expectModelConforms(answer: { status: number; headers: Record<string, string | string[] | undefined>; body: string | Buffer }, method: string, pathname: string): void {
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  expectConforms({ status: answer.status, headers, text: method === 'HEAD' ? undefined : answer.body.toString() }, method, pathname, modelApi());
}

describe('HEAD never carries a body', () => {
  let server: TestServer;
  let id: string;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' });
    id = (await upload(server.url, seededBytes(5000, 1))).json.blob.id;
  });
  afterAll(async () => {
    agent.destroy();
    await server.stop();
  });

  it('on every route and status of both listeners, over one keep-alive connection', async () => {
    const missing = `sha-256:${'0'.repeat(64)}:5`;
    const cases: Array<[port: number, path: string, headers: Record<string, string>, status: number]> = [
      [server.port, `/api/v1/blobs/${id}`, {}, 200],
      [server.port, `/api/v1/blobs/${id}`, { Range: 'bytes=0-9' }, 206],
      [server.port, `/api/v1/blobs/${missing}`, {}, 404],
      [server.port, '/api/v1/blobs/not-an-id', {}, 400],
      [server.port, `/api/v1/blobs/${id}`, { Range: 'bytes=999999-' }, 416],
      [server.port, `/api/v1/blobs/${id}`, { 'If-None-Match': `"${id}"` }, 304],
      [server.port, `/api/v1/blobs/${id}`, { 'If-Match': '"other"' }, 412],
      [server.port, '/api/v1/blobs?limit=abc', {}, 405],
      [server.port, '/nowhere', {}, 404],
      [server.port, '/v1/documents/x/content', {}, 401],
      [server.port, '/v1/nowhere', {}, 404],
      [server.port, `/api/v1/uploads/${randomUUID()}`, {}, 404],
      [server.modelPort, '/models/missing', {}, 404],
      [server.modelPort, '/nowhere', {}, 404],
    ];
    for (const [port, p, headers, status] of cases) {
      const head = await request(port, 'HEAD', p, headers, undefined, agent);
      expect([p, head.status, head.body]).toEqual([p, status, '']);
      // The same headers a GET gets, Content-Length included (none on 304); then the connection
      // still parses: the next answer on it is whole.
      const get = await request(port, 'GET', p, headers, undefined, agent);
      if (port === server.modelPort) {
        expectModelConforms(head, 'HEAD', p);
        expectModelConforms(get, 'GET', p);
      }
      if (p.startsWith('/api/v1/') && status !== 405) expect(get.status).toBe(status);
      // Routes that serve both methods give HEAD the GET's Content-Length; elsewhere HEAD meets the
      // catch-all, whose message names the method.
      const length = head.headers['content-length'];
      if (p.startsWith('/api/v1/') && status !== 405 && status !== 304) expect([p, length]).toEqual([p, String(Buffer.byteLength(get.body, 'latin1'))]);
      else if (status !== 304) expect(Number(length)).toBeGreaterThan(0);
      if (status === 304) expect(head.headers['content-length']).toBeUndefined();
    }
  });

  it('an oversized request line gets 431 in the JSON envelope and the connection closes', async () => {
    const res = await rawRequest(server.port, `HEAD /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(res?.status).toBe(431);
    expect(res?.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res!.body.toString()).error).toBe('headers_too_large');
  });
});

describe('answers before the body ends reach the client', () => {
  let server: TestServer;
  let dir: string;
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_MAX_UPLOAD_BYTES: '1MiB', SVC_UPLOAD_MAX_PART_BYTES: '1MiB', SVC_HTTP_LINGER_BYTES: '16MiB' });
    dir = tempRoot('svc-edges-');
  });
  afterAll(async () => {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a declared Content-Length over the maximum: Node's http client gets 413 and the connection serves the next request", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const a = await request(server.port, 'POST', '/api/v1/blobs', { 'Content-Length': 8 * MiB }, { bytes: 8 * MiB }, agent);
      expect([a.status, envelope(a).error]).toEqual([413, 'payload_too_large']);
      expect(a.headers.connection).not.toBe('close');
      const next = await request(server.port, 'GET', '/api/health/live', {}, undefined, agent);
      expect(next.status).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  // A rest that is not read: the client must not have asked to close (Node's default agent keeps
  // connections alive), since uWS then closes with the answer (docs/blob-api.md, "Early answers").
  it('a body over the maximum without a declared length (chunked): 413, and the connection closes', async () => {
    const agent = new http.Agent({ keepAlive: true });
    const a = await request(server.port, 'POST', '/api/v1/blobs', { 'Transfer-Encoding': 'chunked' }, { bytes: 64 * MiB }, agent);
    agent.destroy();
    expect([a.status, envelope(a).error, a.headers.connection]).toEqual([413, 'payload_too_large', 'close']);
    expect(a.sent).toBeLessThan(64 * MiB);
  });

  it('a rest beyond SVC_HTTP_LINGER_BYTES is not read: the answer says Connection: close and the client stops', async () => {
    const agent = new http.Agent({ keepAlive: true });
    const a = await request(server.port, 'POST', '/api/v1/blobs', { 'Content-Length': 1024 * MiB }, { bytes: 1024 * MiB }, agent);
    agent.destroy();
    expect([a.status, envelope(a).error, a.headers.connection]).toEqual([413, 'payload_too_large', 'close']);
    expect(a.sent).toBeLessThan(1024 * MiB);
  });

  it('a resumable part over the maximum part size: 400 invalid_upload', async () => {
    const id = randomUUID();
    expect((await fetch(`${server.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } })).status).toBe(201);
    const a = await request(server.port, 'PATCH', `/api/v1/uploads/${id}`, { 'Upload-Offset': 0, 'Upload-Part-Id': randomUUID(), 'Content-Length': 6 * MiB }, { bytes: 6 * MiB });
    expect([a.status, envelope(a).error]).toEqual([400, 'invalid_upload']);
  });

  it('an upload without a token, from a client that asked to close the connection: 401 once the body is in', async () => {
    const a = await request(server.port, 'PUT', `/v1/uploads/${randomUUID()}/bytes`, { 'Content-Length': 8 * MiB }, { bytes: 8 * MiB });
    expect([a.status, envelope(a).error]).toEqual([401, 'unauthenticated']);
  });

  it('a client that reads only once it has sent everything still gets the answer', async () => {
    const body = Buffer.alloc(8 * MiB, 1);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, '127.0.0.1');
      let text = '';
      socket.on('error', reject);
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.write(`POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`);
      // Everything written before anything is read: the server must drop the rest, not reset.
      socket.pause();
      socket.write(body, () => {
        socket.resume();
        setTimeout(() => {
          socket.destroy();
          resolve(text);
        }, 300);
      });
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('"error":"payload_too_large"');
  });

  it('curl gets the answer and exits 0', async () => {
    const file = path.join(dir, 'big.bin');
    fs.writeFileSync(file, Buffer.alloc(8 * MiB, 3));
    const { stdout } = await run('curl', ['-sS', '-o', '-', '-w', '\n%{http_code}', '--data-binary', `@${file}`, `${server.url}/api/v1/blobs`]);
    const [body, code] = stdout.split('\n');
    expect(code).toBe('413');
    expect(JSON.parse(body!).error).toBe('payload_too_large');
  });
});

describe('framing and what the server says of itself', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' });
  });
  afterAll(() => server.stop());

  it('two different Content-Length headers: 400 in the envelope, and the connection closes', async () => {
    const res = await rawRequest(server.port, 'POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcdGET /api/health/live HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(res?.status).toBe(400);
    expect(res?.headers.connection).toBe('close');
    expect(JSON.parse(res!.body.toString())).toEqual({ error: 'invalid_request', message: 'Conflicting Content-Length headers (3, 4)' });
    // Nothing after the refused request was answered.
    expect(res!.raw.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    const model = await rawRequest(server.modelPort, 'POST /models/x/transform HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd');
    expect([model?.status, JSON.parse(model!.body.toString()).code]).toEqual([400, 400]);
    expectModelConforms(model!, 'POST', '/models/x/transform');
  });

  it('HTTP/1.0 and malformed framing get the JSON envelope; no answer names the library', async () => {
    const old = await rawRequest(server.port, 'GET /api/health/live HTTP/1.0\r\n\r\n');
    expect(old?.status).toBe(505);
    expect(JSON.parse(old!.body.toString()).error).toBe('http_version_not_supported');
    const bad = await rawRequest(server.port, 'POST /api/v1/blobs HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n');
    expect(bad?.status).toBe(400);
    expect(JSON.parse(bad!.body.toString()).error).toBe('invalid_request');
    for (const res of [old, bad, await rawRequest(server.port, 'GET /api/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'), await rawRequest(server.modelPort, 'GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')]) {
      expect(res!.raw).not.toMatch(/uWebSockets/i);
    }
  });
});

describe("curl's defaults", () => {
  let server: TestServer;
  let dir: string;
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' });
    dir = tempRoot('svc-curl-');
  });
  afterAll(async () => {
    await server.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('--data-binary without -H stores the sniffed type, not application/x-www-form-urlencoded', async () => {
    const file = path.join(dir, 'report.pdf');
    fs.writeFileSync(file, syntheticPdf(4, 1));
    const { stdout } = await run('curl', ['-sS', '--data-binary', `@${file}`, `${server.url}/api/v1/blobs`]);
    expect(JSON.parse(stdout).blob.mediaType).toBe('application/pdf');
  });

  it('-F file=@report.pdf is 415 unsupported_media_type saying how to send the bytes; nothing is stored', async () => {
    const file = path.join(dir, 'report.pdf');
    fs.writeFileSync(file, syntheticPdf(4, 2));
    const { stdout } = await run('curl', ['-sS', '-w', '\n%{http_code}', '-F', `file=@${file}`, `${server.url}/api/v1/blobs`]);
    const [body, code] = stdout.split('\n');
    expect(code).toBe('415');
    const e = JSON.parse(body!);
    expect(e.error).toBe('unsupported_media_type');
    expect(e.message).toContain('--data-binary');
    const inventory = (await (await fetch(`${server.url}/api/v1/blobs`)).json()) as { blobs: unknown[] };
    expect(inventory.blobs).toHaveLength(1);
  });
});
