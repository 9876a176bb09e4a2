// Content made in the tests for views and workflows: PDFs with a text layer, the same pages as
// images only (drawn with @napi-rs/canvas), PNG/JPEG/TIFF images, a PDF with a signature field,
// and text with personal data. Nothing is read from disk.

import { createCanvas } from '@napi-rs/canvas';
import { PDFDocument, PDFHexString, PDFName, PDFString, StandardFonts } from 'pdf-lib';

/** A PDF whose page has a text layer with `lines` (the document, to add to or save). */
export async function textPdfDocument(lines: readonly string[]): Promise<PDFDocument> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const page = doc.addPage([612, 792]);
  lines.forEach((line, i) => page.drawText(line, { x: 72, y: 700 - i * 30, size: 18, font }));
  return doc;
}

/** LINES in large black type on white, as a scan would show them. */
export async function textImage(lines: readonly string[], format: 'png' | 'jpeg' = 'png'): Promise<Uint8Array> {
  const canvas = createCanvas(1700, 140 + lines.length * 90);
  const context = canvas.getContext('2d');
  context.fillStyle = 'white';
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.fillStyle = 'black';
  context.font = '48px sans-serif';
  lines.forEach((line, i) => context.fillText(line, 80, 110 + i * 90));
  return format === 'png' ? canvas.encode('png') : canvas.encode('jpeg', 92);
}

/** A PDF whose only page is a picture of the text: no text layer at all. */
export async function imageOnlyPdf(png: Uint8Array): Promise<Uint8Array> {
  const doc = await PDFDocument.create();
  const image = await doc.embedPng(png);
  const page = doc.addPage([612, 792]);
  const width = 540;
  const height = (image.height / image.width) * width;
  page.drawImage(image, { x: 36, y: 792 - 72 - height, width, height });
  return doc.save();
}

/** A baseline little-endian TIFF, 8-bit grey, one strip per page, one IFD per page. */
export function grayTiff(pages: ReadonlyArray<{ width: number; height: number; pixels: Uint8Array }>): Uint8Array {
  const ENTRIES = 9;
  const ifdSize = 2 + ENTRIES * 12 + 4;
  const total = 8 + pages.reduce((sum, p) => sum + ifdSize + p.pixels.length, 0);
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  bytes.set([0x49, 0x49], 0);
  view.setUint16(2, 42, true);
  view.setUint32(4, 8, true);
  let offset = 8;
  pages.forEach((page, index) => {
    const ifd = offset;
    const data = ifd + ifdSize;
    const next = index === pages.length - 1 ? 0 : data + page.pixels.length;
    const entries: Array<[number, number, number]> = [
      [256, 3, page.width], [257, 3, page.height], [258, 3, 8], [259, 3, 1], [262, 3, 1],
      [273, 4, data], [277, 3, 1], [278, 3, page.height], [279, 4, page.pixels.length],
    ];
    view.setUint16(ifd, ENTRIES, true);
    entries.forEach(([tag, type, value], i) => {
      const at = ifd + 2 + i * 12;
      view.setUint16(at, tag, true);
      view.setUint16(at + 2, type, true);
      view.setUint32(at + 4, 1, true);
      if (type === 3) view.setUint16(at + 8, value, true);
      else view.setUint32(at + 8, value, true);
    });
    view.setUint32(ifd + 2 + ENTRIES * 12, next, true);
    bytes.set(page.pixels, data);
    offset = data + page.pixels.length;
  });
  return bytes;
}

export function grayPage(line: string): { width: number; height: number; pixels: Uint8Array } {
  const canvas = createCanvas(1400, 200);
  const context = canvas.getContext('2d');
  context.fillStyle = 'white';
  context.fillRect(0, 0, canvas.width, canvas.height);
  context.fillStyle = 'black';
  context.font = '56px sans-serif';
  context.fillText(line, 60, 125);
  const rgba = context.getImageData(0, 0, canvas.width, canvas.height).data;
  const pixels = new Uint8Array(canvas.width * canvas.height);
  for (let i = 0; i < pixels.length; i++) pixels[i] = rgba[i * 4]!;
  return { width: canvas.width, height: canvas.height, pixels };
}

/**
 * The text PDF with a text form field and a signature field built the way signing tools write
 * them: an AcroForm /Sig field merged with its widget (in the page's /Annots), /V pointing to a
 * /Type /Sig dictionary (/Filter /Adobe.PPKLite, /Contents, /ByteRange), /SigFlags 3, and the
 * catalog's /Perms /DocMDP pointing at the signature too.
 */
export async function signedPdf(lines: readonly string[]): Promise<Uint8Array> {
  const doc = await textPdfDocument(lines);
  const page = doc.getPage(0);
  const form = doc.getForm();
  const customer = form.createTextField('customer');
  customer.setText('Northwind');
  customer.addToPage(page, { x: 72, y: 500, width: 200, height: 24 });
  const context = doc.context;
  const signature = context.register(context.obj({
    Type: 'Sig',
    Filter: 'Adobe.PPKLite',
    SubFilter: 'adbe.pkcs7.detached',
    ByteRange: [0, 1000, 9000, 500],
    Contents: PDFHexString.of('00'.repeat(256)),
    M: PDFString.of('D:20240512093000Z'),
    Name: PDFString.of('Test Signer'),
  }));
  const widget = context.register(context.obj({
    Type: 'Annot',
    Subtype: 'Widget',
    FT: 'Sig',
    T: PDFString.of('Signature1'),
    V: signature,
    F: 132,
    Rect: [0, 0, 0, 0],
    P: page.ref,
  }));
  page.node.addAnnot(widget);
  const acroForm = form.acroForm.dict;
  form.acroForm.addField(widget);
  acroForm.set(PDFName.of('SigFlags'), context.obj(3));
  doc.catalog.set(PDFName.of('Perms'), context.obj({ DocMDP: signature }));
  return doc.save();
}

/** The saved PDF of `textPdfDocument`. */
export async function textPdf(lines: readonly string[]): Promise<Buffer> {
  return Buffer.from(await (await textPdfDocument(lines)).save());
}

/** The same lines as an image-only PDF: no text layer, OCR has to read it. */
export async function scannedPdf(lines: readonly string[]): Promise<Buffer> {
  return Buffer.from(await imageOnlyPdf(await textImage(lines)));
}

/** Text with personal data of every kind the `public` profile masks, and the strings that must go. */
export const PERSONAL_TEXT = [
  'Client: Jane Example, SSN 123-45-6789, date of birth 1984-03-14.',
  'Call +44 20 7946 0958 or (212) 555-0147, write to jane.example@example.org.',
  'Lives at 221 Baker Street, pays from IBAN GB82WEST12345698765432 with card 4111 1111 1111 1111.',
  'Reference number 1234 5678 9012 3456 stays.',
].join('\n');
export const PERSONAL_SECRETS = ['123-45-6789', '1984-03-14', '+44 20 7946 0958', '(212) 555-0147', 'jane.example@example.org', '221 Baker Street', 'GB82WEST12345698765432', '4111 1111 1111 1111'];
