// Content made in the tests for views and workflows: a PDF with a text layer, the same page as
// an image only (rendered with @napi-rs/canvas), a PNG, a PDF with a signature field, and text
// with personal data. Nothing is read from disk.

import { createCanvas } from '@napi-rs/canvas';
import { PDFDocument, PDFHexString, PDFName, PDFNumber, PDFString, StandardFonts } from 'pdf-lib';

/** A page of large clear text as a PNG (what a scanner would give, without the noise). */
export function textPng(lines: readonly string[], width = 1700, lineHeight = 90): Buffer {
  const canvas = createCanvas(width, lineHeight * (lines.length + 1));
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = '#000000';
  ctx.font = '56px sans-serif';
  lines.forEach((line, i) => ctx.fillText(line, 60, lineHeight * (i + 1)));
  return canvas.toBuffer('image/png');
}

/** A PDF whose page has a text layer with `lines`. */
export async function textPdf(lines: readonly string[]): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  const page = pdf.addPage([612, 792]);
  lines.forEach((line, i) => page.drawText(line, { x: 50, y: 720 - i * 30, size: 18, font }));
  return Buffer.from(await pdf.save());
}

/** The same lines as an image-only PDF: no text layer, OCR has to read it. */
export async function scannedPdf(lines: readonly string[]): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const image = await pdf.embedPng(textPng(lines));
  const page = pdf.addPage([612, 792]);
  const width = 560;
  const height = (image.height / image.width) * width;
  page.drawImage(image, { x: 26, y: 760 - height, width, height });
  return Buffer.from(await pdf.save());
}

/** A PDF with a text layer and a signature field (an AcroForm /FT /Sig widget and its /Type /Sig value, SigFlags 3). */
export async function signedPdf(lines: readonly string[]): Promise<Buffer> {
  const pdf = await PDFDocument.load(await textPdf(lines));
  const { context } = pdf;
  const page = pdf.getPage(0);
  const signature = context.obj({
    Type: 'Sig', Filter: 'Adobe.PPKLite', SubFilter: 'adbe.pkcs7.detached',
    ByteRange: [0, 0, 0, 0], Contents: PDFHexString.of('00'.repeat(64)), Name: PDFString.of('Test Signer'), M: PDFString.of('D:20261125120000Z'),
  });
  const widget = context.obj({
    Type: 'Annot', Subtype: 'Widget', FT: 'Sig', T: PDFString.of('Signature1'), V: context.register(signature), Rect: [50, 50, 250, 100], F: 4, P: page.ref,
  });
  const widgetRef = context.register(widget);
  page.node.set(PDFName.of('Annots'), context.obj([widgetRef]));
  pdf.catalog.set(PDFName.of('AcroForm'), context.obj({ Fields: [widgetRef], SigFlags: PDFNumber.of(3) }));
  return Buffer.from(await pdf.save({ useObjectStreams: false }));
}

/** Text with personal data of every kind the `public` profile masks, and the strings that must go. */
export const PERSONAL_TEXT = [
  'Client: Jane Example, SSN 123-45-6789, date of birth 1984-03-14.',
  'Call +44 20 7946 0958 or (212) 555-0147, write to jane.example@example.org.',
  'Lives at 221 Baker Street, pays from IBAN GB82WEST12345698765432 with card 4111 1111 1111 1111.',
  'Reference number 1234 5678 9012 3456 stays.',
].join('\n');
export const PERSONAL_SECRETS = ['123-45-6789', '1984-03-14', '+44 20 7946 0958', '(212) 555-0147', 'jane.example@example.org', '221 Baker Street', 'GB82WEST12345698765432', '4111 1111 1111 1111'];
