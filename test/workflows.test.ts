// Views and workflows over HTTP (issue 20): OCR that really reads (text layers, rendered scans,
// images), entities, redaction and signature stripping; views keyed deterministically, made once
// into the CAS and served from it with the blob read contract; jobs that survive kill -9.

import fs from 'node:fs';
import path from 'node:path';
import { PDFDict, PDFDocument, PDFName } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Api, devToken, expectError, type Reply } from './helpers/docs-client.js';
import { PERSONAL_SECRETS, PERSONAL_TEXT, scannedPdf, signedPdf, textImage, textPdf } from './helpers/content-fixtures.js';
import { checkedFetch as fetch } from './helpers/http.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';
import { TEST_BACKEND } from './helpers/backends.js';

const OCR = 'urn:svc:workflow:ocr@1';
const ENTITIES = 'urn:svc:workflow:entities@1';
const REDACT = 'urn:svc:workflow:redact@1';
const OCR_VIEW = 'urn:svc:view:ocrText@1';
const TEXT = 'text/plain; charset=utf-8';
const LINES = ['Quarterly invoice for Harbour Logistics', 'Total amount due within thirty days'];
const WORDS = ['quarterly', 'invoice', 'harbour', 'logistics', 'amount', 'thirty'];
const ALL = 'doc.create doc.read doc.write meta.read meta.write:* workflow.run:* job.read';

/** The job once it has ended. */
async function settle(api: Api, jobId: string, timeoutMs?: number) {
  return (await api.settled(jobId, timeoutMs)).json;
}

async function run(api: Api, documentId: string, workflow: string, inputs: Record<string, unknown> = {}) {
  const r = await api.post(`/v1/documents/${documentId}/workflows/${encodeURIComponent(workflow)}/run`, { inputs });
  expect(r.status, r.text).toBe(202);
  expect(r.headers.get('location')).toBe(`/v1/jobs/${r.json.jobId}`);
  expect(Object.keys(r.json)).toEqual(['jobId']);
  return r.json.jobId as string;
}

/** Objects of the PDF that belong to a signature: /FT /Sig fields and /Type /Sig dictionaries (read by pdf-lib, streams decoded). */
async function signatureObjects(pdf: Uint8Array): Promise<number> {
  const doc = await PDFDocument.load(pdf);
  let found = 0;
  for (const [, object] of doc.context.enumerateIndirectObjects()) {
    if (!(object instanceof PDFDict)) continue;
    if (object.get(PDFName.of('FT')) === PDFName.of('Sig') || object.get(PDFName.of('Type')) === PDFName.of('Sig')) found++;
  }
  return found;
}

const content = (api: Api, documentId: string, query: string, headers: Record<string, string> = {}) => api.get(`/v1/documents/${documentId}/content${query}`, headers);
const lower = (r: Reply) => r.text.toLowerCase();

describe('views and workflows', () => {
  let server: TestServer;
  let api: Api;
  const root = tempRoot();
  beforeAll(async () => {
    server = await startServer({ SVC_DURABILITY: 'relaxed' }, root);
    api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: ALL }));
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  test('OCR of a PDF text layer: a derived entry with provenance, the ocrText view it names, and a repeat that computes nothing', async () => {
    const doc = await api.newDocument(await textPdf(LINES), { contentType: 'application/pdf' });
    const job = await settle(api, await run(api, doc.documentId, OCR));
    expect(job).toMatchObject({ kind: 'workflow.ocr', state: 'completed', error: null, outputs: { derivedNamespaces: ['urn:svc:ocr'] } });
    const [viewKey] = job.outputs.viewKeys;
    expect(viewKey).toMatch(/^v1:[0-9a-f]{64}$/);
    const meta = await api.get(`/v1/documents/${doc.documentId}/metadata`);
    const entry = meta.json.namespaces['urn:svc:ocr'];
    expect(entry).toMatchObject({ schema: 'urn:svc:schema:ocr@1.0.0', mode: 'derived', status: 'valid', data: { language: 'eng', pages: [{ number: 1, source: 'text-layer' }] } });
    for (const w of WORDS) expect(entry.data.text.toLowerCase()).toContain(w);
    // The derived namespace read alone is the bundle's entry.
    const alone = await api.get(`/v1/documents/${doc.documentId}/metadata/${encodeURIComponent('urn:svc:ocr')}`);
    expect(alone.status).toBe(200);
    expect(alone.json).toEqual({ namespaceUrn: 'urn:svc:ocr', entry });
    expect(entry.data.pages[0].characters).toBeGreaterThan(40);
    expect(entry.provenance.input).toEqual({ kind: 'blob', key: doc.contentRef.key });
    expect(entry.provenance.producer.name).toMatch(/pdfjs/);
    expect(entry.provenance.producer.version).toMatch(/\d+\.\d+/);
    // The view the workflow made is the one a content request asks for.
    const view = await content(api, doc.documentId, `?view=${encodeURIComponent(OCR_VIEW)}`);
    expect(view.status).toBe(200);
    expect(view.headers.get('content-type')).toBe(TEXT);
    expect(view.headers.get('etag')).toBe(`"${viewKey}"`);
    expect(view.text).toBe(entry.data.text);
    // A repeat: completed with the same outputs, and the entry is the same one (nothing recomputed).
    const again = await settle(api, await run(api, doc.documentId, OCR));
    expect(again.outputs).toEqual(job.outputs);
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces['urn:svc:ocr'].id).toBe(entry.id);
  });

  test('OCR reads a page without a text layer, and a PNG image', async () => {
    const scanned = await api.newDocument(await scannedPdf(LINES), { contentType: 'application/pdf' });
    const job = await settle(api, await run(api, scanned.documentId, OCR));
    expect(job.state, JSON.stringify(job.error)).toBe('completed');
    const entry = (await api.get(`/v1/documents/${scanned.documentId}/metadata`)).json.namespaces['urn:svc:ocr'];
    expect(entry.data.pages).toHaveLength(1);
    expect(entry.data.pages[0].source).toBe('ocr');
    expect(entry.data.pages[0].confidence).toBeGreaterThan(0.5);
    expect(entry.provenance.confidence).toBeGreaterThan(0.5);
    expect(entry.provenance.producer.name).toMatch(/tesseract/);
    for (const w of WORDS) expect(entry.data.text.toLowerCase()).toContain(w);

    const image = await api.newDocument(await textImage(LINES), { contentType: 'image/png' });
    const view = await content(api, image.documentId, `?view=${encodeURIComponent(OCR_VIEW)}`);
    expect(view.status, view.text).toBe(200);
    for (const w of WORDS) expect(lower(view)).toContain(w);
  });

  test('entities of a text: people, organizations, places, dates, e-mail addresses and phone numbers, from the text view', async () => {
    const text = 'On 12 March 2026 Maria Keller of Northwind Traders Inc. met the board in Chicago. Reach her at maria.keller@northwind.example or +1 312 555 0199.';
    const doc = await api.newDocument(Buffer.from(text), { contentType: 'text/plain' });
    const job = await settle(api, await run(api, doc.documentId, ENTITIES));
    expect(job).toMatchObject({ state: 'completed', outputs: { derivedNamespaces: ['urn:svc:entities'] } });
    const entry = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces['urn:svc:entities'];
    expect(entry).toMatchObject({ schema: 'urn:svc:schema:entities@1.0.0', status: 'valid' });
    expect((await api.get(`/v1/documents/${doc.documentId}/metadata/urn:svc:entities`)).json).toEqual({ namespaceUrn: 'urn:svc:entities', entry });
    expect(entry.data.emails).toEqual(['maria.keller@northwind.example']);
    expect(entry.data.people.join(' ')).toMatch(/Maria Keller/);
    expect(entry.data.places.join(' ')).toMatch(/Chicago/);
    expect(entry.data.orgs.join(' ')).toMatch(/Northwind/);
    expect(entry.data.dates.join(' ')).toMatch(/March/);
    expect(entry.data.phones.join(' ').replace(/\D/g, '')).toContain('3125550199');
    expect(entry.provenance.input).toEqual({ kind: 'view', key: job.outputs.viewKeys[0] });
    expect(entry.provenance.confidence).toBeGreaterThan(0);
    expect((await content(api, doc.documentId, `?view=${encodeURIComponent(OCR_VIEW)}`)).text).toBe(text);
  });

  test('redaction: the public profile masks personal data in the text view; the workflow makes the same view; the content is untouched', async () => {
    const doc = await api.newDocument(Buffer.from(PERSONAL_TEXT), { contentType: 'text/plain' });
    const view = await content(api, doc.documentId, `?view=${encodeURIComponent(OCR_VIEW)}&redactionProfile=public`);
    expect(view.status, view.text).toBe(200);
    expect(view.headers.get('content-type')).toBe(TEXT);
    for (const secret of PERSONAL_SECRETS) expect(view.text).not.toContain(secret);
    for (const kept of ['Client:', 'Reference number 1234 5678 9012 3456 stays.']) expect(view.text).toContain(kept);
    const job = await settle(api, await run(api, doc.documentId, REDACT));
    expect(job).toMatchObject({ kind: 'workflow.redact', state: 'completed', outputs: { derivedNamespaces: [], viewKeys: [view.headers.get('etag')!.slice(1, -1)] } });
    const base = await content(api, doc.documentId, '');
    expect(base.text).toBe(PERSONAL_TEXT);
  });

  test('stripSignatures: a valid PDF with the same pages and text and no signature field; application/pdf', async () => {
    const signed = Buffer.from(await signedPdf(LINES));
    expect(await signatureObjects(signed)).toBeGreaterThan(0);
    const doc = await api.newDocument(signed, { contentType: 'application/pdf' });
    const res = await fetch(`${server.url}/v1/documents/${doc.documentId}/content?stripSignatures=true`, { headers: { Authorization: `Bearer ${api.token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    const stripped = Buffer.from(await res.arrayBuffer());
    expect(stripped.subarray(0, 5).toString()).toBe('%PDF-');
    expect(await signatureObjects(stripped)).toBe(0);
    const loaded = await PDFDocument.load(stripped);
    expect(loaded.getPageCount()).toBe(1);
    expect(loaded.catalog.lookupMaybe(PDFName.of('AcroForm'), PDFDict)?.has(PDFName.of('SigFlags')) ?? false).toBe(false);
    // Then the text of the stripped PDF: the same words.
    const text = await content(api, doc.documentId, `?stripSignatures=true&view=${encodeURIComponent(OCR_VIEW)}`);
    expect(text.status).toBe(200);
    for (const w of WORDS) expect(lower(text)).toContain(w);
    // The base content is never changed.
    const base = Buffer.from(await (await fetch(`${server.url}/v1/documents/${doc.documentId}/content`, { headers: { Authorization: `Bearer ${api.token}` } })).arrayBuffer());
    expect(base.equals(signed)).toBe(true);
  });

  test('a view that cannot apply is 422 view_unsupported; malformed parameters are 400', async () => {
    const text = await api.newDocument(Buffer.from('plain words'), { contentType: 'text/plain' });
    const pdf = await api.newDocument(await textPdf(LINES), { contentType: 'application/pdf' });
    const zip = await api.newDocument(Buffer.from('PK\u0003\u0004 not really'), { contentType: 'application/zip' });
    for (const [doc, query] of [
      [text.documentId, '?stripSignatures=true'],
      [text.documentId, '?view=urn:svc:view:summary@1'],
      [text.documentId, '?redactionProfile=internal'],
      [pdf.documentId, '?redactionProfile=public'],
      [zip.documentId, `?view=${OCR_VIEW}`],
    ] as const) {
      expectError(await content(api, doc, query), 422, 'view_unsupported');
    }
    // stripSignatures=false is no step: alone, the content itself.
    const plain = await content(api, text.documentId, '?stripSignatures=false');
    expect(plain.status).toBe(200);
    expect(plain.text).toBe('plain words');
    expect(plain.headers.get('etag')).toBe(`"${text.contentRef.key}"`);
    expectError(await content(api, text.documentId, '?stripSignatures=yes'), 400, 'invalid_request');
    for (const wait of ['31', '-1', '1.5', 'soon']) expectError(await api.get(`/v1/jobs/0190f000-0000-7000-8000-000000000000?wait=${wait}`), 400, 'invalid_request');
    expectError(await api.post(`/v1/documents/${zip.documentId}/workflows/${encodeURIComponent(OCR)}/run`, {}), 422, 'view_unsupported');
    // An OCR language without its data package (only @tesseract.js-data/eng is installed) is 422 at once, on every media type, no job.
    for (const workflow of [OCR, ENTITIES, REDACT]) {
      for (const [language, code] of [['deu', 'deu'], ['ger', 'deu'], ['FRA', 'fra']] as const) {
        const refused = await api.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent(workflow)}/run`, { inputs: { options: { language } } });
        expectError(refused, 422, 'view_unsupported');
        expect((refused.json as { message: string }).message).toContain(`@tesseract.js-data/${code}`);
      }
    }
    expect((await api.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent(ENTITIES)}/run`, { inputs: { options: { language: 'eng' } } })).status).toBe(202);
    expectError(await api.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent('urn:svc:workflow:translate@1')}/run`, {}), 404, 'workflow_not_found');
    expectError(await api.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent(OCR)}/run`, { inputs: { options: { dpi: 300 } } }), 400, 'invalid_request');
    expectError(await api.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent(OCR)}/run`, { inputs: { sourceVersion: '0190f000-0000-7000-8000-000000000000' } }), 404, 'version_not_found');
    const narrow = api.as(await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: 'doc.read job.read workflow.run:urn:svc:workflow:entities@1' }));
    expectError(await narrow.post(`/v1/documents/${text.documentId}/workflows/${encodeURIComponent(OCR)}/run`, {}), 403, 'forbidden');
  });

  test('a view is served like a blob: ranges, If-None-Match and HEAD; keyed the same for the same content and steps', async () => {
    const doc = await api.newDocument(Buffer.from(PERSONAL_TEXT), { contentType: 'text/plain' });
    const query = `?view=${encodeURIComponent(OCR_VIEW)}`;
    const whole = await content(api, doc.documentId, query);
    const etag = whole.headers.get('etag')!;
    const range = await content(api, doc.documentId, query, { Range: 'bytes=0-6' });
    expect(range.status).toBe(206);
    expect(range.text).toBe(PERSONAL_TEXT.slice(0, 7));
    expect(range.headers.get('content-range')).toBe(`bytes 0-6/${Buffer.byteLength(PERSONAL_TEXT)}`);
    const cached = await content(api, doc.documentId, query, { 'If-None-Match': etag });
    expect(cached.status).toBe(304);
    const head = await fetch(`${server.url}/v1/documents/${doc.documentId}/content${query}`, { method: 'HEAD', headers: { Authorization: `Bearer ${api.token}` } });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(Buffer.byteLength(PERSONAL_TEXT)));
    expect(await head.text()).toBe('');
    // The same bytes in another document: the same key (no tenant, time or document in it).
    const twin = await api.newDocument(Buffer.from(PERSONAL_TEXT), { contentType: 'text/plain' });
    expect((await content(api, twin.documentId, query)).headers.get('etag')).toBe(etag);
  });

  test('ten concurrent first requests for one view run one materialization; after a restart the view comes from the cache', async () => {
    const doc = await api.newDocument(await scannedPdf(['Concurrent readers share one job']), { contentType: 'application/pdf' });
    const query = `?view=${encodeURIComponent(OCR_VIEW)}`;
    const replies = await Promise.all(Array.from({ length: 10 }, () => content(api, doc.documentId, query)));
    for (const r of replies) {
      expect(r.status, r.text).toBe(200);
      expect(r.text).toBe(replies[0]!.text);
    }
    expect(lower(replies[0]!)).toContain('concurrent');
    const jobs = await api.get(`/v1/jobs?documentId=${doc.documentId}`);
    expect(jobs.json.jobs.map((j: { kind: string }) => j.kind)).toEqual(['view.materialize']);

    await server.stop();
    server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_VIEW_WAIT: '0' }, root);
    api = new Api(server.url, api.token);
    const after = await content(api, doc.documentId, query);
    expect(after.status).toBe(200);
    expect(after.text).toBe(replies[0]!.text);
    expect((await api.get(`/v1/jobs?documentId=${doc.documentId}`)).json.jobs).toHaveLength(1);
  });

  // The server runs with SVC_VIEW_WAIT=0 since the restart of the test before.
  test('SVC_VIEW_WAIT=0: a view not made yet is 202 with its job and Retry-After, then 200', async () => {
    const doc = await api.newDocument(Buffer.from('Waiting for a view'), { contentType: 'text/plain' });
    const query = `?view=${encodeURIComponent(OCR_VIEW)}&redactionProfile=public`;
    const first = await content(api, doc.documentId, query);
    expect(first.status).toBe(202);
    expect(first.headers.get('retry-after')).toBe('5');
    expect(first.headers.get('location')).toBe(`/v1/jobs/${first.json.jobId}`);
    expect(Object.keys(first.json)).toEqual(['jobId']);
    expect((await settle(api, first.json.jobId)).state).toBe('completed');
    const second = await content(api, doc.documentId, query);
    expect(second.status).toBe(200);
    expect(second.text).toBe('Waiting for a view');
  });
});

describe('workflow jobs and crashes', () => {
  test('kill -9 while an OCR job runs: after the restart it runs again and completes once', async () => {
    const root = tempRoot();
    let server = await startServer({ SVC_DURABILITY: 'strict', SVC_JOB_LEASE: '2s' }, root);
    try {
      let api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: ALL }));
      const pages = await PDFDocument.create();
      for (let i = 0; i < 4; i++) {
        const page = await PDFDocument.load(await scannedPdf([`Page ${i + 1} of the crash report`, ...LINES]));
        const [copied] = await pages.copyPages(page, [0]);
        pages.addPage(copied);
      }
      const doc = await api.newDocument(Buffer.from(await pages.save()), { contentType: 'application/pdf' });
      const jobId = await run(api, doc.documentId, OCR);
      const until = Date.now() + 20_000;
      while ((await api.get(`/v1/jobs/${jobId}`)).json.state !== 'running') {
        if (Date.now() > until) throw new Error('the job never ran');
        await new Promise((r) => setTimeout(r, 20));
      }
      await server.kill9();
      server = await startServer({ SVC_DURABILITY: 'strict', SVC_JOB_LEASE: '2s' }, root);
      api = new Api(server.url, api.token);
      const job = await settle(api, jobId, 120_000);
      expect(job.state, JSON.stringify(job.error)).toBe('completed');
      expect(job.attempts).toBe(2);
      const entry = (await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces['urn:svc:ocr'];
      expect(entry.data.pages.map((p: { number: number; source: string }) => `${p.number}:${p.source}`)).toEqual(['1:ocr', '2:ocr', '3:ocr', '4:ocr']);
      expect(entry.data.text.toLowerCase()).toContain('crash report');
      const view = await content(api, doc.documentId, `?view=${encodeURIComponent(OCR_VIEW)}`);
      expect(view.text).toBe(entry.data.text);
    } finally {
      await server.stop();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  // The failure is made by removing block files: the embedded backend's (pg-s3 keeps them in the bucket).
  test.skipIf(TEST_BACKEND !== 'fs')('a job that cannot read its content is retried with backoff and ends dead; the view request says so (fs: block files removed)', async () => {
    const root = tempRoot();
    const server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_JOB_MAX_ATTEMPTS: '3', SVC_JOB_BACKOFF: '200ms' }, root);
    try {
      const api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: ALL }));
      // Larger than SVC_INLINE_MAX_BYTES, so its bytes are block files, which then go missing.
      const doc = await api.newDocument(Buffer.from('Words to read. '.repeat(4000)), { contentType: 'text/plain' });
      fs.rmSync(path.join(root, 'blocks'), { recursive: true, force: true });
      const job = await settle(api, await run(api, doc.documentId, OCR));
      expect(job).toMatchObject({ state: 'dead', attempts: 3, error: { code: 'internal_error' } });
      expect(Date.parse(job.finishedAt) - Date.parse(job.startedAt)).toBeGreaterThanOrEqual(0);
      const created = Date.parse(job.createdAt);
      // Backoff: 200 ms, then 400 ms between the three attempts.
      expect(Date.parse(job.finishedAt) - created).toBeGreaterThanOrEqual(600);
      expect((await api.get(`/v1/documents/${doc.documentId}/metadata`)).json.namespaces['urn:svc:ocr']).toBeUndefined();
      expectError(await content(api, doc.documentId, `?view=${encodeURIComponent(OCR_VIEW)}`), 500, 'view_failed');
    } finally {
      await server.stop();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('a client write of invalid data to the OCR namespace is quarantined and does not hide the workflow entry', async () => {
    const server = await startServer({ SVC_DURABILITY: 'relaxed' });
    try {
      const api = new Api(server.url, await devToken(server.url, { org_id: 'acme', sub: 'alice', scope: ALL }));
      const doc = await api.newDocument(Buffer.from('Stable text'), { contentType: 'text/plain' });
      const ocrJob = await settle(api, await run(api, doc.documentId, OCR));
      const provenance = { producer: { name: 'client', version: '1' }, producedAt: '2026-11-25T10:00:00Z', input: { kind: 'blob', key: doc.contentRef.key } };
      // The provenance's input must name content of this document: a version's content key or a view made from one.
      const other = await api.newDocument(Buffer.from('Other text'), { contentType: 'text/plain' });
      const otherView = (await settle(api, await run(api, other.documentId, OCR))).outputs.viewKeys[0] as string;
      const write = (input: { kind: string; key: string }) => api.post(`/v1/documents/${doc.documentId}/metadata`, { mode: 'derived', provenance: { ...provenance, input }, bundle: { namespaces: { 'urn:svc:notes': { schema: 'urn:svc:schema:notes@1.0.0', data: { text: 'n' } } } } });
      for (const input of [{ kind: 'blob', key: 'b3:00' }, { kind: 'blob', key: other.contentRef.key }, { kind: 'view', key: otherView }, { kind: 'view', key: doc.contentRef.key }, { kind: 'blob', key: ocrJob.outputs.viewKeys[0] }]) {
        const refused = await write(input);
        expect([input, refused.status, refused.json.error?.code]).toEqual([input, 422, 'provenance_input_unknown']);
      }
      expect((await write({ kind: 'view', key: ocrJob.outputs.viewKeys[0] })).status).toBe(202);
      expect((await write({ kind: 'blob', key: doc.contentRef.key })).status).toBe(202);
      const bad = await api.post(`/v1/documents/${doc.documentId}/metadata`, { mode: 'derived', provenance, bundle: { namespaces: { 'urn:svc:ocr': { schema: 'urn:svc:schema:ocr@1.0.0', data: { text: 7 } } } } });
      expect(bad.status).toBe(202);
      expect((await settle(api, bad.json.jobId)).outputs.quarantinedNamespaces).toEqual(['urn:svc:ocr']);
      const meta = await api.get(`/v1/documents/${doc.documentId}/metadata?includeQuarantined=true`);
      expect(meta.json.namespaces['urn:svc:ocr']).toMatchObject({ status: 'valid', data: { text: 'Stable text' } });
      expect(meta.json.quarantined['urn:svc:ocr']).toMatchObject({ status: 'quarantined', data: { text: 7 } });
    } finally {
      await server.stop();
    }
  });
});
