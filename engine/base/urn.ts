// The syntax of a URN a request names (RFC 8141, section 2), bounded in length. Checked at the
// edge, before the name meets a capability check, a cache or a message: a refused request leaves
// nothing behind. What svc accepts beyond the syntax (urn:svc:<name>, urn:svc:schema:<name>@<semver>)
// is the document platform's rule (engine/documents/model.ts).

import { SvcError } from './errors.js';
import { URN_MAX_CHARS } from './limits.js';

/** "urn:" NID ":" NSS; NID = alphanum 0*30(alphanum / "-") alphanum; NSS = pchar *(pchar / "/"), pchar of RFC 3986. */
const ASSIGNED_NAME = /^urn:[a-z0-9][a-z0-9-]{0,30}[a-z0-9]:(?:[a-z0-9._~!$&'()*+,;=:@-]|%[0-9a-f]{2})(?:[a-z0-9._~!$&'()*+,;=:@/-]|%[0-9a-f]{2})*$/i;
/** An r- or q-component: pchar *(pchar / "/" / "?"). */
const COMPONENT = /^(?:[a-z0-9._~!$&'()*+,;=:@-]|%[0-9a-f]{2})(?:[a-z0-9._~!$&'()*+,;=:@/?-]|%[0-9a-f]{2})*$/i;
/** An f-component: *(pchar / "/" / "?"). */
const FRAGMENT = /^(?:[a-z0-9._~!$&'()*+,;=:@/?-]|%[0-9a-f]{2})*$/i;

/** Whether `value` is a URN of RFC 8141 of at most URN_MAX_CHARS characters (the length first: the pattern never reads a long string). */
export function isUrn(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > URN_MAX_CHARS) return false;
  // namestring = assigned-name [ "?+" r-component ] [ "?=" q-component ] [ "#" f-component ]:
  // split at the first "#", then the first "?=" (an r-component never holds "?="), then "?+".
  let rest = value;
  const hash = rest.indexOf('#');
  if (hash >= 0) {
    if (!FRAGMENT.test(rest.slice(hash + 1))) return false;
    rest = rest.slice(0, hash);
  }
  for (const mark of ['?=', '?+']) {
    const at = rest.indexOf(mark);
    if (at < 0) continue;
    if (!COMPONENT.test(rest.slice(at + 2))) return false;
    rest = rest.slice(0, at);
  }
  return ASSIGNED_NAME.test(rest);
}

/** `value` when it is a URN (isUrn); 400 invalid_request naming `field` otherwise (the value itself is not echoed). */
export function checkUrn(value: unknown, field: string): string {
  if (isUrn(value)) return value;
  throw new SvcError('invalid', 'invalid_request', `${field} must be a URN (RFC 8141: urn:<NID>:<NSS>) of at most ${URN_MAX_CHARS} characters`);
}
