// The content engines of views and workflows (issue 20): pure functions of bytes and text, with
// no HTTP, storage or LMDB. Meant for Piscina worker threads: OCR and PDF rendering are CPU-heavy
// and must not run on the main event loop.

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
