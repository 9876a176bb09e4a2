// A legacy metadata file → its descriptor: the binary's hash, media type and length. The XML is
// parsed (fast-xml-parser), never matched with patterns; names are matched case-insensitively,
// namespace prefixes ignored, anywhere in the document (rules in docs/legacy.md, "Metadata").

import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { legacyMetadataInvalid, legacyUnreadable } from './errors.js';

export interface LegacyDescriptor {
  /** Lowercase hex. */
  hash: string;
  /** The media type as written (validated), or undefined when the metadata names none. */
  mediaType?: string;
  /** The binary's length in bytes when the metadata gives one. */
  length?: number;
}

/** Hex lengths a binary hash may have: MD5, SHA-1, SHA-256, SHA-512. */
export const HASH_HEX_LENGTHS: readonly number[] = [32, 40, 64, 128];

/** Field → names in priority order (lowercase). `binaryhash` also matches an attribute. */
const HASH_NAMES = ['binaryhash', 'binary_hash', 'contenthash', 'hash'];
const MIME_NAMES = ['mime', 'mimetype', 'contenttype'];
const LENGTH_NAMES = ['length', 'bytelength', 'size'];

const TOKEN = "[A-Za-z0-9!#$%&'*+.^_`|~-]+";
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}(?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"[^"\\\\\\x00-\\x1f\\x7f]*"))*$`);

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  removeNSPrefix: true,
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  // DOCTYPE entities bounded explicitly (these are fast-xml-parser 5's defaults, written here so
  // that no upgrade loosens them): a billion-laughs or quadratic-blowup file fails to parse (409).
  processEntities: { enabled: true, maxEntitySize: 10_000, maxEntityCount: 1000, maxExpansionDepth: 10_000, maxTotalExpansions: 100_000, maxExpandedLength: 100_000 },
  maxNestedTags: 100,
});

type XmlNode = Record<string, unknown>;

/** Occurrences of one field: per name (priority index), the shallowest depth and the values found there. */
class Field {
  private best: { rank: number; depth: number; values: string[] } | undefined;
  constructor(private readonly names: readonly string[]) {}

  offer(name: string, depth: number, value: string): void {
    const rank = this.names.indexOf(name);
    if (rank < 0 || value === '') return;
    const b = this.best;
    if (!b || rank < b.rank || (rank === b.rank && depth < b.depth)) this.best = { rank, depth, values: [value] };
    else if (rank === b.rank && depth === b.depth) b.values.push(value);
  }

  /** The value; undefined when absent; throws when the winning occurrences disagree. */
  value(docId: string, label: string, normalize: (v: string) => string = (v) => v): string | undefined {
    const b = this.best;
    if (!b) return undefined;
    const distinct = new Set(b.values.map(normalize));
    if (distinct.size > 1) throw legacyMetadataInvalid(docId, `${label} is given ${distinct.size} different values (<${this.names[b.rank]}> at the same depth)`);
    return [...distinct][0];
  }
}

/** The text of the XML bytes: a BOM, else the declaration's encoding, else UTF-8; invalid bytes are 409. */
export function decodeXml(bytes: Uint8Array, docId: string): string {
  let label = 'utf-8';
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) label = 'utf-8';
  else if (bytes[0] === 0xff && bytes[1] === 0xfe) label = 'utf-16le';
  else if (bytes[0] === 0xfe && bytes[1] === 0xff) label = 'utf-16be';
  else {
    const head = Buffer.from(bytes.subarray(0, 256)).toString('latin1');
    const m = /^\s*<\?xml[^>]*\bencoding\s*=\s*["']([A-Za-z0-9._-]+)["']/.exec(head);
    if (m) label = m[1]!.toLowerCase();
  }
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label, { fatal: true });
  } catch {
    throw legacyUnreadable(`metadata of ${JSON.stringify(docId)}`, `its encoding ${JSON.stringify(label)} is not supported`);
  }
  try {
    return decoder.decode(bytes);
  } catch {
    throw legacyUnreadable(`metadata of ${JSON.stringify(docId)}`, `its bytes are not valid ${label}`);
  }
}

/** The descriptor of a metadata document: 409 when it is not well-formed XML, 422 when it has no usable hash. */
export function parseDescriptor(xml: string, docId: string): LegacyDescriptor {
  const what = `metadata of ${JSON.stringify(docId)}`;
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw legacyUnreadable(what, `it is not well-formed XML (line ${valid.err.line}: ${valid.err.msg})`);
  let tree: XmlNode[];
  try {
    tree = parser.parse(xml) as XmlNode[];
  } catch (err) {
    throw legacyUnreadable(what, `it could not be parsed (${(err as Error).message})`);
  }
  const hash = new Field(HASH_NAMES);
  const mime = new Field(MIME_NAMES);
  const length = new Field(LENGTH_NAMES);
  // Iterative walk (documents may nest deeply): elements in document order with their depth.
  const stack: Array<{ nodes: XmlNode[]; at: number; depth: number }> = [{ nodes: tree, at: 0, depth: 0 }];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.at >= frame.nodes.length) {
      stack.pop();
      continue;
    }
    const node = frame.nodes[frame.at++]!;
    const tag = Object.keys(node).find((k) => k !== ':@' && k !== '#text');
    if (tag === undefined) continue;
    const name = tag.toLowerCase();
    const attrs = node[':@'] as Record<string, unknown> | undefined;
    if (attrs) {
      for (const [attr, value] of Object.entries(attrs)) {
        if (attr.toLowerCase() === 'binaryhash' && typeof value === 'string') hash.offer('binaryhash', frame.depth, value.trim());
      }
    }
    const children = Array.isArray(node[tag]) ? (node[tag] as XmlNode[]) : [];
    const leaf = children.every((c) => '#text' in c);
    if (leaf) {
      const text = children.map((c) => String(c['#text'])).join('').trim();
      hash.offer(name, frame.depth, text);
      mime.offer(name, frame.depth, text);
      length.offer(name, frame.depth, text);
    } else {
      stack.push({ nodes: children, at: 0, depth: frame.depth + 1 });
    }
  }
  const rawHash = hash.value(docId, 'the binary hash', (v) => v.toLowerCase());
  if (rawHash === undefined) throw legacyMetadataInvalid(docId, 'no binary hash (binaryHash, binary_hash, contentHash or hash)');
  if (!/^[0-9a-f]+$/.test(rawHash)) throw legacyMetadataInvalid(docId, 'the binary hash is not hexadecimal');
  if (!HASH_HEX_LENGTHS.includes(rawHash.length)) throw legacyMetadataInvalid(docId, `the binary hash has ${rawHash.length} hex digits (expected ${HASH_HEX_LENGTHS.join(', ')})`);
  const descriptor: LegacyDescriptor = { hash: rawHash };
  const mediaType = mime.value(docId, 'the media type');
  if (mediaType !== undefined) {
    if (mediaType.length > 255 || !MEDIA_TYPE.test(mediaType)) throw legacyMetadataInvalid(docId, `the media type ${JSON.stringify(mediaType.slice(0, 80))} is not type/subtype`);
    descriptor.mediaType = mediaType;
  }
  const rawLength = length.value(docId, 'the length');
  if (rawLength !== undefined) {
    const n = /^[0-9]{1,16}$/.test(rawLength) ? Number(rawLength) : NaN;
    if (!Number.isSafeInteger(n)) throw legacyMetadataInvalid(docId, `the length ${JSON.stringify(rawLength.slice(0, 40))} is not a byte count`);
    descriptor.length = n;
  }
  return descriptor;
}
