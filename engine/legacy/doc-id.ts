// A legacy document id as the edge hands it over (percent-decoded once): a single file-name
// component, so that no id can name a path outside `metadata/`.

import { legacyInvalidId } from './errors.js';
import { LEGACY_DOC_ID_MAX_BYTES } from '../base/limits.js';

/** Longest id, in UTF-8 bytes (file names are at most 255 bytes; `.xml` is added). */
export const MAX_DOC_ID_BYTES = LEGACY_DOC_ID_MAX_BYTES;

/**
 * The id when it can only name a file directly inside a directory; 400 otherwise: empty, over
 * long, `.` or containing `..`, `/`, `\`, NUL or another control character, or a percent-encoded
 * triplet left after the one decoding (a double-encoded `%252e` is refused, not decoded again).
 */
export function parseLegacyDocId(id: string): string {
  if (id.length === 0) throw legacyInvalidId('The legacy document id is empty');
  if (Buffer.byteLength(id, 'utf8') > MAX_DOC_ID_BYTES) throw legacyInvalidId(`The legacy document id is longer than ${MAX_DOC_ID_BYTES} bytes`);
  if (id === '.' || id.includes('..')) throw legacyInvalidId('The legacy document id may not be "." or contain ".."');
  if (/[/\\]/.test(id)) throw legacyInvalidId('The legacy document id may not contain "/" or "\\"');
  if (/[\u0000-\u001f\u007f]/.test(id)) throw legacyInvalidId('The legacy document id may not contain NUL or control characters');
  if (/%[0-9A-Fa-f]{2}/.test(id)) throw legacyInvalidId('The legacy document id may not contain a percent-encoded character after decoding');
  return id;
}
