// The S3 listener at its limits, from outside, security on: what S3 allows at its edge is served
// (the longest key with the most user metadata, percent-encoded byte by byte, which takes more than
// uWebSockets.js's default 4 KiB of request line and headers), one byte over is refused with S3's
// code, a body without a length and a declared length over the tenant's object limit are refused
// before a byte is read, and oversized headers are 431. Nothing refused is stored.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { CreateBucketCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3_KEY_MAX_BYTES, S3_USER_METADATA_MAX_BYTES } from '../engine/base/limits.js';
import { Sha256, s3Client, s3Failure } from './helpers/s3-client.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const KEY = { accessKeyId: 'AKIALIMITS000001', secretAccessKey: 'limits-secret-0123456789abcdefghijklmnop' };
const MAX_OBJECT_BYTES = 1024 * 1024;
const BUCKET = 'limits';

let server: TestServer;
let s3: S3Client;
const dir = tempRoot('svc-s3-limits-');

beforeAll(async () => {
  const keysFile = path.join(dir, 'keys.json');
  fs.writeFileSync(keysFile, JSON.stringify({ keys: [{ ...KEY, tenant: 'team-l', sub: 'robot-l', scope: 'blob.read blob.write blob.delete' }] }));
  const policyFile = path.join(dir, 'policy.json');
  fs.writeFileSync(policyFile, JSON.stringify({ tenants: { 'team-l': { maxObjectBytes: MAX_OBJECT_BYTES } } }));
  server = await startServer({
    SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 's3-limits-test-secret-0123456789abcdef', SVC_S3_KEYS_FILE: keysFile, SVC_TENANT_POLICY_FILE: policyFile,
  });
  s3 = s3Client(server.s3Url, KEY);
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
});

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const keysStored = async () => ((await s3.send(new ListObjectsV2Command({ Bucket: BUCKET }))).Contents ?? []).map((o) => o.Key);

/** A key of `bytes` bytes that S3 clients percent-encode whole: every byte takes three characters of the URL. */
const encodedKey = (bytes: number) => 'é'.repeat(bytes / 2);

/** User metadata of `bytes` bytes as S3 counts them (names and values). */
const metadataOf = (bytes: number) => ({ m: 'v'.repeat(bytes - 1) });

/** Sends `head` (a request line and headers, signed by the caller) and whatever `body` says, on a raw socket; the answer's head and body. */
function rawExchange(head: string, body = ''): Promise<{ statusLine: string; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.s3Port!, '127.0.0.1');
    let got = '';
    socket.on('data', (d) => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: *(\d+)/i.exec(got.slice(0, end));
      if (end >= 0 && length && got.length >= end + 4 + Number(length[1])) {
        socket.destroy();
        resolve({ statusLine: got.slice(0, got.indexOf('\r\n')), text: got.slice(end + 4) });
      }
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ statusLine: got.slice(0, got.indexOf('\r\n')), text: got.slice(got.indexOf('\r\n\r\n') + 4) }));
    socket.write(head + body);
  });
}

/** A PUT of /limits/<key> signed with UNSIGNED-PAYLOAD and the given framing headers, as a raw request head. */
async function signedPutHead(key: string, framing: Record<string, string>): Promise<string> {
  const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: KEY, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
  const host = `127.0.0.1:${server.s3Port}`;
  const signed = await signer.sign({ method: 'PUT', protocol: 'http:', hostname: '127.0.0.1', port: server.s3Port!, path: `/${BUCKET}/${key}`, headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } });
  const lines = Object.entries({ ...signed.headers, ...framing }).map(([k, v]) => `${k}: ${v}`);
  return `PUT /${BUCKET}/${key} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`;
}

describe('the S3 listener at its limits', () => {
  it(`serves the longest key (${S3_KEY_MAX_BYTES} bytes, percent-encoded) with ${S3_USER_METADATA_MAX_BYTES} bytes of user metadata`, async () => {
    const key = encodedKey(S3_KEY_MAX_BYTES);
    expect(encodeURIComponent(key).length + 2 * S3_USER_METADATA_MAX_BYTES).toBeGreaterThan(4096 + 2048);
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: 'at the limits', Metadata: metadataOf(S3_USER_METADATA_MAX_BYTES) }));
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    expect(head.ContentLength).toBe('at the limits'.length);
    expect(head.Metadata).toEqual(metadataOf(S3_USER_METADATA_MAX_BYTES));
    expect(await keysStored()).toEqual([key]);
  });

  it('refuses a key one byte longer and metadata one byte larger with S3 codes, storing nothing', async () => {
    expect(await s3Failure(s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${encodedKey(S3_KEY_MAX_BYTES)}x`, Body: 'x' })))).toEqual({ name: 'KeyTooLongError', status: 400 });
    expect(await s3Failure(s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'meta', Body: 'x', Metadata: metadataOf(S3_USER_METADATA_MAX_BYTES + 1) })))).toEqual({ name: 'MetadataTooLarge', status: 400 });
    expect(await keysStored()).toEqual([encodedKey(S3_KEY_MAX_BYTES)]);
  });

  it('a body without a length is 411 Length Required (MissingContentLength), nothing stored', async () => {
    const head = await signedPutHead('chunked', { 'transfer-encoding': 'chunked' });
    const answer = await rawExchange(head, '5\r\nhello\r\n0\r\n\r\n');
    expect(answer.statusLine).toBe('HTTP/1.1 411 Length Required');
    expect(answer.text).toContain('<Code>MissingContentLength</Code>');
    expect(await keysStored()).not.toContain('chunked');
  });

  it("a declared length over the tenant's object limit is refused before its body is sent (EntityTooLarge)", async () => {
    // No body follows the head: the answer can only come from the declared length.
    const head = await signedPutHead('huge', { 'content-length': String(MAX_OBJECT_BYTES + 1) });
    const answer = await rawExchange(head);
    expect(answer.statusLine).toBe('HTTP/1.1 400 Bad Request');
    expect(answer.text).toContain('<Code>EntityTooLarge</Code>');
    expect(await keysStored()).not.toContain('huge');
  });

  it('request headers beyond 16 KiB are 431 and the connection closes', async () => {
    const answer = await rawExchange(`GET /${BUCKET}/x HTTP/1.1\r\nHost: x\r\nx-filler: ${'f'.repeat(17 * 1024)}\r\n\r\n`);
    expect(answer.statusLine).toBe('HTTP/1.1 431 Request Header Fields Too Large');
  });
});
