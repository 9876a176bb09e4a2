/** RFC 9110 preconditions and single byte ranges for an immutable representation. */
interface Representation {
  /** Quoted strong entity tag, e.g. `"sha-256:…:5"`. */
  etag: string;
  /** Last-Modified in ms, whole seconds. */
  lastModified: number;
  size: number;
}

interface RequestConditions {
  ifMatch?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  ifUnmodifiedSince?: string;
  ifRange?: string;
  range?: string;
}

export type Decision =
  | { status: 200 }
  | { status: 206; start: number; end: number }
  | { status: 304 }
  | { status: 412 }
  | { status: 416 };

/** Order of RFC 9110 section 13.2.2: If-Match / If-Unmodified-Since, If-None-Match / If-Modified-Since, then If-Range and Range. */
export function evaluate(rep: Representation, c: RequestConditions): Decision {
  if (c.ifMatch !== undefined) {
    if (!matches(c.ifMatch, rep.etag, true)) return { status: 412 };
  } else if (c.ifUnmodifiedSince !== undefined) {
    const date = parseHttpDate(c.ifUnmodifiedSince);
    if (date !== undefined && rep.lastModified > date) return { status: 412 };
  }
  if (c.ifNoneMatch !== undefined) {
    if (matches(c.ifNoneMatch, rep.etag, false)) return { status: 304 };
  } else if (c.ifModifiedSince !== undefined) {
    const date = parseHttpDate(c.ifModifiedSince);
    if (date !== undefined && rep.lastModified <= date) return { status: 304 };
  }
  if (c.range === undefined) return { status: 200 };
  if (c.ifRange !== undefined && !ifRangeHolds(c.ifRange, rep)) return { status: 200 };
  return parseRange(c.range, rep.size);
}

/** `*` or a comma-separated list of entity tags; weak tags compare weakly only. */
function matches(list: string, etag: string, strong: boolean): boolean {
  const trimmed = list.trim();
  if (trimmed === '*') return true;
  for (const raw of trimmed.split(',')) {
    const tag = raw.trim();
    if (tag.startsWith('W/')) {
      if (!strong && tag.slice(2) === etag) return true;
    } else if (tag === etag) return true;
  }
  return false;
}

function ifRangeHolds(value: string, rep: Representation): boolean {
  const v = value.trim();
  if (v.startsWith('"')) return v === rep.etag;
  if (v.startsWith('W/')) return false;
  const date = parseHttpDate(v);
  return date !== undefined && date === rep.lastModified;
}

const RANGE = /^bytes=(\d*)-(\d*)$/i;

/** One range: `a-b`, `a-` or `-n`. A last position past the end is clamped; anything else invalid is 416. */
export function parseRange(value: string, size: number): Decision {
  const m = RANGE.exec(value.trim());
  if (!m || (m[1] === '' && m[2] === '')) return { status: 416 };
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return { status: 416 };
    return { status: 206, start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || (m[2] !== '' && Number(m[2]) < start)) return { status: 416 };
  return { status: 206, start, end };
}

function parseHttpDate(value: string): number | undefined {
  const ms = Date.parse(value);
  return Number.isNaN(ms) || !/GMT$/.test(value.trim()) ? undefined : ms;
}
