// Legacy repositories read through (`GET`/`HEAD /legacy/{repo}/{docId}`): real servers as child
// processes over repositories built here. Every metadata path form, every binary layout and
// suffix, the index fallbacks (and one build under concurrent first use), every hash, MIME and
// length form in mixed case, a 64 MiB binary streamed to a stalled reader in bounded memory, the
// 404 / 422 / 409 statuses before the status line, links leaving the root, traversal attempts raw
// and percent-encoded, tokens and the capability. Statuses, headers and bodies are checked exactly.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { devToken, expectError, expectNoLeak, JSON_TYPE, type Reply } from './helpers/docs-client.js';
import { checkedFetch as fetch, seededBytes } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const MiB = 1024 * 1024;
const OCTET = 'application/octet-stream';
const NO_CACHE = 'private, no-cache';

const hex = (alg: string, data: Uint8Array) => createHash(alg).update(data).digest('hex');
const sha256 = (data: Uint8Array) => hex('sha256', data);

function put(file: string, data: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, data);
}

/** A raw HTTP request: the path is sent as written (fetch would normalize dot segments and %2e). */
function raw(port: number, rawPath: string, options: { method?: string; token?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
    const req = http.request({ host: '127.0.0.1', port, path: rawPath, method: options.method ?? 'GET', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = text ? JSON.parse(text) : undefined;
        } catch {
          json = undefined;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
        resolve({ status: res.statusCode!, headers: h, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Prometheus text → the value of one sample (undefined when absent). */
function sample(metrics: string, name: string, labels: string): number | undefined {
  const line = metrics.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('legacy read-through', () => {
  const tmp = tempRoot('svc-legacy-');
  const main = path.join(tmp, 'main');
  const idx = path.join(tmp, 'idx');
  const outside = path.join(tmp, 'outside');
  let server: TestServer;
  let token: string;
  let base: string;

  /** What each document is expected to serve. */
  const served = new Map<string, { bytes: Buffer; type: string }>();
  let docNo = 0;

  /** A binary at `binaries/<rel>` and its metadata at `metadata/<metaRel>`; returns the id. */
  function doc(o: { id?: string; bytes?: Buffer; binary?: (h: string) => string; meta?: (id: string) => string; xml?: (h: string, size: number) => string; type?: string; root?: string }): string {
    const n = ++docNo;
    const id = o.id ?? `doc-${n}`;
    const bytes = o.bytes ?? seededBytes(1000 + n * 37, n);
    const h = sha256(bytes);
    const root = o.root ?? main;
    put(path.join(root, 'binaries', (o.binary ?? ((x) => `${x.slice(0, 2)}/${x.slice(2, 4)}/${x}`))(h)), bytes);
    put(path.join(root, 'metadata', (o.meta ?? ((i) => `${i}.xml`))(id)), o.xml ? o.xml(h, bytes.length) : `<?xml version="1.0"?><document><binaryHash>${h}</binaryHash></document>`);
    served.set(id, { bytes, type: o.type ?? OCTET });
    return id;
  }

  /** A GET with the suite's token, another one, or none (`null`). */
  const get = (repo: string, id: string, t: string | null = token) =>
    fetch(`${base}/legacy/${repo}/${encodeURIComponent(id)}`, { headers: t === null ? {} : { Authorization: `Bearer ${t}` } });

  async function expectServed(id: string, repo = 'main'): Promise<void> {
    const want = served.get(id)!;
    const res = await get(repo, id);
    const body = Buffer.from(await res.arrayBuffer());
    expect({ id, status: res.status }, body.toString('utf8').slice(0, 300)).toEqual({ id, status: 200 });
    expect(res.headers.get('content-type')).toBe(want.type);
    expect(res.headers.get('content-length')).toBe(String(want.bytes.length));
    expect(res.headers.get('cache-control')).toBe(NO_CACHE);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(body.equals(want.bytes)).toBe(true);
  }

  async function expectLegacyError(id: string, status: number, code: string, repo = 'main'): Promise<Reply> {
    const res = await get(repo, id);
    const text = await res.text();
    const r: Reply = { status: res.status, headers: res.headers, text, json: JSON.parse(text) };
    expectError(r, status, code);
    expectNoLeak(r.text);
    expect(r.text).not.toContain(tmp);
    return r;
  }

  // Documents of every kind, made before the server starts.
  const metadataForms: Record<string, string> = {};
  const layoutDocs: string[] = [];
  let big: Buffer;
  const bigId = 'big-64MiB';
  const idxIds: string[] = [];

  beforeAll(async () => {
    fs.mkdirSync(outside, { recursive: true });
    // Metadata: every documented path.
    metadataForms['<id>.xml'] = doc({ id: 'form-xml', meta: (i) => `${i}.xml` });
    metadataForms['<id>.XML'] = doc({ id: 'form-XML', meta: (i) => `${i}.XML` });
    metadataForms['<id>'] = doc({ id: 'form-bare', meta: (i) => i });
    metadataForms['<id[0..2]>/<id>.xml'] = doc({ id: 'pq-partitioned', meta: (i) => `${i.slice(0, 2)}/${i}.xml` });
    // Binaries: every layout with every suffix.
    const layouts: Array<(h: string) => string> = [
      (h) => h,
      (h) => `${h.slice(0, 2)}/${h.slice(2, 4)}/${h}`,
      (h) => `${h.slice(0, 2)}/${h}`,
      (h) => `${h.slice(0, 1)}/${h.slice(1, 3)}/${h}`,
      (h) => `${h.slice(0, 2)}/${h.slice(2, 4)}/${h.slice(4, 6)}/${h}`,
    ];
    for (const [l, layout] of layouts.entries()) {
      for (const suffix of ['', '.bin', '.dat', '.pdf']) layoutDocs.push(doc({ id: `layout-${l}${suffix || '-none'}`, binary: (h) => layout(h) + suffix }));
    }
    big = seededBytes(64 * MiB, 64);
    doc({ id: bigId, bytes: big, xml: (h, size) => `<doc><binaryHash>${h}</binaryHash><mime>application/pdf</mime><length>${size}</length></doc>`, type: 'application/pdf' });

    // The index repository: nothing at the documented paths; metadata and binaries in odd folders.
    for (let i = 0; i < 12; i++) {
      idxIds.push(doc({ root: idx, id: `deep-${i}`, meta: (id) => `archive/${2000 + i}/box ${i % 3}/${id}.xml`, binary: (h) => `odd/shelf-${i % 4}/${h}${['', '.bin', '.dat', '.pdf'][i % 4]}` }));
    }

    server = await startServer({ SVC_LEGACY_REPOS: `main=${main}, idx=${idx}` });
    base = server.url;
    token = await devToken(base, { scope: 'legacy.read' });
  });

  afterAll(async () => {
    await server?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('every documented metadata path form is found', async () => {
    for (const id of Object.values(metadataForms)) await expectServed(id);
  });

  test('every binary layout with every suffix is found', async () => {
    for (const id of layoutDocs) await expectServed(id);
  });

  test('index fallbacks: metadata in a deeper odd folder, binaries in odd folders and with uppercase names', async () => {
    const odd = doc({ id: 'odd-meta', meta: (id) => `x/y/z/${id}.xml` });
    const oddBin = doc({ id: 'odd-bin', binary: (h) => `elsewhere/${h}.dat` });
    const upper = doc({ id: 'upper-bin', binary: (h) => `UP/${h.toUpperCase()}.BIN` });
    const upperXml = doc({ id: 'upper-xml', meta: (id) => `q/${id}.Xml` });
    // The index of `main` may have been built before these files existed (by an earlier test's
    // miss): a fresh server builds it again.
    await server.stop();
    server = await startServer({ SVC_LEGACY_REPOS: `main=${main},idx=${idx}` });
    base = server.url;
    token = await devToken(base, { scope: 'legacy.read' });
    for (const id of [odd, oddBin, upper, upperXml]) await expectServed(id);
  });

  test('hash, MIME and length in every form and case, anywhere in the document', async () => {
    const bytes = (n: number) => seededBytes(500 + n, 900 + n);
    const cases: Array<{ name: string; xml: (b: Buffer) => string; type: string }> = [
      { name: 'binaryHash', xml: (b) => `<Doc><BINARYHASH>${sha256(b).toUpperCase()}</BINARYHASH><MimeType>text/plain; charset=utf-8</MimeType><SIZE>${b.length}</SIZE></Doc>`, type: 'text/plain; charset=utf-8' },
      { name: 'binary_hash (SHA-1)', xml: (b) => `<doc><meta><Binary_Hash>${hex('sha1', b)}</Binary_Hash></meta><MIME>image/tiff</MIME><ByteLength>${b.length}</ByteLength></doc>`, type: 'image/tiff' },
      { name: 'contentHash (MD5, namespaced)', xml: (b) => `<m:record xmlns:m="urn:x"><m:file><m:ContentHash>${hex('md5', b)}</m:ContentHash><m:contentType>application/pdf</m:contentType><m:Length>${b.length}</m:Length></m:file></m:record>`, type: 'application/pdf' },
      { name: 'hash (SHA-512, with attributes)', xml: (b) => `<doc><a><b><c><Hash algorithm="sha512"> ${hex('sha512', b)} </Hash></c></b></a><mimetype>text/csv</mimetype></doc>`, type: 'text/csv' },
      { name: 'attribute binaryHash', xml: (b) => `<doc><file BinaryHash="${sha256(b)}" name="scan.tif"/><contenttype>image/png</contenttype><bytelength>${b.length}</bytelength></doc>`, type: 'image/png' },
      { name: 'binaryHash beats a shallower hash', xml: (b) => `<doc><hash>${'0'.repeat(64)}</hash><x><binaryhash>${sha256(b)}</binaryhash></x></doc>`, type: OCTET },
      { name: 'an empty element is no value', xml: (b) => `<doc><binaryHash/><contentHash>${sha256(b)}</contentHash><mime></mime></doc>`, type: OCTET },
      { name: 'shallowest occurrence wins', xml: (b) => `<doc><size>${b.length}</size><pages><page><size>A4</size></page></pages><binaryHash>${sha256(b)}</binaryHash></doc>`, type: OCTET },
      { name: 'latin-1 declared encoding', xml: (b) => `<?xml version="1.0" encoding="ISO-8859-1"?><doc><title>caf\u00e9</title><binaryHash>${sha256(b)}</binaryHash></doc>`, type: OCTET },
    ];
    const ids: string[] = [];
    for (const [i, c] of cases.entries()) {
      const b = bytes(i);
      const algHex = /SHA-1/.test(c.name) ? hex('sha1', b) : /MD5/.test(c.name) ? hex('md5', b) : /SHA-512/.test(c.name) ? hex('sha512', b) : sha256(b);
      const id = `forms-${i}`;
      put(path.join(main, 'binaries', algHex.slice(0, 2), algHex.slice(2, 4), algHex), b);
      const xml = c.xml(b);
      put(path.join(main, 'metadata', `${id}.xml`), /ISO-8859-1/.test(xml) ? Buffer.from(xml, 'latin1') : xml);
      served.set(id, { bytes: b, type: c.type });
      ids.push(id);
    }
    for (const id of ids) await expectServed(id);
  });

  test('HEAD: the headers of GET, no body', async () => {
    const id = metadataForms['<id>.xml']!;
    const want = served.get(id)!;
    const r = await raw(server.port, `/legacy/main/${id}`, { method: 'HEAD', token });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe(OCTET);
    expect(r.headers.get('content-length')).toBe(String(want.bytes.length));
    expect(r.text).toBe('');
    const bigHead = await raw(server.port, `/legacy/main/${bigId}`, { method: 'HEAD', token });
    expect([bigHead.status, bigHead.headers.get('content-type'), bigHead.headers.get('content-length'), bigHead.text]).toEqual([200, 'application/pdf', String(64 * MiB), '']);
  });

  test('an empty binary is 200 with Content-Length 0', async () => {
    const id = doc({ id: 'empty', bytes: Buffer.alloc(0), xml: (h) => `<doc><binaryHash>${h}</binaryHash><length>0</length><mime>text/plain</mime></doc>`, type: 'text/plain' });
    await expectServed(id);
  });

  test('a 64 MiB binary is streamed whole to a stalled reader in bounded memory', async () => {
    const baseline = server.rss();
    let peak = baseline;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, server.rss());
      } catch {}
    }, 20);
    try {
      const got = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port: server.port, path: `/legacy/main/${bigId}`, headers: { Authorization: `Bearer ${token}` } }, (res) => {
          const chunks: Buffer[] = [];
          let stalled = false;
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            if (!stalled) {
              // The reader stops for a while: a server that did not wait for the socket would read the whole file into memory now.
              stalled = true;
              res.pause();
              setTimeout(() => res.resume(), 1500);
            }
          });
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        });
        req.on('error', reject);
      });
      expect(got.status).toBe(200);
      expect(got.headers['content-type']).toBe('application/pdf');
      expect(got.headers['content-length']).toBe(String(64 * MiB));
      expect(got.body.length).toBe(64 * MiB);
      expect(got.body.equals(big)).toBe(true);
    } finally {
      clearInterval(sampler);
    }
    expect(peak - baseline, `rss grew from ${baseline} to ${peak}`).toBeLessThan(32 * MiB);
  });

  test('422 legacy_metadata_invalid: no hash, wrong length, not hex, ambiguous, bad MIME or length', async () => {
    const h = sha256(Buffer.from('x'));
    const cases: Record<string, string> = {
      'no-hash': '<doc><mime>text/plain</mime><title>nothing</title></doc>',
      'empty-hash': '<doc><binaryHash>   </binaryHash></doc>',
      'short-hash': `<doc><binaryHash>${h.slice(0, 63)}</binaryHash></doc>`,
      'long-hash': `<doc><binaryHash>${h}0</binaryHash></doc>`,
      'not-hex': `<doc><binaryHash>${h.slice(0, 63)}g</binaryHash></doc>`,
      'hash-with-prefix': `<doc><binaryHash>sha256:${h}</binaryHash></doc>`,
      ambiguous: `<doc><binaryHash>${h}</binaryHash><binaryHash>${'a'.repeat(64)}</binaryHash></doc>`,
      'bad-mime': `<doc><binaryHash>${h}</binaryHash><mime>text/plain\r\nX-Injected: 1</mime></doc>`,
      'bad-mime-2': `<doc><binaryHash>${h}</binaryHash><mimeType>not a type</mimeType></doc>`,
      'bad-length': `<doc><binaryHash>${h}</binaryHash><size>12 bytes</size></doc>`,
      'negative-length': `<doc><binaryHash>${h}</binaryHash><length>-1</length></doc>`,
    };
    put(path.join(main, 'binaries', h), 'x');
    for (const [id, xml] of Object.entries(cases)) {
      put(path.join(main, 'metadata', `bad-${id}.xml`), xml);
      const r = await expectLegacyError(`bad-${id}`, 422, 'legacy_metadata_invalid');
      expect(r.headers.get('x-injected')).toBeNull();
    }
  });

  test('404: unknown repository, document and binary', async () => {
    await expectLegacyError('form-xml', 404, 'legacy_repo_not_found', 'nope');
    await expectLegacyError('no-such-document', 404, 'legacy_document_not_found');
    put(path.join(main, 'metadata', 'orphan.xml'), `<doc><binaryHash>${'ab'.repeat(32)}</binaryHash></doc>`);
    const r = await expectLegacyError('orphan', 404, 'legacy_binary_not_found');
    expect(r.json.message).toContain('ab'.repeat(32));
    // HEAD answers the same status, without a body.
    const head = await raw(server.port, '/legacy/main/no-such-document', { method: 'HEAD', token });
    expect([head.status, head.text]).toEqual([404, '']);
  });

  test('409 legacy_unreadable: links leaving the root, directories and FIFOs where files should be, a size mismatch, broken XML', async () => {
    const secret = Buffer.from('SECRET OUTSIDE THE REPOSITORY');
    const sh = sha256(secret);
    fs.writeFileSync(path.join(outside, sh), secret);
    fs.writeFileSync(path.join(outside, 'meta.xml'), `<doc><binaryHash>${sha256(served.get('form-xml')!.bytes)}</binaryHash></doc>`);
    // Metadata through a link to a file outside.
    fs.symlinkSync(path.join(outside, 'meta.xml'), path.join(main, 'metadata', 'escape-meta.xml'));
    // Metadata through a linked partition directory outside.
    fs.mkdirSync(path.join(outside, 'part'));
    fs.writeFileSync(path.join(outside, 'part', 'eparted.xml'), `<doc><binaryHash>${sha256(served.get('form-xml')!.bytes)}</binaryHash></doc>`);
    fs.symlinkSync(path.join(outside, 'part'), path.join(main, 'metadata', 'ep'));
    // A binary through a link to a file outside; another through a linked directory outside.
    fs.symlinkSync(path.join(outside, sh), path.join(main, 'binaries', sh));
    put(path.join(main, 'metadata', 'escape-bin.xml'), `<doc><binaryHash>${sh}</binaryHash></doc>`);
    // A link that stays inside the root is fine.
    fs.symlinkSync(path.join(main, 'metadata', 'form-xml.xml'), path.join(main, 'metadata', 'inner-link.xml'));
    served.set('inner-link', served.get('form-xml')!);
    // Directories where the files should be (and nothing else found).
    fs.mkdirSync(path.join(main, 'metadata', 'dir-meta.xml'));
    const dh = sha256(Buffer.from('dir binary'));
    fs.mkdirSync(path.join(main, 'binaries', `${dh}.bin`), { recursive: true });
    put(path.join(main, 'metadata', 'dir-bin.xml'), `<doc><binaryHash>${dh}</binaryHash></doc>`);
    // FIFOs (a read would block): not regular files.
    execFileSync('mkfifo', [path.join(main, 'metadata', 'fifo-meta.xml')]);
    const fh = sha256(Buffer.from('fifo binary'));
    execFileSync('mkfifo', [path.join(main, 'binaries', fh)]);
    put(path.join(main, 'metadata', 'fifo-bin.xml'), `<doc><binaryHash>${fh}</binaryHash></doc>`);
    // The metadata's length differs from the file's.
    const sized = doc({ id: 'size-mismatch', xml: (h, size) => `<doc><binaryHash>${h}</binaryHash><length>${size + 1}</length></doc>` });
    // Not XML at all, and not UTF-8.
    put(path.join(main, 'metadata', 'broken.xml'), '<doc><binaryHash>abc</doc>');
    put(path.join(main, 'metadata', 'not-utf8.xml'), Buffer.from([0x3c, 0x61, 0x3e, 0xff, 0xfe, 0x3c, 0x2f, 0x61, 0x3e]));

    // A partition directory linked outside, under a prefix no other binary uses (made last: a
    // binary written under it afterwards would land outside).
    let other = Buffer.from('another secret');
    for (let i = 0; fs.existsSync(path.join(main, 'binaries', sha256(other).slice(0, 2))); i++) other = Buffer.from(`another secret ${i}`);
    const oh = sha256(other);
    fs.mkdirSync(path.join(outside, 'dir'));
    fs.writeFileSync(path.join(outside, 'dir', oh), other);
    fs.symlinkSync(path.join(outside, 'dir'), path.join(main, 'binaries', oh.slice(0, 2)));
    put(path.join(main, 'metadata', 'escape-bindir.xml'), `<doc><binaryHash>${oh}</binaryHash></doc>`);

    for (const id of ['escape-meta', 'eparted', 'escape-bin', 'escape-bindir', 'dir-meta', 'dir-bin', 'fifo-meta', 'fifo-bin', sized, 'broken', 'not-utf8']) {
      const r = await expectLegacyError(id, 409, 'legacy_unreadable');
      expect(r.text).not.toContain('SECRET');
    }
    await expectServed('inner-link');
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(sample(m, 'svc_legacy_read_failures_total', 'repo="main",reason="link_escape"')).toBe(4);
    expect(sample(m, 'svc_legacy_read_failures_total', 'repo="main",reason="size_mismatch"')).toBe(1);
  });

  test('traversal in repo and docId, raw and percent-encoded, is never 200 and never reads outside', async () => {
    // A well-formed document outside the repository root that a traversal would reach.
    const h = sha256(served.get('form-xml')!.bytes);
    fs.writeFileSync(path.join(tmp, 'secret.xml'), `<doc><binaryHash>${h}</binaryHash><mime>text/x-secret</mime></doc>`);
    fs.writeFileSync(path.join(main, 'secret.xml'), `<doc><binaryHash>${h}</binaryHash><mime>text/x-secret</mime></doc>`);
    const attempts: Array<[string, number, string]> = [
      ['/legacy/main/../../secret', 404, 'not_found'],
      ['/legacy/main/..%2F..%2Fsecret', 400, 'invalid_request'],
      ['/legacy/main/..%2fsecret', 400, 'invalid_request'],
      ['/legacy/main/%2e%2e%2fsecret', 400, 'invalid_request'],
      ['/legacy/main/%2E%2E%2F%2E%2E%2Fsecret', 400, 'invalid_request'],
      ['/legacy/main/%2e%2e', 400, 'invalid_request'],
      ['/legacy/main/..', 400, 'invalid_request'],
      ['/legacy/main/.', 400, 'invalid_request'],
      ['/legacy/main/..%5Csecret', 400, 'invalid_request'],
      ['/legacy/main/%5C..%5Csecret', 400, 'invalid_request'],
      ['/legacy/main/secret%00', 400, 'invalid_request'],
      ['/legacy/main/form-xml%00.xml', 400, 'invalid_request'],
      ['/legacy/main/%252e%252e%252fsecret', 400, 'invalid_request'],
      ['/legacy/main/%2', 400, 'invalid_request'],
      [`/legacy/main/${'a'.repeat(201)}`, 400, 'invalid_request'],
      ['/legacy/..%2Fmain/form-xml', 404, 'legacy_repo_not_found'],
      ['/legacy/%2e%2e/form-xml', 404, 'legacy_repo_not_found'],
      ['/legacy/../main/form-xml', 404, 'not_found'],
      ['/legacy/main%2F..%2Fmain/form-xml', 404, 'legacy_repo_not_found'],
      ['/legacy/main%00/form-xml', 404, 'legacy_repo_not_found'],
      [`/legacy/${encodeURIComponent(main)}/form-xml`, 404, 'legacy_repo_not_found'],
      ['/legacy/MAIN/form-xml', 404, 'legacy_repo_not_found'],
    ];
    for (const [p, status, code] of attempts) {
      for (const method of ['GET', 'HEAD']) {
        const r = await raw(server.port, p, { method, token });
        expect({ p, method, status: r.status }).toEqual({ p, method, status });
        expect(r.headers.get('content-type')).not.toBe('text/x-secret');
        if (method === 'GET') {
          expect({ p, error: r.json?.error }).toEqual({ p, error: code });
          expect(r.headers.get('content-type')).toBe(JSON_TYPE);
          // (The one attempt that sends the root's own path gets it echoed as the unknown name.)
          if (!p.includes(encodeURIComponent(main))) expect(r.text).not.toContain(tmp);
        }
      }
    }
    // The id at its limit is an id like any other.
    await expectLegacyError('b'.repeat(200), 404, 'legacy_document_not_found');
  });

  test('concurrent first requests that need the index share one build', async () => {
    const before = await (await fetch(`${base}/metrics`)).text();
    expect(sample(before, 'svc_legacy_index_builds_total', 'repo="idx",tree="metadata"')).toBe(0);
    expect(sample(before, 'svc_legacy_index_builds_total', 'repo="idx",tree="binaries"')).toBe(0);
    const results = await Promise.all([...idxIds, ...idxIds].map(async (id) => {
      const res = await get('idx', id);
      return { id, status: res.status, body: Buffer.from(await res.arrayBuffer()) };
    }));
    for (const r of results) {
      expect({ id: r.id, status: r.status }).toEqual({ id: r.id, status: 200 });
      expect(r.body.equals(served.get(r.id)!.bytes)).toBe(true);
    }
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(sample(m, 'svc_legacy_index_builds_total', 'repo="idx",tree="metadata"')).toBe(1);
    expect(sample(m, 'svc_legacy_index_builds_total', 'repo="idx",tree="binaries"')).toBe(1);
    expect(sample(m, 'svc_legacy_index_entries', 'repo="idx",tree="metadata"')).toBe(12);
    expect(sample(m, 'svc_legacy_index_entries', 'repo="idx",tree="binaries"')).toBe(12);
    // A read is counted once the server has finished writing it, which may be just after the
    // client has the last byte.
    let reads = sample(m, 'svc_legacy_reads_total', 'repo="idx"');
    for (const until = Date.now() + 5000; reads !== 24 && Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
      reads = sample(await (await fetch(`${base}/metrics`)).text(), 'svc_legacy_reads_total', 'repo="idx"');
    }
    expect(reads).toBe(24);
    // Misses after the build do not build again.
    await expectLegacyError('not-there', 404, 'legacy_document_not_found', 'idx');
    const after = await (await fetch(`${base}/metrics`)).text();
    expect(sample(after, 'svc_legacy_index_builds_total', 'repo="idx",tree="metadata"')).toBe(1);
  });

  test('tokens: none is 401, one without legacy.read is 403, a wildcard scope is enough', async () => {
    const id = metadataForms['<id>.xml']!;
    const none = await get('main', id, null);
    const noneText = await none.text();
    expectError({ status: none.status, headers: none.headers, text: noneText, json: JSON.parse(noneText) }, 401, 'unauthenticated');
    const bad = await get('main', id, 'not-a-jwt');
    expect(bad.status).toBe(401);
    await bad.text();
    const other = await devToken(base, { scope: 'doc.read legacy.import' });
    const forbidden = await get('main', id, other);
    const forbiddenText = await forbidden.text();
    expectError({ status: forbidden.status, headers: forbidden.headers, text: forbiddenText, json: JSON.parse(forbiddenText) }, 403, 'forbidden');
    // The capability is checked before the repository: an unknown one is 403 too, not 404.
    const probe = await get('nope', id, other);
    expect(probe.status).toBe(403);
    await probe.text();
    const head = await raw(server.port, `/legacy/main/${id}`, { method: 'HEAD' });
    expect([head.status, head.text]).toEqual([401, '']);
    const wildcard = await devToken(base, { scope: 'legacy.*' });
    const ok = await get('main', id, wildcard);
    expect(ok.status).toBe(200);
    expect(Buffer.from(await ok.arrayBuffer()).equals(served.get(id)!.bytes)).toBe(true);
  });

  test('per-repository metrics: reads, bytes, failures by reason, latency', async () => {
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(sample(m, 'svc_legacy_reads_total', 'repo="main"')).toBeGreaterThan(15);
    expect(sample(m, 'svc_legacy_read_bytes_total', 'repo="main"')).toBeGreaterThan(64 * MiB);
    expect(sample(m, 'svc_legacy_read_failures_total', 'repo="main",reason="metadata_invalid"')).toBe(11);
    expect(sample(m, 'svc_legacy_read_failures_total', 'repo="-",reason="repo_not_found"')).toBeGreaterThan(0);
    // Latency is observed: the 64 MiB read to a stalled reader alone took more than a second.
    expect(sample(m, 'svc_legacy_read_duration_seconds_sum', 'repo="main",outcome="ok"')).toBeGreaterThan(1);
  });
});

describe('SVC_LEGACY_REPOS at start', () => {
  const cases: Array<[string, RegExp]> = [
    ['main', /SVC_LEGACY_REPOS: entry 1 "main" is not name=\/path/],
    ['=/tmp', /SVC_LEGACY_REPOS: "" is not a repository name/],
    ['a/b=/tmp', /SVC_LEGACY_REPOS: "a\/b" is not a repository name/],
    ['a=', /SVC_LEGACY_REPOS: repository "a" has no path/],
    ['a=/tmp,,b=/tmp', /SVC_LEGACY_REPOS: entry 2 is empty/],
    ['a=/tmp,a=/var', /SVC_LEGACY_REPOS: repository "a" is named twice/],
    ['a=/definitely/not/here', /SVC_LEGACY_REPOS: the root of repository "a" \(\/definitely\/not\/here\) cannot be resolved \(ENOENT\)/],
  ];
  test.each(cases)('%s is a clear start-up error', async (value, message) => {
    const root = tempRoot('svc-legacy-config-');
    try {
      await expect(startServer({ SVC_LEGACY_REPOS: value }, root)).rejects.toThrow(message);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('a root that is a file is refused', async () => {
    const root = tempRoot('svc-legacy-config-');
    const file = path.join(root, 'file');
    fs.writeFileSync(file, 'x');
    try {
      await expect(startServer({ SVC_LEGACY_REPOS: `f=${file}` }, root)).rejects.toThrow(/SVC_LEGACY_REPOS: the root of repository "f" .* is not a directory/);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
