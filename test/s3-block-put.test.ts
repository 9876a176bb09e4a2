// A block PUT's failures and retries (engine/store/s3/block-put.ts) against a server that answers
// as told: throttled answers retried, then thrown as the SDK throws them; an error answer read to
// its first S3_ERROR_ANSWER_MAX_BYTES; a connection closed under the request retried, then thrown
// as node:http reports it (ECONNRESET), so the ingest answers 503 (isUnreachable). That real
// servers accept the PUT is in test/s3-preconditions.test.ts (s3rver and radosgw). A server that
// goes silent (a head never sent, a body that stops) is given up after SVC_S3_TIMEOUT.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { S3ServiceException } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isUnreachable } from '../engine/base/errors.js';
import { S3_ERROR_ANSWER_MAX_BYTES } from '../engine/base/limits.js';
import { S3BlockStore } from '../engine/store/s3/block-store.js';

type Answer = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;

/** What the server does with the next requests, in order (the last one again after the list ends). */
let answers: Answer[] = [];
let received: Array<{ path: string; headers: http.IncomingHttpHeaders; body: Buffer }> = [];
const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (d: Buffer) => parts.push(d));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    received.push({ path: req.url ?? '', headers: req.headers, body });
    const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
    answer(req, res, body);
  });
});

const xmlError = (status: number, code: string, padding = 0): Answer => (_req, res) => {
  res.writeHead(status, { 'content-type': 'application/xml', 'x-amz-request-id': `req-${code}` });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>told to</Message></Error>${' '.repeat(padding)}`);
};
const ok: Answer = (_req, res) => res.writeHead(200, { etag: '"x"' }).end();
const hangUp: Answer = (req) => req.socket.destroy();
/** Reads the request and answers nothing: a paused server. */
const silent: Answer = () => {};
/** Answers the head and half the body, then nothing more. */
const stalls: Answer = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) });
  res.write(bytes.subarray(0, bytes.length / 2));
};

let store: S3BlockStore;
/** The same server with SVC_S3_TIMEOUT at IDLE_MS. */
let impatient: S3BlockStore;
const IDLE_MS = 300;
const bytes = randomBytes(100_000);
const hex = createHash('sha256').update(bytes).digest('hex');
const pieces = [bytes.subarray(0, 30_000), bytes.subarray(30_000)];

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.env.AWS_ACCESS_KEY_ID = 'AKIASVCBLOCKPUTTEST1';
  process.env.AWS_SECRET_ACCESS_KEY = 'block-put-test-secret';
  const { port } = server.address() as AddressInfo;
  store = new S3BlockStore({ kind: 's3', endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', bucket: 'b', prefix: 'p/', forcePathStyle: true, conditionalPut: true });
  impatient = new S3BlockStore({ kind: 's3', endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', bucket: 'b', prefix: 'p/', forcePathStyle: true, conditionalPut: true, idleTimeoutMs: IDLE_MS });
});
afterAll(async () => {
  server.closeAllConnections();
  await store.close();
  await impatient.close();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  received = [];
});

describe('block PUT', () => {
  it('sends the pieces as one signed body, If-None-Match: * and the SHA-256; 412 is present', async () => {
    answers = [ok];
    expect(await store.put(hex, bytes.length, pieces)).toBe('written');
    answers = [xmlError(412, 'PreconditionFailed')];
    expect(await store.put(hex, bytes.length, pieces)).toBe('present');
    expect(received.map((r) => r.path)).toEqual([`/b/p/blocks/${hex.slice(0, 3)}/${hex}-${bytes.length}`, `/b/p/blocks/${hex.slice(0, 3)}/${hex}-${bytes.length}`]);
    const { headers, body } = received[0]!;
    expect(body.equals(bytes)).toBe(true);
    expect([headers['content-length'], headers['x-amz-content-sha256'], headers['if-none-match'], headers['content-type']]).toEqual([String(bytes.length), hex, '*', 'application/octet-stream']);
    expect(headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIASVCBLOCKPUTTEST1\/\d{8}\/us-east-1\/s3\/aws4_request, SignedHeaders=content-length;content-type;host;if-none-match;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/);
  });

  it('retries SlowDown (503) and then writes; after 3 attempts throws it as the SDK does', async () => {
    answers = [xmlError(503, 'SlowDown'), xmlError(503, 'SlowDown'), ok];
    expect(await store.put(hex, bytes.length, pieces)).toBe('written');
    expect(received.length).toBe(3);
    expect(received.every((r) => r.body.equals(bytes))).toBe(true);
    received = [];
    answers = [xmlError(503, 'SlowDown')];
    const err = (await store.put(hex, bytes.length, pieces).catch((e: unknown) => e)) as S3ServiceException;
    expect(err).toBeInstanceOf(S3ServiceException);
    expect([err.name, err.$metadata.httpStatusCode, err.$metadata.attempts, err.$metadata.requestId, err.$fault]).toEqual(['SlowDown', 503, 3, 'req-SlowDown', 'server']);
    expect(isUnreachable(err)).toBe(true);
    expect(received.length).toBe(3);
  }, 20_000);

  it('reads an error answer to its first S3_ERROR_ANSWER_MAX_BYTES and does not retry a refusal', async () => {
    answers = [xmlError(403, 'AccessDenied', 4 * S3_ERROR_ANSWER_MAX_BYTES)];
    const err = (await store.put(hex, bytes.length, pieces).catch((e: unknown) => e)) as S3ServiceException;
    expect([err.name, err.$metadata.httpStatusCode, err.message]).toEqual(['AccessDenied', 403, 'told to']);
    expect(received.length).toBe(1);
    // The connection is kept: the next PUT is answered.
    answers = [ok];
    expect(await store.put(hex, bytes.length, [bytes])).toBe('written');
  });

  it('a connection closed under the request is retried, then thrown as ECONNRESET (unreachable)', async () => {
    answers = [hangUp, ok];
    expect(await store.put(hex, bytes.length, pieces)).toBe('written');
    received = [];
    answers = [hangUp];
    const err = (await store.put(hex, bytes.length, pieces).catch((e: unknown) => e)) as NodeJS.ErrnoException;
    expect(err.code).toBe('ECONNRESET');
    expect(isUnreachable(err)).toBe(true);
    expect(received.length).toBe(3);
  }, 20_000);

  it('a server that answers nothing is given up after SVC_S3_TIMEOUT, retried, then thrown as ETIMEDOUT (unreachable)', async () => {
    answers = [silent, ok];
    expect(await impatient.put(hex, bytes.length, pieces)).toBe('written');
    expect(received.length).toBe(2);
    received = [];
    answers = [silent];
    const started = performance.now();
    const err = (await impatient.put(hex, bytes.length, pieces).catch((e: unknown) => e)) as NodeJS.ErrnoException;
    expect(err.code).toBe('ETIMEDOUT');
    expect(isUnreachable(err)).toBe(true);
    expect(received.length).toBe(3);
    // Three waits of IDLE_MS (and the retries' pauses): bounded, not forever.
    expect(performance.now() - started).toBeGreaterThanOrEqual(3 * IDLE_MS);
    server.closeAllConnections();
  }, 20_000);

  it('a block GET through the SDK is given up after SVC_S3_TIMEOUT: without a head (retried 3 times), or stopping mid-body', async () => {
    answers = [silent];
    let err = (await impatient.read(hex, bytes.length).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('TimeoutError');
    expect(isUnreachable(err)).toBe(true);
    // The SDK's standard retries: 3 attempts of the live key (the quarantine copy is asked after a 404 only).
    expect(received.length).toBe(3);
    server.closeAllConnections();
    received = [];
    answers = [stalls];
    err = (await impatient.read(hex, bytes.length).catch((e: unknown) => e)) as Error;
    expect(err.name).toBe('TimeoutError');
    expect(isUnreachable(err)).toBe(true);
    // The answer had begun: the SDK handed the body over, and the read fails (the reader's caller answers 503).
    expect(received.length).toBe(1);
    server.closeAllConnections();
  }, 20_000);
});
