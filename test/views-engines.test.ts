// The content engines of views and workflows (engine/views/engines): text extraction (PDF text
// layer, OCR of scanned pages and images, plain text), signature removal, redaction and entities,
// on fixtures made here: PDFs with pdf-lib, images drawn with @napi-rs/canvas, real OCR.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { PDFDocument, PDFName } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  closeEngines,
  ENGINES,
  extractText,
  findEntities,
  hasSignatureFields,
  PAGE_SEPARATOR,
  redact,
  REDACTION_PROFILES,
  stripSignatures,
  UnsupportedContent,
} from '../engine/views/engines/index.js';
import { grayPage, grayTiff, imageOnlyPdf, signedPdf, textImage, textPdfDocument as textPdf } from './helpers/content-fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OCR_TIMEOUT = 120_000;

const LINES = ['Quarterly invoice for Northwind Traders', 'Delivered seventeen wooden chairs', 'Payment due within thirty days'];
/** Words OCR must find exactly (case aside) in the image versions of LINES. */
const OCR_WORDS = ['quarterly', 'invoice', 'northwind', 'traders', 'seventeen', 'wooden', 'chairs', 'payment', 'thirty'];

afterAll(async () => {
  await closeEngines();
});

const words = (text: string) => text.toLowerCase().split(/[^a-z]+/).filter(Boolean);

describe('extractText', () => {
  test('a PDF with a text layer: its words, from the text layer', async () => {
    const pdf = await (await textPdf(LINES)).save();
    const result = await extractText(pdf, 'application/pdf');
    expect(result.text.split('\n')).toEqual(LINES);
    expect(result.pages).toEqual([{ number: 1, source: 'text-layer', characters: result.text.length }]);
    expect(result).toMatchObject({ language: 'eng', engine: ENGINES.text });
    expect(result.confidence).toBeUndefined();
    expect(ENGINES.text).toEqual({ name: 'pdfjs-dist+tesseract.js', version: '5.7.284+7.0.0' });
    expect(pdf.byteLength).toBeGreaterThan(0); // the caller's bytes are not taken over by pdfjs
  });

  test('the same page as an image-only PDF: OCR of the rendered page finds the words', async () => {
    const pdf = await imageOnlyPdf(await textImage(LINES));
    const started = performance.now();
    const result = await extractText(pdf, 'application/pdf');
    console.log(`OCR of one rendered PDF page: ${Math.round(performance.now() - started)} ms`);
    expect(words(result.text)).toEqual(expect.arrayContaining(OCR_WORDS));
    expect(result.pages).toHaveLength(1);
    expect(result.pages[0]).toMatchObject({ number: 1, source: 'ocr', characters: [...result.text].length });
    expect(result.pages[0]!.confidence).toBeGreaterThan(0.5);
    expect(result.pages[0]!.confidence).toBeLessThanOrEqual(1);
    expect(result.confidence).toBe(result.pages[0]!.confidence);
  }, OCR_TIMEOUT);

  test('a text page and a scanned page in one PDF: each by its own means, pages separated by a form feed', async () => {
    const doc = await PDFDocument.load(await (await textPdf(['First page typed text'])).save());
    const scanned = await PDFDocument.load(await imageOnlyPdf(await textImage(LINES)));
    const [page] = await doc.copyPages(scanned, [0]);
    doc.addPage(page);
    const result = await extractText(await doc.save(), 'application/pdf');
    expect(result.pages.map((p) => p.source)).toEqual(['text-layer', 'ocr']);
    const [first, second] = result.text.split(PAGE_SEPARATOR);
    expect(first).toBe('First page typed text');
    expect(words(second!)).toEqual(expect.arrayContaining(OCR_WORDS));
    expect(result.confidence).toBe(result.pages[1]!.confidence);
  }, OCR_TIMEOUT);

  test('PNG and JPEG images are OCR\'d', async () => {
    for (const [format, mediaType] of [['png', 'image/png'], ['jpeg', 'image/jpeg']] as const) {
      const started = performance.now();
      const result = await extractText(await textImage(LINES, format), mediaType);
      console.log(`OCR of a ${format} image (1700x410): ${Math.round(performance.now() - started)} ms`);
      expect(words(result.text)).toEqual(expect.arrayContaining(OCR_WORDS));
      expect(result.pages).toEqual([{ number: 1, source: 'ocr', characters: [...result.text].length, confidence: result.confidence }]);
      expect(result.confidence).toBeGreaterThan(0.5);
    }
  }, OCR_TIMEOUT);

  test('a multi-page TIFF: every page is OCR\'d', async () => {
    const tiff = grayTiff([grayPage('Alpha page mentions lighthouse'), grayPage('Beta page mentions harbour')]);
    const result = await extractText(tiff, 'image/tiff');
    expect(result.pages.map((p) => [p.number, p.source])).toEqual([[1, 'ocr'], [2, 'ocr']]);
    const [first, second] = result.text.split(PAGE_SEPARATOR);
    expect(words(first!)).toEqual(expect.arrayContaining(['alpha', 'lighthouse']));
    expect(words(second!)).toEqual(expect.arrayContaining(['beta', 'harbour']));
  }, OCR_TIMEOUT);

  test('text/plain is taken as it is (UTF-8 whatever the charset parameter, BOM dropped)', async () => {
    const text = 'Grüße aus Köln\nzweite Zeile  \n';
    const bytes = new TextEncoder().encode('\ufeff' + text);
    const result = await extractText(bytes, 'text/plain; charset=ISO-8859-1');
    expect(result).toEqual({ text, language: 'eng', pages: [{ number: 1, source: 'text-layer', characters: [...text].length }], engine: ENGINES.text });
  });

  test('unsupported media types, bytes that are not what they claim, and uninstalled languages: UnsupportedContent', async () => {
    const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0]);
    await expect(extractText(zip, 'application/zip')).rejects.toBeInstanceOf(UnsupportedContent);
    await expect(extractText(zip, 'application/pdf')).rejects.toBeInstanceOf(UnsupportedContent);
    await expect(extractText(zip, 'image/png')).rejects.toBeInstanceOf(UnsupportedContent);
    await expect(extractText(new TextEncoder().encode('hi'), 'text/plain', 'deu')).rejects.toThrow(/'deu' is not installed.*@tesseract\.js-data\/deu/);
    await expect(extractText(new TextEncoder().encode('hi'), 'text/plain', 'english')).rejects.toBeInstanceOf(UnsupportedContent);
    expect((await extractText(new TextEncoder().encode('hi'), 'text/plain', 'ENG')).language).toBe('eng');
  });
});

describe('signatures', () => {
  test('a signature field, its widget, its /Sig dictionary, /SigFlags and /Perms are removed; pages, text layer and other fields stay', async () => {
    const signed = await signedPdf(LINES);
    expect(await hasSignatureFields(signed)).toBe(true);
    const stripped = await stripSignatures(signed);
    expect(await hasSignatureFields(stripped)).toBe(false);

    const doc = await PDFDocument.load(stripped);
    expect(doc.getPageCount()).toBe(1);
    expect(doc.getForm().getFields().map((f) => f.getName())).toEqual(['customer']);
    const acroForm = doc.catalog.lookup(PDFName.of('AcroForm')) as unknown as { has(name: PDFName): boolean };
    expect(acroForm.has(PDFName.of('SigFlags'))).toBe(false);
    expect(doc.catalog.has(PDFName.of('Perms'))).toBe(false);
    // Only the text field's widget is left on the page.
    expect(doc.getPage(0).node.Annots()?.size()).toBe(1);

    const text = await extractText(stripped, 'application/pdf');
    expect(text.text.split('\n')).toEqual(LINES);
    expect(text.pages[0]!.source).toBe('text-layer');
    // Deterministic: the same input gives the same bytes (a view's content must be).
    expect(Buffer.from(await stripSignatures(signed)).equals(Buffer.from(stripped))).toBe(true);
  });

  test('a PDF without signatures stays valid; non-PDF bytes are UnsupportedContent', async () => {
    const plain = await (await textPdf(LINES)).save();
    expect(await hasSignatureFields(plain)).toBe(false);
    const resaved = await stripSignatures(plain);
    expect((await PDFDocument.load(resaved)).getPageCount()).toBe(1);
    expect((await extractText(resaved, 'application/pdf')).text.split('\n')).toEqual(LINES);
    const notPdf = new TextEncoder().encode('just some text, not a PDF');
    await expect(stripSignatures(notPdf)).rejects.toBeInstanceOf(UnsupportedContent);
    await expect(hasSignatureFields(notPdf)).rejects.toBeInstanceOf(UnsupportedContent);
  });
});

describe('redact', () => {
  const PERSONAL = {
    ssn: '123-45-6789',
    dob: '14 March 1981',
    dobIso: '1981-03-14',
    usPhone: '(555) 123-4567',
    ukPhone: '+44 20 7946 0958',
    email: 'jane.doe@example.com',
    address: '742 Evergreen Terrace',
    ibanCompact: 'GB82WEST12345698765432',
    ibanSpaced: 'GB82 WEST 1234 5698 7654 32',
    card: '4111 1111 1111 1111',
    cardDashed: '5555-5555-5555-4444',
  };
  const KEPT = ['Customer record', 'Jane Doe', 'Order 1234 5678 9012 3456', 'shipped 2024-05-12', 'invoice 4711', 'due in 30 days', 'Springfield'];
  const TEXT = [
    `${KEPT[0]} for ${KEPT[1]}, SSN ${PERSONAL.ssn}, born on ${PERSONAL.dob} (DOB: ${PERSONAL.dobIso}).`,
    `Phone ${PERSONAL.usPhone}, mobile ${PERSONAL.ukPhone}, e-mail ${PERSONAL.email}.`,
    `Lives at ${PERSONAL.address}, ${KEPT[6]}.`,
    `Pays from IBAN ${PERSONAL.ibanCompact} (or ${PERSONAL.ibanSpaced}) with card ${PERSONAL.card} or ${PERSONAL.cardDashed}.`,
    `${KEPT[2]} was ${KEPT[3]}, ${KEPT[4]}, ${KEPT[5]}.`,
  ].join('\n');

  test('profile public masks ids, dates of birth, phones, e-mail, street address, IBAN and cards; the rest stays', () => {
    const redacted = redact(TEXT, 'public');
    for (const value of Object.values(PERSONAL)) expect(redacted).not.toContain(value);
    for (const digits of ['6789', '0958', '4567', '98765432', '1111 1111', '4444']) expect(redacted).not.toContain(digits);
    for (const value of KEPT) expect(redacted).toContain(value); // 1234 5678 9012 3456 fails Luhn: not a card
    expect(redacted).toContain('SSN [REDACTED:national-id]');
    expect(redacted).toContain('born on [REDACTED:date-of-birth] (DOB: [REDACTED:date-of-birth])');
    expect(redacted).toContain('Phone [REDACTED:phone], mobile [REDACTED:phone], e-mail [REDACTED:email].');
    expect(redacted).toContain('Lives at [REDACTED:address], Springfield.');
    expect(redacted).toContain('IBAN [REDACTED:iban] (or [REDACTED:iban]) with card [REDACTED:card] or [REDACTED:card].');
    expect(redact(TEXT, 'public')).toBe(redacted); // deterministic
  });

  test('IBANs and card numbers need valid check digits', () => {
    expect(redact('IBAN GB83WEST12345698765432 stays', 'public')).toBe('IBAN GB83WEST12345698765432 stays');
    expect(redact('card 4111 1111 1111 1112 stays', 'public')).toBe('card 4111 1111 1111 1112 stays');
    expect(redact('card 4111111111111111 goes', 'public')).toBe('card [REDACTED:card] goes');
  });

  test('labelled national ids and other street address forms', () => {
    expect(redact('Passport No. X1234567 was issued', 'public')).toBe('Passport No. [REDACTED:national-id] was issued');
    expect(redact('National insurance number QQ 12 34 56 C, thanks', 'public')).toBe('National insurance number [REDACTED:national-id], thanks');
    expect(redact('Send it to 1600 Pennsylvania Avenue NW, Washington, DC 20500 today', 'public')).toBe('Send it to [REDACTED:address] today');
    expect(redact('Office: 221B Baker Street, London NW1 6XE.', 'public')).toBe('Office: [REDACTED:address].');
  });

  test('an unknown profile is UnsupportedContent', () => {
    expect(REDACTION_PROFILES).toEqual(['public']);
    expect(() => redact('text', 'internal')).toThrow(UnsupportedContent);
  });
});

describe('findEntities', () => {
  test('people, organizations, places, dates, e-mail addresses and phone numbers, deduplicated in order', () => {
    const text = 'On March 3, 2024 Jane Smith met the board of Acme Corporation in Boston. '
      + 'Jane Smith will write from jane.smith@example.com or call +1 (617) 555-0142 before 2024-04-15. '
      + 'Write to jane.smith@example.com again on 05/06/2024.';
    const { entities, engine, confidence } = findEntities(text);
    expect(entities).toEqual({
      people: ['Jane Smith'],
      orgs: ['Acme Corporation'],
      places: ['Boston'],
      dates: ['March 3, 2024', '2024-04-15', '05/06/2024'],
      emails: ['jane.smith@example.com'],
      phones: ['+1 (617) 555-0142'],
    });
    expect(engine).toEqual(ENGINES.entities);
    expect(confidence).toBeGreaterThan(0);
    expect(confidence).toBeLessThanOrEqual(1);
  });
});

describe('off the main thread', () => {
  // The engines compiled as the build compiles them, into a folder under the worktree (so the
  // packages resolve), then loaded by worker threads as the service's Piscina threads load dist/.
  const outDir = path.join(ROOT, 'test-artifacts', `views-engines-${process.pid}`);
  const compiled = (file: string) => path.join(outDir, file);

  beforeAll(() => {
    fs.rmSync(outDir, { recursive: true, force: true });
    const tsc = spawnSync(process.execPath, [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'), '--ignoreConfig', '--outDir', outDir, '--rootDir', ROOT,
      '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--strict', '--skipLibCheck', '--types', 'node',
      path.join(ROOT, 'engine/views/engines/index.ts'), path.join(ROOT, 'engine/worker-pool.ts'),
    ], { encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    fs.writeFileSync(compiled('extract-in-worker.mjs'), [
      "import { parentPort, threadId, workerData } from 'node:worker_threads';",
      "import { extractText } from './engine/views/engines/index.js';",
      'const started = performance.now();',
      "const result = await extractText(workerData.pdf, 'application/pdf');",
      'parentPort.postMessage({ threadId, result, ms: performance.now() - started });',
      '// No closeEngines(): the idle OCR worker must not keep this thread alive.',
    ].join('\n'));
    fs.writeFileSync(compiled('extract-task.mjs'), [
      "import { threadId } from 'node:worker_threads';",
      "import { extractText } from './engine/views/engines/index.js';",
      "export default async ({ bytes, mediaType }) => ({ threadId, result: await extractText(bytes, mediaType) });",
    ].join('\n'));
  });

  afterAll(() => {
    fs.rmSync(outDir, { recursive: true, force: true });
  });

  test('extractText with pdfjs and OCR in a plain worker thread, which then exits by itself', async () => {
    const pdf = await imageOnlyPdf(await textImage(LINES));
    const worker = new Worker(compiled('extract-in-worker.mjs'), { workerData: { pdf } });
    const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
    const message = await new Promise<{ threadId: number; result: { text: string; pages: Array<{ source: string }> }; ms: number }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    console.log(`OCR of one rendered PDF page in a fresh worker thread (tesseract worker start included): ${Math.round(message.ms)} ms`);
    expect(message.threadId).toBeGreaterThan(0);
    expect(message.result.pages.map((p) => p.source)).toEqual(['ocr']);
    expect(words(message.result.text)).toEqual(expect.arrayContaining(OCR_WORDS));
    const exitedInTime = await Promise.race([exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(resolve, 20_000, false))]);
    if (!exitedInTime) await worker.terminate();
    expect(exitedInTime).toBe(true);
  }, OCR_TIMEOUT);

  test('the same in the service\'s Piscina pool (engine/worker-pool), twice on one thread, then the pool is destroyed', async () => {
    const { createWorkerPool } = (await import(pathToFileURL(compiled('engine/worker-pool.js')).href)) as {
      createWorkerPool(options: object): { run(task: unknown): Promise<{ threadId: number; result: { text: string; pages: Array<{ source: string }> } }>; destroy(): Promise<void> };
    };
    const pool = createWorkerPool({ filename: pathToFileURL(compiled('extract-task.mjs')).href, minThreads: 1, maxThreads: 1 });
    try {
      const pdf = await imageOnlyPdf(await textImage(LINES));
      for (const task of [{ bytes: pdf, mediaType: 'application/pdf' }, { bytes: await textImage(LINES), mediaType: 'image/png' }]) {
        const { threadId, result } = await pool.run(task);
        expect(threadId).toBeGreaterThan(0);
        expect(result.pages.map((p) => p.source)).toEqual(['ocr']);
        expect(words(result.text)).toEqual(expect.arrayContaining(OCR_WORDS));
      }
    } finally {
      await pool.destroy(); // ends the thread and the tesseract.js thread it started
    }
  }, OCR_TIMEOUT);
});
