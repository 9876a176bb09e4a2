// How a reader asks for metadata (decisions, "Metadata envelope v1.1"): the form by `Accept:
// application/vnd.svc.metadata+json;version=1.1` or `?envelope=1.1`, the statuses by `status=`
// (or v1's `includeQuarantined=true`, which is status=valid,quarantined). Malformed values are
// 400; a metadata media type of a version this server does not have is 406.

import { ENTRY_STATUSES, type EntryStatus, type MetadataReading, VALID_ONLY } from '../engine/documents/envelope.js';
import { badRequest } from '../engine/documents/index.js';
import { SvcError } from '../engine/base/errors.js';

export const METADATA_MEDIA_TYPE = 'application/vnd.svc.metadata+json';
/** The Content-Type of a v1.1 answer. */
export const METADATA_V11 = `${METADATA_MEDIA_TYPE}; version=1.1`;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const QUOTED = /^"(?:[^"\\]|\\.)*"$/;

/** The reading a GET .../metadata request asks for. */
export function metadataReading(accept: string | undefined, query: URLSearchParams): MetadataReading {
  const fromAccept = accept === undefined ? undefined : envelopeOfAccept(accept);
  const raw = query.get('envelope');
  if (raw !== null && raw !== '1' && raw !== '1.1') throw badRequest('envelope must be 1 or 1.1');
  if (raw !== null && fromAccept !== undefined && raw !== fromAccept) throw badRequest(`envelope=${raw} and the Accept header (version ${fromAccept}) ask for different forms`);
  return { envelope: raw ?? fromAccept ?? '1', statuses: statusesOf(query) };
}

/** `status=valid,quarantined,...`; `includeQuarantined=true` is status=valid,quarantined. */
function statusesOf(query: URLSearchParams): ReadonlySet<EntryStatus> {
  const raw = query.get('status');
  const include = query.get('includeQuarantined');
  if (include !== null && include !== 'true' && include !== 'false') throw badRequest('includeQuarantined must be true or false');
  if (raw === null) return include === 'true' ? new Set(['valid', 'quarantined']) : VALID_ONLY;
  if (include !== null) throw badRequest('Give status or includeQuarantined, not both (includeQuarantined=true is status=valid,quarantined)');
  const statuses = new Set<EntryStatus>();
  for (const s of raw.split(',')) {
    if (!ENTRY_STATUSES.includes(s as EntryStatus)) throw badRequest(`status must be a comma-separated list of ${ENTRY_STATUSES.join(', ')} (got ${JSON.stringify(s.slice(0, 40))})`);
    statuses.add(s as EntryStatus);
  }
  return statuses;
}

/**
 * '1.1' when Accept asks for the metadata media type at version 1.1 (or without a version),
 * '1' at version 1, undefined when it does not name it; 406 when it names only versions this
 * server lacks and nothing else it could answer with.
 */
function envelopeOfAccept(accept: string): '1' | '1.1' | undefined {
  let asked: '1' | '1.1' | undefined;
  let unknownVersion: string | undefined;
  let other = false;
  for (const part of accept.split(',')) {
    const [range, ...params] = part.split(';').map((p) => p.trim());
    if (range === '' && params.length === 0) continue;
    const [type, subtype, extra] = (range ?? '').split('/');
    if (!type || !subtype || extra !== undefined || !TOKEN.test(type) || !TOKEN.test(subtype)) throw badRequest(`Accept is malformed: ${JSON.stringify(part.trim().slice(0, 80))} is not a media range`);
    let version: string | undefined;
    let q = 1;
    for (const param of params) {
      const eq = param.indexOf('=');
      const name = param.slice(0, eq).trim().toLowerCase();
      let value = param.slice(eq + 1).trim();
      if (eq <= 0 || !TOKEN.test(name) || !(TOKEN.test(value) || QUOTED.test(value))) throw badRequest(`Accept is malformed: ${JSON.stringify(param.slice(0, 80))} is not a parameter`);
      if (QUOTED.test(value)) value = value.slice(1, -1);
      if (name === 'q') {
        if (!/^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(value)) throw badRequest(`Accept is malformed: q=${value.slice(0, 20)} is not a weight`);
        q = Number(value);
      }
      if (name === 'version') version = value;
    }
    if (q === 0) continue;
    if (`${type}/${subtype}`.toLowerCase() !== METADATA_MEDIA_TYPE) {
      other = true;
      continue;
    }
    if (version === undefined || version === '1.1') asked = '1.1';
    else if (version === '1') asked ??= '1';
    else unknownVersion = version;
  }
  if (asked === undefined && unknownVersion !== undefined && !other) {
    throw new SvcError('not_acceptable', 'not_acceptable', `${METADATA_MEDIA_TYPE} version ${unknownVersion.slice(0, 20)} is not served: versions 1 and 1.1 are`);
  }
  return asked;
}
