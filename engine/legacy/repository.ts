// One legacy repository: a document id → its metadata file (the documented paths, then the
// metadata index) → its descriptor → its binary (the documented layouts and suffixes, then the
// binaries index), opened and checked before anything is answered. Every file is opened through
// openInside (no path leaves the root). No HTTP here.

import type fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../base/log.js';
import { type LegacyDescriptor, HASH_HEX_LENGTHS, decodeXml, parseDescriptor } from './descriptor.js';
import { parseLegacyDocId } from './doc-id.js';
import {
  LegacyError, legacyBinaryNotFound, legacyDocumentNotFound, legacyMetadataInvalid, legacySizeMismatch, legacyUnreadable,
} from './errors.js';
import type { LegacyMetrics } from './metrics.js';
import { type Absent, type OpenedFile, openInside } from './safe-open.js';
import { TreeIndex } from './tree-index.js';
import { LEGACY_METADATA_MAX_BYTES } from '../base/limits.js';

/** Largest metadata file read (422 beyond). */
export const MAX_METADATA_BYTES = LEGACY_METADATA_MAX_BYTES;
/** Bytes per piece of a binary's stream. */
const PIECE_BYTES = 256 * 1024;

/** Binary layouts under `binaries/`, in the order tried: the hash's slices as directories. */
const BINARY_LAYOUTS: ReadonlyArray<(h: string) => string> = [
  (h) => h,
  (h) => `${h.slice(0, 2)}/${h.slice(2, 4)}/${h}`,
  (h) => `${h.slice(0, 2)}/${h}`,
  (h) => `${h.slice(0, 1)}/${h.slice(1, 3)}/${h}`,
  (h) => `${h.slice(0, 2)}/${h.slice(2, 4)}/${h.slice(4, 6)}/${h}`,
];
export const BINARY_SUFFIXES = ['', '.bin', '.dat', '.pdf'];

/** An opened legacy document: its descriptor and its binary, open until streamed or closed. */
export class LegacyDocument {
  private closed = false;

  constructor(
    readonly repo: string,
    readonly docId: string,
    readonly descriptor: LegacyDescriptor,
    /** The binary's size on disk (equal to the descriptor's length when it gives one). */
    readonly size: number,
    private readonly handle: fs.promises.FileHandle,
  ) {}

  /**
   * The binary's bytes in pieces, in order. A piece is valid until the next one is requested:
   * two buffers take turns (one being sent, the next being read ahead), so a read holds 512 KiB
   * whatever the file's size, and allocates nothing per piece. The file is closed at the end, on
   * an error or when the caller stops. A file that ends before its size fails (`stream_failed`);
   * bytes beyond it are not served.
   */
  async *pieces(): AsyncGenerator<Uint8Array> {
    const size = this.size;
    const capacity = Math.min(PIECE_BYTES, size);
    const buffers = [Buffer.allocUnsafe(capacity), Buffer.allocUnsafe(capacity)];
    const read = async (buffer: Buffer, position: number): Promise<Buffer> => {
      const want = Math.min(capacity, size - position);
      const { bytesRead } = await this.handle.read(buffer, 0, want, position);
      if (bytesRead === 0) throw new LegacyError('internal', 'storage_failure', `The binary of ${this.docId} ended after ${position} of ${size} bytes`, 'stream_failed');
      return bytesRead === want ? buffer.subarray(0, want) : buffer.subarray(0, bytesRead);
    };
    let next: Promise<Buffer> | undefined;
    try {
      let position = 0;
      let turn = 0;
      next = size > 0 ? read(buffers[turn]!, 0) : undefined;
      while (next) {
        const piece = await next;
        position += piece.length;
        turn ^= 1;
        next = position < size ? read(buffers[turn]!, position) : undefined;
        // A caller that stops early leaves the read ahead unawaited: its failure is nobody's.
        next?.catch(() => {});
        yield piece;
      }
    } finally {
      await next?.catch(() => {});
      await this.close();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close().catch(() => {});
  }
}

export class LegacyRepository {
  private readonly metadataTop: string;
  private readonly binariesTop: string;
  private readonly metadataIndex: TreeIndex;
  private readonly binariesIndex: TreeIndex;

  constructor(
    readonly name: string,
    /** Resolved (realpath) at start. */
    readonly root: string,
    metrics: LegacyMetrics,
    log: Logger,
  ) {
    this.metadataTop = path.join(root, 'metadata');
    this.binariesTop = path.join(root, 'binaries');
    this.metadataIndex = new TreeIndex({
      top: this.metadataTop, log, label: `${name}/metadata`, keyOf: metadataKey,
      onBuilt: (entries) => metrics.indexBuilt(name, 'metadata', entries),
    });
    this.binariesIndex = new TreeIndex({
      top: this.binariesTop, log, label: `${name}/binaries`, keyOf: binaryKey,
      onBuilt: (entries) => metrics.indexBuilt(name, 'binaries', entries),
    });
  }

  /** The document's descriptor and open binary: 404, 422 or 409 (LegacyError) otherwise. */
  async open(docId: string): Promise<LegacyDocument> {
    parseLegacyDocId(docId);
    const what = `metadata of ${JSON.stringify(docId)}`;
    const metadata = await this.find(this.metadataTop, metadataCandidates(docId), () => this.metadataIndex.lookup(docId), what);
    if (metadata === 'missing') throw legacyDocumentNotFound(this.name, docId);
    let descriptor: LegacyDescriptor;
    try {
      descriptor = await readDescriptor(metadata, docId, what);
    } finally {
      await metadata.handle.close().catch(() => {});
    }
    const hash = descriptor.hash;
    const binary = await this.find(this.binariesTop, binaryCandidates(hash), () => this.binariesIndex.lookup(hash), `binary ${hash}`);
    if (binary === 'missing') throw legacyBinaryNotFound(this.name, docId, hash);
    if (descriptor.length !== undefined && descriptor.length !== binary.size) {
      await binary.handle.close().catch(() => {});
      throw legacySizeMismatch(docId, descriptor.length, binary.size);
    }
    return new LegacyDocument(this.name, docId, descriptor, binary.size, binary.handle);
  }

  /**
   * A page of the repository's document ids, in code-unit order, after `after`: the ids of the
   * metadata index (every file under `metadata/` named `<id>.xml` or `<id>`, within the index's
   * bounds) that are valid ids. The index is a snapshot taken at its first use in this process.
   */
  async listIds(limit: number, after?: string): Promise<{ ids: string[]; more: boolean }> {
    const keys = await this.metadataIndex.keys();
    let lo = 0;
    if (after !== undefined) {
      let hi = keys.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (keys[mid]! <= after) lo = mid + 1;
        else hi = mid;
      }
    }
    const ids: string[] = [];
    for (; lo < keys.length && ids.length < limit; lo++) if (validId(keys[lo]!)) ids.push(keys[lo]!);
    return { ids, more: lo < keys.length };
  }

  /**
   * The first candidate that is a file, else the index's entry. A directory where a file is
   * looked for does not stop the search; when nothing else is found it is 409 (something is
   * there under the file's name, but not a readable file).
   */
  private async find(top: string, candidates: Array<{ path: string; directoryExpected?: boolean }>, indexed: () => Promise<string | undefined>, what: string): Promise<OpenedFile | 'missing'> {
    let directory = false;
    const seen = (r: OpenedFile | Absent, directoryExpected = false): OpenedFile | undefined => {
      if (r === 'directory' && !directoryExpected) directory = true;
      return typeof r === 'object' ? r : undefined;
    };
    for (const c of candidates) {
      const found = seen(await openInside(this.root, path.join(top, c.path), what), c.directoryExpected);
      if (found) return found;
    }
    const fromIndex = await indexed();
    if (fromIndex !== undefined) {
      const found = seen(await openInside(this.root, fromIndex, what));
      if (found) return found;
    }
    if (directory) throw legacyUnreadable(what, 'a directory is where the file should be');
    return 'missing';
  }

}

function validId(id: string): boolean {
  try {
    parseLegacyDocId(id);
    return true;
  } catch {
    return false;
  }
}

/** `metadata/<id>.xml`, `<id>.XML`, `<id>`, `<id[0..2]>/<id>.xml` (two characters). */
function metadataCandidates(id: string) {
  return [
    { path: `${id}.xml` },
    { path: `${id}.XML` },
    // For an id of one or two characters `metadata/<id>` is also the partition directory of the last form.
    { path: id, directoryExpected: id.length <= 2 },
    { path: `${id.slice(0, 2)}/${id}.xml` },
  ];
}

function binaryCandidates(hash: string) {
  const out: Array<{ path: string }> = [];
  for (const layout of BINARY_LAYOUTS) for (const suffix of BINARY_SUFFIXES) out.push({ path: layout(hash) + suffix });
  return out;
}

/** A metadata file's id: its name without `.xml` (any case), or the whole name. */
function metadataKey(name: string): string | undefined {
  return /\.xml$/i.test(name) ? name.slice(0, -4) || undefined : name;
}

/** A binary's hash (lowercase): its name without a known suffix (any case), when that is a hash. */
function binaryKey(name: string): string | undefined {
  const m = /^(.*?)(\.(?:bin|dat|pdf))?$/i.exec(name);
  const stem = m?.[1]?.toLowerCase();
  if (!stem || !HASH_HEX_LENGTHS.includes(stem.length) || !/^[0-9a-f]+$/.test(stem)) return undefined;
  return stem;
}

async function readDescriptor(file: OpenedFile, docId: string, what: string): Promise<LegacyDescriptor> {
  if (file.size > MAX_METADATA_BYTES) throw legacyMetadataInvalid(docId, `the metadata file is larger than ${MAX_METADATA_BYTES} bytes`);
  const bytes = Buffer.allocUnsafe(file.size);
  let at = 0;
  try {
    while (at < file.size) {
      const { bytesRead } = await file.handle.read(bytes, at, file.size - at, at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
  } catch (err) {
    throw legacyUnreadable(what, `reading it failed (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseDescriptor(decodeXml(bytes.subarray(0, at), docId), docId);
}
