// The XML request bodies of the S3 API: CompleteMultipartUpload (the parts to assemble) and
// Delete (the keys of DeleteObjects), parsed with fast-xml-parser after the caller read at most
// S3_XML_BODY_MAX_BYTES. A document type (and so any entity of its own) is refused; what is not
// S3's shape is 400 MalformedXML, parts out of order 400 InvalidPartOrder.

import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { S3_KEY_MAX_BYTES, S3_MAX_DELETE_KEYS, S3_MAX_PARTS, S3_XML_BODY_MAX_BYTES } from '../../engine/base/limits.js';
import { CHECKSUM_ALGORITHMS, isChecksumValue, type ChecksumAlgorithm } from '../../engine/s3/checksums.js';
import { S3Error } from './s3-error.js';
import type { Checksums } from './xml.js';

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, trimValues: false, isArray: (name) => name === 'Part' || name === 'Object' });

const malformed = (why: string) => new S3Error('MalformedXML', `The XML you provided was not well-formed or did not validate against our published schema: ${why}`);

type Element = Record<string, unknown>;

/** The root element of a body, checked for size and well-formedness. */
function parse(body: string | Uint8Array, root: string): Element {
  const bytes = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  if (bytes > S3_XML_BODY_MAX_BYTES) throw new S3Error('MaxMessageLengthExceeded', `Your request was too big (more than ${S3_XML_BODY_MAX_BYTES} bytes of XML).`);
  const text = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw malformed('a document type is not allowed');
  if (text.trim() === '') throw malformed('the body is empty');
  if (XMLValidator.validate(text) !== true) throw malformed('it is not well-formed XML');
  const doc = parser.parse(text) as Element;
  const element = doc[root];
  if (typeof element !== 'object' || element === null) throw malformed(`the root element must be <${root}>`);
  return element as Element;
}

/** An element's text (a leaf); undefined when absent. */
function text(element: Element, name: string): string | undefined {
  const value = element[name];
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  // An element given twice (an array), or one with children.
  throw malformed(`<${name}> must be a single text element`);
}

export interface CompletedPart {
  partNumber: number;
  /** The ETag as sent, quotes removed. */
  etag: string;
  checksums: Checksums;
}

const CHECKSUM_ELEMENTS = CHECKSUM_ALGORITHMS.map((a) => [a, `Checksum${a}`] as const);

/** CompleteMultipartUpload: 1 to S3_MAX_PARTS parts, numbers 1 to 10000 in ascending order, each with its ETag. */
export function parseCompleteMultipartUpload(body: string | Uint8Array): CompletedPart[] {
  const root = parse(body, 'CompleteMultipartUpload');
  const parts = root.Part;
  if (!Array.isArray(parts) || parts.length === 0) throw malformed('<CompleteMultipartUpload> must list at least one <Part>');
  if (parts.length > S3_MAX_PARTS) throw malformed(`at most ${S3_MAX_PARTS} parts`);
  const out: CompletedPart[] = [];
  for (const part of parts as unknown[]) {
    if (typeof part !== 'object' || part === null) throw malformed('a <Part> must hold <PartNumber> and <ETag>');
    const p = part as Element;
    const number = text(p, 'PartNumber')?.trim();
    const etag = text(p, 'ETag')?.trim();
    if (number === undefined || !/^\d{1,5}$/.test(number) || Number(number) < 1 || Number(number) > 10_000) throw malformed('<PartNumber> must be a number from 1 to 10000');
    if (etag === undefined || etag === '') throw malformed(`part ${number} has no <ETag>`);
    const checksums: Checksums = {};
    for (const [algorithm, element] of CHECKSUM_ELEMENTS) {
      const value = text(p, element)?.trim();
      if (value === undefined) continue;
      if (!isChecksumValue(algorithm as ChecksumAlgorithm, value)) throw new S3Error('InvalidRequest', `Value for ${element} of part ${number} is invalid.`);
      checksums[algorithm] = value;
    }
    const partNumber = Number(number);
    const previous = out.at(-1);
    if (previous && previous.partNumber >= partNumber) throw new S3Error('InvalidPartOrder', 'The list of parts was not in ascending order. The parts list must be specified in order by part number.');
    out.push({ partNumber, etag: etag.replace(/^"(.*)"$/, '$1'), checksums });
  }
  return out;
}

/** Delete (DeleteObjects): 1 to S3_MAX_DELETE_KEYS keys, each 1 to S3_KEY_MAX_BYTES bytes; Quiet true or false. */
export function parseDelete(body: string | Uint8Array): { quiet: boolean; keys: string[] } {
  const root = parse(body, 'Delete');
  const quietText = text(root, 'Quiet')?.trim().toLowerCase();
  if (quietText !== undefined && quietText !== 'true' && quietText !== 'false') throw malformed('<Quiet> must be true or false');
  const objects = root.Object;
  if (!Array.isArray(objects) || objects.length === 0) throw malformed('<Delete> must name at least one <Object>');
  if (objects.length > S3_MAX_DELETE_KEYS) throw malformed(`at most ${S3_MAX_DELETE_KEYS} keys`);
  const keys: string[] = [];
  for (const object of objects as unknown[]) {
    if (typeof object !== 'object' || object === null) throw malformed('an <Object> must hold a <Key>');
    const key = text(object as Element, 'Key');
    if (key === undefined || key === '') throw malformed('an <Object> must hold a non-empty <Key>');
    if (Buffer.byteLength(key) > S3_KEY_MAX_BYTES) throw new S3Error('KeyTooLongError', `Your key is too long (at most ${S3_KEY_MAX_BYTES} bytes)`);
    keys.push(key);
  }
  return { quiet: quietText === 'true', keys };
}
