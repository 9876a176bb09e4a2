// OCR with tesseract.js, entirely from installed packages: the wasm core comes from
// tesseract.js-core (tesseract.js requires it in Node) and the language data from the
// @tesseract.js-data/<lang> package's folder; nothing is fetched and nothing is cached to disk.
//
// A tesseract.js worker is a worker thread of its own holding a wasm instance and the loaded
// model (about 100 MB once warm, more after large pages): expensive to start (~0.3 s), so one
// per language is kept per calling thread and reused. It is unref'd while idle (it never keeps
// its thread alive) and terminated after IDLE_MS without work; closeOcr() ends them at once.

import Tesseract from 'tesseract.js';
import { UnsupportedContent } from './errors.js';

/** Idle workers are terminated after this long, giving their memory back. */
const IDLE_MS = 60_000;

export { type OcrLanguage, resolveOcrLanguage } from './ocr-language.js';
import type { OcrLanguage } from './ocr-language.js';

interface CachedWorker {
  worker: Promise<Tesseract.Worker>;
  busy: number;
  idleTimer?: NodeJS.Timeout;
}

const workers = new Map<string, CachedWorker>();

/** The tesseract.js worker's own Node Worker, to ref/unref it (not in its typings). */
function threadOf(worker: Tesseract.Worker): { ref(): void; unref(): void } | undefined {
  return (worker as unknown as { worker?: { ref(): void; unref(): void } }).worker ?? undefined;
}

function startWorker(language: OcrLanguage): Promise<Tesseract.Worker> {
  return Tesseract.createWorker(language.code, Tesseract.OEM.LSTM_ONLY, {
    langPath: language.langPath,
    gzip: true,
    cacheMethod: 'none',
    // Without a handler, tesseract.js rethrows a failed job's error inside its message listener,
    // an uncaught exception that would end this thread; the job's promise rejects either way.
    errorHandler: () => {},
  });
}

async function acquire(language: OcrLanguage): Promise<{ cached: CachedWorker; worker: Tesseract.Worker }> {
  let cached = workers.get(language.code);
  if (!cached) {
    cached = { worker: startWorker(language), busy: 0 };
    workers.set(language.code, cached);
  }
  cached.busy++;
  clearTimeout(cached.idleTimer);
  try {
    const worker = await cached.worker;
    threadOf(worker)?.ref();
    return { cached, worker };
  } catch (error) {
    cached.busy--;
    if (workers.get(language.code) === cached) workers.delete(language.code);
    throw error;
  }
}

function release(code: string, cached: CachedWorker, worker: Tesseract.Worker): void {
  cached.busy--;
  if (cached.busy > 0) return;
  if (workers.get(code) !== cached) {
    void worker.terminate(); // discarded while in use, or closed
    return;
  }
  threadOf(worker)?.unref();
  cached.idleTimer = setTimeout(() => {
    if (cached.busy === 0 && workers.get(code) === cached) {
      workers.delete(code);
      void worker.terminate();
    }
  }, IDLE_MS);
  cached.idleTimer.unref();
}

export interface OcrResult {
  text: string;
  /** tesseract's mean word confidence, 0..1. */
  confidence: number;
}

/** OCR of one encoded image (PNG, JPEG, single-page TIFF, PGM, ...). */
export async function recognizeImage(image: Uint8Array, language: OcrLanguage): Promise<OcrResult> {
  const { cached, worker } = await acquire(language);
  let result: Tesseract.RecognizeResult;
  try {
    // A Buffer view, not a copy (tesseract.js's typings want a Buffer); tesseract.js itself copies
    // the image once and posts that to its thread.
    result = await worker.recognize(Buffer.from(image.buffer, image.byteOffset, image.byteLength));
  } catch (error) {
    // A failed job may have left the wasm instance unusable: the next job gets a new worker.
    if (workers.get(language.code) === cached) workers.delete(language.code);
    release(language.code, cached, worker);
    const message = error instanceof Error ? error.message : String(error);
    if (/read image/i.test(message)) throw new UnsupportedContent(`OCR could not decode the image: ${message}`);
    throw error instanceof Error ? error : new Error(message);
  }
  release(language.code, cached, worker);
  return { text: result.data.text, confidence: Math.min(1, Math.max(0, result.data.confidence / 100)) };
}

/** Terminates this thread's OCR workers now (they are also ended after IDLE_MS unused). */
export async function closeOcr(): Promise<void> {
  const all = [...workers.values()];
  workers.clear();
  await Promise.all(all.map(async (cached) => {
    clearTimeout(cached.idleTimer);
    const worker = await cached.worker.catch(() => undefined);
    await worker?.terminate();
  }));
}
