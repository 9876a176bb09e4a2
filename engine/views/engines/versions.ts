// Which engine (and which version of it) produced a result: provenance for derived entries and an
// input of view keys, so a new library version yields new views instead of stale cached ones.

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface EngineInfo {
  name: string;
  version: string;
}

const require = createRequire(import.meta.url);

/** An installed package's version, read from its package.json (some packages do not export that file, so it is found on the resolution paths rather than required). */
export function installedVersion(packageName: string): string {
  for (const dir of require.resolve.paths(packageName) ?? []) {
    const file = path.join(dir, packageName, 'package.json');
    if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')).version as string;
  }
  throw new Error(`Package ${packageName} is not installed`);
}

/** svc's own version: the nearest package.json named svc above this file (works from the sources and from dist/). */
function svcVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (pkg.name === 'svc') return pkg.version as string;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('svc package.json not found above engine/views/engines');
    dir = parent;
  }
}

/**
 * The revision of svc's own redaction and entity rules (the patterns in redaction.ts and
 * entities.ts). Bump it when a pattern changes, so views made with the old rules get new keys
 * even when svc's version stays the same.
 */
export const RULES_REVISION = 1;

const SVC = svcVersion();

/** The engines of each function family, as they are installed. */
export const ENGINES: Readonly<{ text: EngineInfo; entities: EngineInfo; redaction: EngineInfo; signatures: EngineInfo }> = Object.freeze({
  /** extractText: pdfjs for text layers and rendering, tesseract.js for OCR. */
  text: { name: 'pdfjs-dist+tesseract.js', version: `${installedVersion('pdfjs-dist')}+${installedVersion('tesseract.js')}` },
  /** findEntities: compromise plus svc's exact patterns (dates, e-mail addresses, phone numbers). */
  entities: { name: 'compromise+svc-patterns', version: `${installedVersion('compromise')}+${SVC}.rules${RULES_REVISION}` },
  /** redact: svc's own patterns and checksums. */
  redaction: { name: 'svc-redact', version: `${SVC}+rules${RULES_REVISION}` },
  /** stripSignatures: pdf-lib rewrites the document. */
  signatures: { name: 'svc-strip-signatures+pdf-lib', version: `${SVC}+${installedVersion('pdf-lib')}` },
});
