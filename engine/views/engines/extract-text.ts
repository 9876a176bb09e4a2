// The text of a document, page by page: a PDF's text layer where a page has one, OCR of the
// rendered page where it has none; images are OCR'd; plain text is taken as it is.

import { UnsupportedContent } from './errors.js';
import { recognizeImage, resolveOcrLanguage, type OcrLanguage } from './ocr.js';
import { openPdf, pdfPages } from './pdf-text.js';
import { isTiff, tiffPage, tiffPageCount } from './tiff-pages.js';
import { ENGINES, type EngineInfo } from './versions.js';

export interface PageText {
  number: number;
  source: 'text-layer' | 'ocr';
  /** Unicode code points of the page's text. */
  characters: number;
  /** OCR pages only: tesseract's mean word confidence, 0..1. */
  confidence?: number;
}

export interface ExtractedText {
  /** The pages' texts in order, separated by a form feed ('\f', as pdftotext does). */
  text: string;
  language: string;
  pages: PageText[];
  engine: EngineInfo;
  /** The mean of the OCR pages' confidences; absent when no page was OCR'd. */
  confidence?: number;
}

/** Between two pages' texts. */
export const PAGE_SEPARATOR = '\f';

const MEDIA_TYPES_OF_IMAGES = new Set(['image/png', 'image/jpeg', 'image/jpg', 'image/pjpeg', 'image/tiff', 'image/tif']);

/** 'Application/PDF; charset=x' → 'application/pdf'. */
function essence(mediaType: string): string {
  return mediaType.split(';', 1)[0]!.trim().toLowerCase();
}

/**
 * `language` (ISO 639-2, default 'eng') is checked for every media type, not only when a page
 * needs OCR: the same request then gets the same answer whatever the document holds.
 */
export async function extractText(bytes: Uint8Array, mediaType: string, language = 'eng'): Promise<ExtractedText> {
  const ocrLanguage = resolveOcrLanguage(language);
  const type = essence(mediaType);
  let pages: Array<{ text: string; page: PageText }>;
  if (type === 'application/pdf') pages = await pdfText(bytes, ocrLanguage);
  else if (MEDIA_TYPES_OF_IMAGES.has(type)) pages = await imageText(bytes, type, ocrLanguage);
  else if (type === 'text/plain') pages = [textPage(1, 'text-layer', plainText(bytes))];
  else throw new UnsupportedContent(`No text can be extracted from ${type || 'content without a media type'}`);
  const ocrConfidences = pages.flatMap(({ page }) => (page.confidence === undefined ? [] : [page.confidence]));
  const result: ExtractedText = {
    text: pages.map(({ text }) => text).join(PAGE_SEPARATOR),
    language: ocrLanguage.code,
    pages: pages.map(({ page }) => page),
    engine: { ...ENGINES.text },
  };
  if (ocrConfidences.length > 0) result.confidence = ocrConfidences.reduce((sum, c) => sum + c, 0) / ocrConfidences.length;
  return result;
}

function textPage(number: number, source: PageText['source'], text: string, confidence?: number): { text: string; page: PageText } {
  let characters = 0;
  for (const _ of text) characters++;
  const page: PageText = { number, source, characters };
  if (confidence !== undefined) page.confidence = confidence;
  return { text, page };
}

/** Text/plain is decoded as UTF-8 whatever its charset parameter says (invalid bytes become U+FFFD); a BOM is dropped. */
function plainText(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(bytes);
}

/** Trailing blanks of lines and of the page go: OCR and text layers end pages with them. */
function tidy(text: string): string {
  return text.replace(/(?<![ \t])[ \t]+$/gm, '').trimEnd();
}

async function pdfText(bytes: Uint8Array, language: OcrLanguage): Promise<Array<{ text: string; page: PageText }>> {
  const pdf = await openPdf(bytes);
  try {
    const pages: Array<{ text: string; page: PageText }> = [];
    for await (const page of pdfPages(pdf)) {
      if (page.textLayer !== null) pages.push(textPage(page.number, 'text-layer', tidy(page.textLayer)));
      else {
        const ocr = await recognizeImage(await page.renderImage(), language);
        pages.push(textPage(page.number, 'ocr', tidy(ocr.text), ocr.confidence));
      }
    }
    return pages;
  } finally {
    await pdf.destroy();
  }
}

function looksLike(type: string, bytes: Uint8Array): boolean {
  if (type === 'image/png') return bytes.length > 8 && bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47;
  if (type === 'image/tiff' || type === 'image/tif') return isTiff(bytes);
  return bytes.length > 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff; // JPEG
}

async function imageText(bytes: Uint8Array, type: string, language: OcrLanguage): Promise<Array<{ text: string; page: PageText }>> {
  if (!looksLike(type, bytes)) throw new UnsupportedContent(`The bytes are not a ${type} image`);
  const count = isTiff(bytes) ? tiffPageCount(bytes) : 1;
  const pages: Array<{ text: string; page: PageText }> = [];
  for (let index = 0; index < count; index++) {
    const image = count > 1 ? tiffPage(bytes, index) : bytes;
    const ocr = await recognizeImage(image, language);
    pages.push(textPage(index + 1, 'ocr', tidy(ocr.text), ocr.confidence));
  }
  return pages;
}
