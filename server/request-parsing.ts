// Request values several routes parse the same way.

import { SvcError, invalidBlob } from '../engine/base/errors.js';

/** A canonical lowercase UUID (session, tenant and part ids). */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
// Each parameter is `;` and, optionally, the white space and name=value after it: white space
// between two `;` then has one way to match (`\s*;\s*(…)?` repeated had two, and backtracked
// exponentially on `a/b; ; ; …!`).
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:\\s*;(?:\\s*${TOKEN}=(?:${TOKEN}|"[^"\\\\]*"))?)*\\s*$`);

/**
 * The media type an upload declares. When sent, it must be a media type (RFC 9110 8.3): `type/subtype`
 * and parameters. curl's default for `--data-binary`, `application/x-www-form-urlencoded`, counts as
 * none (the type is sniffed); a multipart form (`curl -F`) is refused, since its envelope is not the file.
 */
export function parseContentType(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const type = raw.trim();
  if (!MEDIA_TYPE.test(type)) throw invalidBlob(`Invalid Content-Type: "${raw.slice(0, 100)}" is not a media type`);
  const essence = type.split(';', 1)[0]!.trim().toLowerCase();
  if (essence === 'application/x-www-form-urlencoded') return undefined;
  if (essence === 'multipart/form-data') {
    throw new SvcError('unsupported_media_type', 'unsupported_media_type', "A multipart form is not unpacked: send the file's bytes as the body (curl --data-binary @FILE -H 'Content-Type: TYPE', not -F)");
  }
  return type;
}
