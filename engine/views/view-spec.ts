// What a view is: the ordered operations applied to a version's content, their deterministic key
// and the media type they produce (decisions.md, "Views"). Pure: no storage, no HTTP.

import { createHash } from 'node:crypto';
import { SvcError } from '../base/errors.js';
import { canonicalJson } from '../documents/model.js';
import { REDACTION_PROFILES } from './engines/redaction.js';
import { ENGINES, RULES_REVISION, installedVersion } from './engines/versions.js';
import { resolveOcrLanguage } from './engines/ocr-language.js';
import { UnsupportedContent } from './engines/errors.js';

export const OCR_TEXT_VIEW = 'urn:svc:view:ocrText@1';
/** Content the text view reads: PDF (text layer, else OCR), images (OCR), plain text (as is). */
const TEXT_SOURCES = ['application/pdf', 'image/png', 'image/jpeg', 'image/tiff', 'text/plain'];
export const TEXT_MEDIA_TYPE = 'text/plain; charset=utf-8';

/** One step of a view, with its normalized arguments and its version (both part of the key). */
export type ViewOp =
  | { op: 'stripSignatures'; version: 1 }
  | { op: 'ocrText'; version: 1; language: string }
  | { op: 'redact'; version: 1; profile: string };

export const viewUnsupported = (message: string) => new SvcError('unprocessable', 'view_unsupported', message);
const invalidView = (message: string) => new SvcError('invalid', 'invalid_request', message);

/** A known redaction profile, else 422 view_unsupported. */
export function redactionProfile(raw: unknown): string {
  if (typeof raw !== 'string' || !REDACTION_PROFILES.includes(raw)) throw viewUnsupported(`Unknown redaction profile ${JSON.stringify(raw)}; profiles: ${REDACTION_PROFILES.join(', ')}`);
  return raw;
}

/** ISO 639-2 code, lower case (the OCR language). */
export function normalizeLanguage(raw: unknown): string {
  if (raw === undefined) return 'eng';
  if (typeof raw !== 'string' || !/^[a-zA-Z]{3}$/.test(raw)) throw invalidView('language must be an ISO 639-2 code of three letters (e.g. eng)');
  return raw.toLowerCase();
}

/**
 * The view a content request asks for, in the decided order (stripSignatures, then the view, then
 * redaction); undefined when it asks for none (the version's own bytes, also for stripSignatures=false).
 */
export function viewOfQuery(query: { view?: string | null; stripSignatures?: string | null; redactionProfile?: string | null }): ViewOp[] | undefined {
  const ops: ViewOp[] = [];
  const strip = query.stripSignatures;
  if (strip !== undefined && strip !== null) {
    if (strip !== 'true' && strip !== 'false') throw invalidView('stripSignatures must be true or false');
    if (strip === 'true') ops.push({ op: 'stripSignatures', version: 1 });
  }
  const view = query.view;
  if (view !== undefined && view !== null) {
    if (view === '') throw invalidView('view must be a view URN (urn:svc:view:<name>@<n>)');
    if (view !== OCR_TEXT_VIEW) throw viewUnsupported(`Unknown view ${view}; this service has ${OCR_TEXT_VIEW}`);
    ops.push({ op: 'ocrText', version: 1, language: 'eng' });
  }
  const profile = query.redactionProfile;
  if (profile !== undefined && profile !== null) {
    ops.push({ op: 'redact', version: 1, profile: redactionProfile(profile) });
  }
  // stripSignatures=false alone asks for nothing but the content itself.
  return ops.length > 0 ? ops : undefined;
}

/**
 * `v1:<hex SHA-256>` of the base content key and the ordered operations, each with what makes its
 * output (its version, the installed engine and rules revision): no time, randomness or tenant.
 * An upgraded engine gives new keys, so a view made by the old one is never served as the new
 * one's.
 */
export function viewKey(baseKey: string, ops: readonly ViewOp[]): string {
  const encoded = canonicalJson({ base: baseKey, ops: ops.map((o) => ({ ...o, engine: engineOf(o) })) });
  return `v1:${createHash('sha256').update(encoded).digest('hex')}`;
}

/** What makes a step's output, per step and language: read from package.json files once, not per request. */
const engines = new Map<string, string>();

function engineOf(op: ViewOp): string {
  const name = op.op === 'ocrText' ? `ocrText:${op.language}` : op.op;
  let engine = engines.get(name);
  if (engine === undefined) {
    engine = op.op === 'stripSignatures' ? `pdf-lib@${installedVersion('pdf-lib')}+rules${RULES_REVISION}` : op.op === 'ocrText' ? `${ENGINES.text.version}+${languageData(op.language)}` : `rules${RULES_REVISION}`;
    engines.set(name, engine);
  }
  return engine;
}

/** The installed language data of OCR (none: the run is refused, checkOcrLanguage). */
function languageData(language: string): string {
  try {
    const { code } = resolveOcrLanguage(language);
    return `${code}@${installedVersion(`@tesseract.js-data/${code}`)}`;
  } catch {
    return `${language}@none`;
  }
}

/** Languages whose OCR data was found installed (a package added later counts after a restart). */
const installedLanguages = new Set<string>();

/**
 * 422 view_unsupported, at once, when OCR's data for `language` is not installed (no
 * @tesseract.js-data/<code> package): the text view reads it for every media type
 * (extract-text.ts), so its job could only fail.
 */
export function checkOcrLanguage(language: string): void {
  if (installedLanguages.has(language)) return;
  try {
    resolveOcrLanguage(language);
  } catch (err) {
    if (err instanceof UnsupportedContent) throw viewUnsupported(err.message);
    throw err;
  }
  installedLanguages.add(language);
}

function essence(mediaType: string): string {
  return mediaType.split(';')[0]!.trim().toLowerCase();
}

/** Refuses (422 view_unsupported) a combination that cannot apply to content of `mediaType`. */
export function checkApplicable(ops: readonly ViewOp[], mediaType: string): void {
  const base = essence(mediaType);
  let kind: 'pdf' | 'text' | 'other' = base === 'application/pdf' ? 'pdf' : base === 'text/plain' ? 'text' : 'other';
  for (const o of ops) {
    if (o.op === 'stripSignatures') {
      if (kind !== 'pdf') throw viewUnsupported(`stripSignatures applies to PDF content, not ${base}`);
    } else if (o.op === 'ocrText') {
      if (kind !== 'pdf' && !TEXT_SOURCES.includes(base)) throw viewUnsupported(`${OCR_TEXT_VIEW} reads PDF, PNG, JPEG, TIFF and plain text, not ${base}`);
      kind = 'text';
    } else if (kind !== 'text') {
      throw viewUnsupported(`redactionProfile applies to text: ask for view=${OCR_TEXT_VIEW} with it (the content is ${base})`);
    }
  }
}

/** The media type a view is served with: text once any step made text, else the PDF's own. */
export function viewMediaType(ops: readonly ViewOp[], baseMediaType: string): string {
  return ops.some((o) => o.op !== 'stripSignatures') ? TEXT_MEDIA_TYPE : essence(baseMediaType);
}

/** The keys of every view this service makes of `baseKey`: each step combination, each installed OCR language. */
export function possibleViewKeys(baseKey: string): string[] {
  const keys: string[] = [];
  for (const strip of [false, true]) {
    const head: ViewOp[] = strip ? [{ op: 'stripSignatures', version: 1 }] : [];
    if (strip) keys.push(viewKey(baseKey, head));
    for (const language of new Set(['eng', ...installedLanguages])) {
      const text: ViewOp[] = [...head, { op: 'ocrText', version: 1, language }];
      keys.push(viewKey(baseKey, text));
      for (const profile of REDACTION_PROFILES) keys.push(viewKey(baseKey, [...text, { op: 'redact', version: 1, profile }]));
    }
  }
  return keys;
}
