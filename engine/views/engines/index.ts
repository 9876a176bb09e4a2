// The content engines of views and workflows (issue 20): pure functions of bytes and text, with
// no HTTP, storage or LMDB. Meant for Piscina worker threads: OCR and PDF rendering are CPU-heavy
// and must not run on the main event loop.
//
// What a calling thread should know:
// - extractText starts, on first OCR, one tesseract.js worker thread per language (a wasm
//   instance, ~0.3 s to start, ~100 MB warm, ~170 MB after an A4 page at 300 dpi: its memory
//   grows with the largest page seen and never shrinks). It is reused by later calls in the
//   same thread, unref'd while idle (it never keeps the thread alive) and terminated after 60 s
//   without work or by closeEngines(). Ending the calling thread (Piscina destroy, thread
//   recycling) ends it too.
// - pdfjs runs in the calling thread (its "fake worker"), and renders an OCR'd page on a canvas of
//   up to 36 Mpx (an A4 page at 300 dpi: 8.7 Mpx, 35 MB), freed after the page.
// - pdfjs needs its own copy of a PDF's bytes (it detaches the buffer it is given), so a PDF is
//   held twice during extractText; pdf-lib (stripSignatures) parses the bytes it is given.
// - Nothing is fetched from the network and nothing is written to disk.

import { closeOcr } from './ocr.js';

export { UnsupportedContent } from './errors.js';
export { ENGINES, type EngineInfo } from './versions.js';
export { extractText, PAGE_SEPARATOR, type ExtractedText, type PageText } from './extract-text.js';
export { hasSignatureFields, stripSignatures } from './signatures.js';
export { redact, REDACTION_PROFILES } from './redaction.js';
export { findEntities, type Entities } from './entities.js';

/** Ends this thread's OCR workers (tesseract.js threads). Idle ones also end by themselves after a minute. */
export async function closeEngines(): Promise<void> {
  await closeOcr();
}
