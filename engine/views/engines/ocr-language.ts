// Where OCR's language data is: the installed @tesseract.js-data/<code> package's folder. Apart
// from ocr.ts (which loads tesseract.js) so that a request can be refused on the main thread, at
// once, when the language it names has no data (view-spec.ts, checkOcrLanguage).

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { UnsupportedContent } from './errors.js';

const require = createRequire(import.meta.url);

/** ISO 639-2 bibliographic codes that tesseract names by their terminology code. */
const BIBLIOGRAPHIC_TO_TERMINOLOGY: Readonly<Record<string, string>> = {
  alb: 'sqi', arm: 'hye', baq: 'eus', bur: 'mya', chi: 'chi_sim', cze: 'ces', dut: 'nld', fre: 'fra', geo: 'kat', ger: 'deu',
  gre: 'ell', ice: 'isl', mac: 'mkd', may: 'msa', per: 'fas', rum: 'ron', slo: 'slk', tib: 'bod', wel: 'cym',
};

export interface OcrLanguage {
  /** The code as tesseract and the data package name it ('eng', 'deu', 'chi_sim'). */
  code: string;
  /** The folder holding `<code>.traineddata.gz`. */
  langPath: string;
}

/**
 * The language's installed data, or UnsupportedContent. The LSTM-only ("best_int") data is
 * preferred: the LSTM engine is the one used, and that file is a quarter of the size.
 */
export function resolveOcrLanguage(language = 'eng'): OcrLanguage {
  const requested = language.trim().toLowerCase();
  if (!/^[a-z]{3}(?:_[a-z]{3,4})?$/.test(requested)) {
    throw new UnsupportedContent(`Language '${language}' is not an ISO 639-2 code (such as 'eng')`);
  }
  const code = BIBLIOGRAPHIC_TO_TERMINOLOGY[requested] ?? requested;
  const packageName = `@tesseract.js-data/${code}`;
  for (const dir of require.resolve.paths(packageName) ?? []) {
    for (const folder of ['4.0.0_best_int', '4.0.0']) {
      const langPath = path.join(dir, packageName, folder);
      if (fs.existsSync(path.join(langPath, `${code}.traineddata.gz`))) return { code, langPath };
    }
  }
  throw new UnsupportedContent(`OCR data for language '${code}' is not installed (npm package ${packageName})`);
}
