// A small client of the document platform (`/v1`) for the HTTP contract tests: tokens (from
// POST /dev/token or signed here with jose), JSON calls, byte uploads and error-body checks.
// Every answer it gets is checked against the API description (./openapi.ts).

import { SignJWT, type JWTPayload } from 'jose';
import { expect } from 'vitest';
import { expectConforms } from './openapi.js';

export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
export const META_ID = /^meta_[0-9A-HJKMNP-TV-Z]{26}$/;
export const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const JSON_TYPE = 'application/json; charset=utf-8';

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed body, or undefined when it is empty or not JSON. */
  json: any;
}

/** The answer read whole; with `method`, checked against the API description (what the clients below do). */
export async function reply(res: Response, method?: string): Promise<Reply> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (method !== undefined) expectConforms({ status: res.status, headers: res.headers, text }, method, res.url);
  return { status: res.status, headers: res.headers, text, json };
}

export interface Claims {
  org_id?: string;
  sub?: string;
  scope?: string;
  roles?: string[];
  [claim: string]: unknown;
}

/** An HS256 token signed with `secret`; `exp` 10 minutes ahead unless given (null: none). */
export async function hsToken(secret: string, claims: Claims, options: { exp?: number | null; header?: Record<string, unknown> } = {}): Promise<string> {
  const payload: JWTPayload = { org_id: 'acme', sub: 'alice', ...claims };
  for (const k of Object.keys(payload)) if (payload[k] === undefined) delete payload[k];
  const jwt = new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'JWT', ...options.header }).setIssuedAt();
  if (options.exp !== null) jwt.setExpirationTime(options.exp ?? Math.floor(Date.now() / 1000) + 600);
  return jwt.sign(new TextEncoder().encode(secret));
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** An unsigned token (`alg: none`). */
export function noneToken(claims: Claims): string {
  return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ org_id: 'acme', sub: 'alice', exp: Math.floor(Date.now() / 1000) + 600, ...claims })}.`;
}

export function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8'));
}

export async function devToken(base: string, body: Record<string, unknown> = {}): Promise<string> {
  const r = await reply(await fetch(`${base}/dev/token`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }), 'POST');
  if (r.status !== 200) throw new Error(`POST /dev/token: ${r.status} ${r.text}`);
  return r.json.access_token;
}

/** Calls of one principal against one server. */
export class Api {
  constructor(
    readonly base: string,
    readonly token: string | undefined,
  ) {}

  as(token: string | undefined): Api {
    return new Api(this.base, token);
  }

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const h: Record<string, string> = { ...headers };
    if (this.token !== undefined) h.Authorization = `Bearer ${this.token}`;
    let payload: string | Uint8Array<ArrayBuffer> | undefined;
    if (typeof body === 'string') payload = body;
    else if (body instanceof Uint8Array) payload = body as Uint8Array<ArrayBuffer>;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      h['Content-Type'] ??= 'application/json';
    }
    return reply(await fetch(this.base + path, { method, headers: h, body: payload }), method);
  }

  get = (path: string, headers: Record<string, string> = {}) => this.call('GET', path, undefined, headers);

  /** GET /v1/jobs/{id} once the job has ended (`?wait=` answers at its end), within `timeoutMs`. */
  async settled(jobId: string, timeoutMs = 90_000): Promise<Reply> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.get(`/v1/jobs/${jobId}?wait=30`);
      expect(r.status, r.text).toBe(200);
      if (['completed', 'failed', 'dead'].includes(r.json.state)) return r;
      if (Date.now() > until) throw new Error(`job ${jobId} still ${r.json.state}`);
    }
  }
  post = (path: string, body?: unknown, headers: Record<string, string> = {}) => this.call('POST', path, body, headers);

  /** PUT /v1/uploads/{id}/bytes; a `chunks` array is streamed (no Content-Length). */
  async putBytes(uploadId: string, bytes: Uint8Array | Uint8Array[], contentType?: string): Promise<Reply> {
    const headers: Record<string, string> = {};
    if (this.token !== undefined) headers.Authorization = `Bearer ${this.token}`;
    if (contentType) headers['Content-Type'] = contentType;
    if (Array.isArray(bytes)) {
      const chunks = [...bytes];
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          const next = chunks.shift();
          if (next) controller.enqueue(next);
          else controller.close();
        },
      });
      return reply(await fetch(`${this.base}/v1/uploads/${uploadId}/bytes`, { method: 'PUT', headers, body: stream, duplex: 'half' } as RequestInit), 'PUT');
    }
    return reply(await fetch(`${this.base}/v1/uploads/${uploadId}/bytes`, { method: 'PUT', headers, body: bytes as Uint8Array<ArrayBuffer> }), 'PUT');
  }

  /** create → bytes → finalize; every step checked. */
  async newDocument(bytes: Uint8Array, options: { create?: Record<string, unknown>; contentType?: string; finalize?: Record<string, unknown> } = {}) {
    const created = await this.post('/v1/documents', options.create ?? {});
    expect(created.status, created.text).toBe(201);
    const put = await this.putBytes(created.json.uploadId, bytes, options.contentType);
    expect(put.status, put.text).toBe(204);
    const fin = await this.post(`/v1/uploads/${created.json.uploadId}/finalize`, options.finalize ?? {});
    expect(fin.status, fin.text).toBe(201);
    return { documentId: created.json.documentId as string, uploadId: created.json.uploadId as string, versionId: fin.json.versionId as string, contentRef: fin.json.contentRef };
  }

  writeCanonical(documentId: string, namespaces: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    return this.post(`/v1/documents/${documentId}/metadata`, { mode: 'canonical', bundle: { namespaces }, ...extra });
  }

  patch(documentId: string, ns: string, body: Record<string, unknown>) {
    return this.post(`/v1/documents/${documentId}/metadata/${encodeURIComponent(ns)}/patch`, { mode: 'canonical', reason: 'test patch', ...body });
  }
}

/** No stack trace, source path or exception class leaks into a body. */
export function expectNoLeak(text: string): void {
  expect(text).not.toMatch(/\n\s+at |\bat [^\s]+ \(|\.(?:ts|js|mjs):\d+|node_modules|\/work\/|dist\/|TypeError|ReferenceError|SyntaxError/);
}

/** `{ error, message }` with this status and code, JSON, nothing else. */
export function expectError(r: Reply, status: number, code: string): void {
  expect({ status: r.status, body: r.json }, r.text).toMatchObject({ status, body: { error: code } });
  expect(r.headers.get('content-type')).toBe(JSON_TYPE);
  expect(Object.keys(r.json).sort()).toEqual(['error', 'message']);
  expect(typeof r.json.message).toBe('string');
  expect(r.json.message.length).toBeGreaterThan(0);
  expectNoLeak(r.text);
}

/** The rejection form of metadata writes: `{ status: "rejected", error: { code, message, errors? }, ...extra }`. */
export function expectRejected(r: Reply, status: number, code: string, extraKeys: string[] = []): void {
  expect({ status: r.status, body: r.json }, r.text).toMatchObject({ status, body: { status: 'rejected', error: { code } } });
  expect(r.headers.get('content-type')).toBe(JSON_TYPE);
  expect(Object.keys(r.json).sort()).toEqual(['error', 'status', ...extraKeys].sort());
  const keys = Object.keys(r.json.error).sort();
  expect(keys.filter((k) => k !== 'errors')).toEqual(['code', 'message']);
  expect(typeof r.json.error.message).toBe('string');
  if (r.json.error.errors !== undefined) {
    expect(Array.isArray(r.json.error.errors)).toBe(true);
    for (const e of r.json.error.errors) {
      expect(Object.keys(e).sort()).toEqual(['code', 'message', 'path']);
      expect(typeof e.path).toBe('string');
      expect(typeof e.code).toBe('string');
      expect(typeof e.message).toBe('string');
    }
  }
  expectNoLeak(r.text);
}

/** The error code of either body form (for checks that do not care which form). */
export function errorCode(r: Reply): string | undefined {
  if (!r.json) return undefined;
  return typeof r.json.error === 'string' ? r.json.error : r.json.error?.code;
}
