// The URNs a request body names, checked before anything else reads the body (400 naming the
// field; engine/base/urn.ts): the first step of the parsers of server/commands/.

import { isPlainObject } from '../../engine/documents/index.js';
import { checkUrn } from '../../engine/base/urn.js';

/** `body` when each of `fields` it holds (a plain object) is a URN; 400 otherwise. Absent fields and other bodies are the parser's to refuse. */
export function bodyUrns(body: unknown, fields: readonly string[]): unknown {
  if (isPlainObject(body)) for (const field of fields) if (body[field] !== undefined) checkUrn(body[field], field);
  return body;
}

/** The namespace keys of a metadata bundle (`{ namespaces: { <URN>: ... } }`), each a URN; 400 otherwise. */
export function bundleUrns(bundle: unknown): void {
  if (!isPlainObject(bundle) || !isPlainObject(bundle.namespaces)) return;
  for (const ns of Object.keys(bundle.namespaces)) checkUrn(ns, 'a namespace of the bundle');
}
