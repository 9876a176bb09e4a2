// A client of one server's resumable-upload API (create, PATCH a part, status, commit) and a
// blob's read-back: what the shared-session suites (pg-s3 and s3) send to each node.
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import type { TestServer } from './server.js';

export async function create(s: TestServer, id = randomUUID()) {
  const res = await fetch(`${s.url}/api/v1/uploads`, { method: 'POST', headers: { 'X-Svc-Upload-Session-Id': id } });
  return { id, status: res.status, json: (await res.json()) as any };
}

export async function patch(s: TestServer, id: string, offset: number, body: Buffer, partId = randomUUID()) {
  const res = await fetch(`${s.url}/api/v1/uploads/${id}`, {
    method: 'PATCH',
    body: body as Uint8Array<ArrayBuffer>,
    headers: { 'Upload-Offset': String(offset), 'Upload-Part-Id': partId },
  });
  const text = await res.text();
  return { status: res.status, offset: res.headers.get('upload-offset'), json: text ? JSON.parse(text) : undefined };
}

export async function status(s: TestServer, id: string) {
  const res = await fetch(`${s.url}/api/v1/uploads/${id}`);
  return { status: res.status, json: (await res.json()) as any };
}

export async function commit(s: TestServer, id: string) {
  const res = await fetch(`${s.url}/api/v1/uploads/${id}/commit`, { method: 'POST' });
  return { status: res.status, json: (await res.json()) as any };
}

export async function readBack(s: TestServer, blobId: string): Promise<Buffer> {
  const res = await fetch(`${s.url}/api/v1/blobs/${blobId}`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}
