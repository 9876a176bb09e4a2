import { ByteStream } from './prng.js';

/**
 * A synthetic PDF series: revision 1 is a classic PDF (header, catalog, page tree, a few
 * thousand stream objects of random 5-40 KiB payloads, xref table, trailer, `%%EOF`); every
 * later revision is the previous bytes plus an incremental update (a few new or replaced
 * objects, an xref section for them, a trailer with /Prev, `%%EOF`), well under 1% of the size.
 */
export interface PdfRevision {
  revision: number;
  bytes: Buffer;
  /** Bytes appended by this revision's incremental update (the whole file for revision 1). */
  appendedBytes: number;
  objectsWritten: number;
}

interface State {
  parts: Buffer[];
  length: number;
  /** Highest object number used so far. */
  maxObject: number;
  lastXref: number;
}

const KiB = 1024;

function append(s: State, chunk: Buffer | string): number {
  const b = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : chunk;
  const at = s.length;
  s.parts.push(b);
  s.length += b.length;
  return at;
}

function streamObject(s: State, num: number, gen: number, payload: Buffer): number {
  const at = append(s, `${num} ${gen} obj\n<< /Length ${payload.length} >>\nstream\n`);
  append(s, payload);
  append(s, '\nendstream\nendobj\n');
  return at;
}

function dictObject(s: State, num: number, gen: number, dict: string): number {
  return append(s, `${num} ${gen} obj\n${dict}\nendobj\n`);
}

const entry = (offset: number, gen: number, kind: 'n' | 'f') => `${String(offset).padStart(10, '0')} ${String(gen).padStart(5, '0')} ${kind} \n`;

/** xref section from (object number → offset) entries, grouped in consecutive subsections. */
function xrefSection(entries: Map<number, { offset: number; gen: number }>, includeFree: boolean): string {
  const nums = [...entries.keys()].sort((a, b) => a - b);
  let out = 'xref\n';
  if (includeFree) out += `0 1\n${entry(0, 65535, 'f')}`;
  for (let i = 0; i < nums.length; ) {
    let j = i;
    while (j + 1 < nums.length && nums[j + 1] === nums[j] + 1) j++;
    out += `${nums[i]} ${j - i + 1}\n`;
    for (let k = i; k <= j; k++) {
      const e = entries.get(nums[k])!;
      out += entry(e.offset, e.gen, 'n');
    }
    i = j + 1;
  }
  return out;
}

export class PdfSeries {
  private readonly rng: ByteStream;
  private readonly state: State = { parts: [], length: 0, maxObject: 0, lastXref: 0 };
  private revision = 0;

  constructor(seed: string) {
    this.rng = new ByteStream(`pdf:${seed}`);
  }

  /** Revision 1: about `targetBytes` of stream objects with 5-40 KiB payloads. */
  first(targetBytes = 64 * 1024 * 1024): PdfRevision {
    const s = this.state;
    append(s, '%PDF-1.7\n');
    append(s, Buffer.from([0x25, 0xe2, 0xe3, 0xcf, 0xd3, 0x0a])); // binary comment, as real writers emit
    const offsets = new Map<number, { offset: number; gen: number }>();
    offsets.set(1, { offset: dictObject(s, 1, 0, '<< /Type /Catalog /Pages 2 0 R >>'), gen: 0 });
    offsets.set(2, { offset: dictObject(s, 2, 0, '<< /Type /Pages /Kids [] /Count 0 >>'), gen: 0 });
    let num = 3;
    while (s.length < targetBytes) {
      const payload = this.rng.bytes(this.rng.int(5 * KiB, 40 * KiB));
      offsets.set(num, { offset: streamObject(s, num, 0, payload), gen: 0 });
      num++;
    }
    s.maxObject = num - 1;
    const xref = append(s, xrefSection(offsets, true));
    append(s, `trailer\n<< /Size ${s.maxObject + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`);
    s.lastXref = xref;
    this.revision = 1;
    return { revision: 1, bytes: Buffer.concat(s.parts, s.length), appendedBytes: s.length, objectsWritten: offsets.size };
  }

  /** The next revision: 2-4 new stream objects, one replaced object and an updated page tree. */
  next(): PdfRevision {
    const s = this.state;
    if (this.revision === 0) throw new Error('call first() before next()');
    const before = s.length;
    const offsets = new Map<number, { offset: number; gen: number }>();
    const added = this.rng.int(2, 4);
    for (let i = 0; i < added; i++) {
      const num = ++s.maxObject;
      offsets.set(num, { offset: streamObject(s, num, 0, this.rng.bytes(this.rng.int(5 * KiB, 40 * KiB))), gen: 0 });
    }
    // Replace one existing content object (same number, new bytes), as an edit would.
    const replaced = this.rng.int(3, 100);
    offsets.set(replaced, { offset: streamObject(s, replaced, 0, this.rng.bytes(this.rng.int(5 * KiB, 20 * KiB))), gen: 0 });
    offsets.set(2, { offset: dictObject(s, 2, 0, `<< /Type /Pages /Kids [] /Count 0 /Revision ${this.revision + 1} >>`), gen: 0 });
    const xref = append(s, xrefSection(offsets, true));
    append(s, `trailer\n<< /Size ${s.maxObject + 1} /Root 1 0 R /Prev ${s.lastXref} >>\nstartxref\n${xref}\n%%EOF\n`);
    s.lastXref = xref;
    this.revision++;
    return { revision: this.revision, bytes: Buffer.concat(s.parts, s.length), appendedBytes: s.length - before, objectsWritten: offsets.size };
  }
}
