// A Leap frame's body split once into its parts' byte ranges, so that each part parses its own
// rows instead of the whole body. The scan checks only the frame's skeleton: an object with the
// keys "schema" and "rows" (each once, in either order), the rows a list whose elements are
// separated by single commas, nothing after the object. Every other byte is in some part's text,
// which that part parses: a syntax error anywhere still fails the request as the body's error
// (ModelService gives a part's syntax error precedence). Anything else (another frame shape,
// extra keys, escapes in a key, an empty list) is not split: each part then parses the whole body.

/** A part's share of a split body: the schema's bytes and its rows' bytes (the elements and the commas between them). */
export interface FrameSplit {
  schema: [start: number, end: number];
  rows: [start: number, end: number];
  /** Index of the part's first row in the frame, and the frame's row count. */
  first: number;
  total: number;
}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

const isSpace = (c: number) => c === SPACE || c === LF || c === CR || c === TAB;

class Cursor {
  at = 0;
  constructor(
    readonly b: Uint8Array,
    readonly end: number,
  ) {}

  skipSpace(): void {
    while (this.at < this.end && isSpace(this.b[this.at]!)) this.at++;
  }

  /** The next non-space byte, consumed; -1 at the end. */
  next(): number {
    this.skipSpace();
    return this.at < this.end ? this.b[this.at++]! : -1;
  }

  /** A key: a string without escapes; undefined otherwise. */
  key(): string | undefined {
    if (this.next() !== QUOTE) return undefined;
    const start = this.at;
    while (this.at < this.end && this.b[this.at] !== QUOTE) {
      if (this.b[this.at] === BACKSLASH) return undefined;
      this.at++;
    }
    if (this.at >= this.end) return undefined;
    return Buffer.from(this.b.buffer, this.b.byteOffset + start, this.at++ - start).toString('latin1');
  }

  /**
   * Skips one value (scanning strings and brackets, not checking scalars: the part's parse does)
   * and returns where it ended; -1 when the value runs off the end or brackets do not pair.
   */
  value(): number {
    this.skipSpace();
    let depth = 0;
    while (this.at < this.end) {
      const c = this.b[this.at]!;
      if (c === QUOTE) {
        this.at++;
        while (this.at < this.end && this.b[this.at] !== QUOTE) this.at += this.b[this.at] === BACKSLASH ? 2 : 1;
        if (this.at >= this.end) return -1;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (depth === 0) return this.at;
        depth--;
      } else if (depth === 0 && (c === COMMA || isSpace(c))) return this.at;
      this.at++;
      if (depth === 0 && (c === QUOTE || c === CLOSE_BRACE || c === CLOSE_BRACKET)) return this.at;
    }
    return depth === 0 ? this.at : -1;
  }
}

/**
 * The element ranges of a Leap frame's rows and its schema's range, or undefined when the body
 * is not a frame this scan splits (see above).
 */
export function scanLeapFrame(bytes: Uint8Array, length: number): { schema: [number, number]; starts: number[]; ends: number[] } | undefined {
  const c = new Cursor(bytes, length);
  if (c.next() !== OPEN_BRACE) return undefined;
  let schema: [number, number] | undefined;
  let rows: { starts: number[]; ends: number[] } | undefined;
  for (let member = 0; member < 2; member++) {
    if (member === 1 && c.next() !== COMMA) return undefined;
    const key = c.key();
    if (c.next() !== COLON) return undefined;
    if (key === 'schema' && !schema) {
      c.skipSpace();
      const start = c.at;
      const end = c.value();
      if (end < 0) return undefined;
      schema = [start, end];
    } else if (key === 'rows' && !rows) {
      rows = elements(c);
      if (!rows) return undefined;
    } else return undefined;
  }
  if (c.next() !== CLOSE_BRACE || c.next() !== -1 || !schema || !rows) return undefined;
  return { schema, ...rows };
}

/** The elements of a list (at least one), each up to the comma or bracket after it. */
function elements(c: Cursor): { starts: number[]; ends: number[] } | undefined {
  if (c.next() !== OPEN_BRACKET) return undefined;
  const starts: number[] = [];
  const ends: number[] = [];
  for (;;) {
    c.skipSpace();
    const start = c.at;
    const end = c.value();
    if (end <= start) return undefined;
    starts.push(start);
    ends.push(end);
    const after = c.next();
    if (after === CLOSE_BRACKET) return { starts, ends };
    if (after !== COMMA) return undefined;
  }
}

/** Each of `count` parts' share of a scanned frame (rows as partRange in frame.ts divides them). */
export function splitFrame(scan: { schema: [number, number]; starts: number[]; ends: number[] }, count: number): FrameSplit[] {
  const total = scan.starts.length;
  const parts: FrameSplit[] = [];
  for (let index = 0; index < count; index++) {
    const first = Math.floor((total * index) / count);
    const end = Math.floor((total * (index + 1)) / count);
    // An empty part parses an empty list.
    const rows: [number, number] = end > first ? [scan.starts[first]!, scan.ends[end - 1]!] : [0, 0];
    parts.push({ schema: scan.schema, rows, first, total });
  }
  return parts;
}
