// S3's checksum types (docs/s3.md "Checksum types"): what an object's x-amz-checksum-* covers.
// - FULL_OBJECT: the checksum of the object's bytes. Every object not uploaded in parts; a
//   multipart upload created with it (CRC32, CRC32C; CRC64NVME always), its checksum combined at
//   Complete from the parts' CRCs and sizes (./crc-combine.ts), no byte read.
// - COMPOSITE: the checksum of the parts' checksums, `-N` (N parts). A multipart upload's
//   default for CRC32, CRC32C, SHA1 and SHA256 (the only type SHA1 and SHA256 have).
// The type is on the upload's record (UploadRecord.checksumType); an object's is read from its
// value (only a composite one ends in `-N`).

import { type ChecksumAlgorithm, type ChecksumType, createChecksum, isChecksumValue } from './checksums.js';
import { combineCrcs, isCombinable } from './crc-combine.js';
import { s3Refusal } from './errors.js';
import type { PartRecord, UploadRecord } from './records.js';

export type { ChecksumType } from './checksums.js';

/** An upload's checksum: what CreateMultipartUpload settled. */
export interface MultipartChecksum {
  algorithm: ChecksumAlgorithm;
  type: ChecksumType;
}

/** What CompleteMultipartUpload states of the object (x-amz-checksum-type, x-amz-checksum-*, x-amz-mp-object-size), to be checked. */
export interface StatedObjectChecksum {
  type?: string;
  checksum?: { algorithm: ChecksumAlgorithm; value: string };
  /** x-amz-mp-object-size: the object's size in bytes, which must be the listed parts' total (400 InvalidRequest). */
  objectSize?: number;
}

const lower = (algorithm: ChecksumAlgorithm) => algorithm.toLowerCase();

/**
 * CreateMultipartUpload's x-amz-checksum-algorithm and x-amz-checksum-type → the upload's
 * checksum: S3's defaults (CRC64NVME FULL_OBJECT, the others COMPOSITE) and its 400s.
 */
export function multipartChecksum(algorithm: ChecksumAlgorithm | undefined, type: string | undefined): MultipartChecksum | undefined {
  if (!algorithm) {
    if (type !== undefined) throw s3Refusal('InvalidRequest', 'The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.');
    return undefined;
  }
  const requested = type?.trim().toUpperCase();
  if (requested !== undefined && requested !== 'COMPOSITE' && requested !== 'FULL_OBJECT') throw s3Refusal('InvalidRequest', 'Value for x-amz-checksum-type header is invalid.');
  const chosen: ChecksumType = requested ?? (algorithm === 'CRC64NVME' ? 'FULL_OBJECT' : 'COMPOSITE');
  if (chosen === 'FULL_OBJECT' && !isCombinable(algorithm)) throw s3Refusal('InvalidRequest', `The FULL_OBJECT checksum type cannot be used with the ${lower(algorithm)} checksum algorithm.`);
  if (chosen === 'COMPOSITE' && algorithm === 'CRC64NVME') throw s3Refusal('InvalidRequest', 'The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.');
  return { algorithm, type: chosen };
}

/** The upload's checksum (a record from before types were kept has its algorithm's default). */
export function uploadChecksum(upload: UploadRecord): MultipartChecksum | undefined {
  const algorithm = upload.checksumAlgorithm;
  if (!algorithm) return undefined;
  return { algorithm, type: upload.checksumType ?? (algorithm === 'CRC64NVME' ? 'FULL_OBJECT' : 'COMPOSITE') };
}

/** An object's checksum type, from its value: a composite one ends in `-N`. */
export function checksumTypeOfValue(value: string): ChecksumType {
  return /-\d+$/.test(value) ? 'COMPOSITE' : 'FULL_OBJECT';
}

/**
 * The checksum of a multipart object from its parts' (in order): COMPOSITE, the checksum of the
 * parts' checksums with `-N`; FULL_OBJECT, the parts' CRCs combined over their sizes. None when
 * the upload has no algorithm or a part has no checksum of it.
 */
export async function multipartObjectChecksums(upload: UploadRecord, parts: ReadonlyArray<Pick<PartRecord, 'checksums' | 'size'>>): Promise<Partial<Record<ChecksumAlgorithm, string>>> {
  const checksum = uploadChecksum(upload);
  if (!checksum || !parts.every((p) => p.checksums[checksum.algorithm] !== undefined)) return {};
  const { algorithm } = checksum;
  const of = (p: (typeof parts)[number]) => Buffer.from(p.checksums[algorithm]!, 'base64');
  if (checksum.type === 'FULL_OBJECT' && isCombinable(algorithm)) {
    return { [algorithm]: combineCrcs(algorithm, parts.map((p) => ({ crc: of(p), length: p.size }))).toString('base64') };
  }
  const composite = await createChecksum(algorithm);
  for (const p of parts) composite.update(of(p));
  return { [algorithm]: `${composite.digest()}-${parts.length}` };
}

/**
 * What Complete stated of the object against the upload and the computed checksums: the type
 * must be the upload's (400 InvalidRequest), the checksum of the upload's algorithm (400
 * InvalidRequest) and its value the object's (400 BadDigest; a composite one with or without `-N`).
 */
export function checkStatedChecksum(upload: UploadRecord, stated: StatedObjectChecksum, computed: Partial<Record<ChecksumAlgorithm, string>>): void {
  const checksum = uploadChecksum(upload);
  if (stated.type !== undefined && stated.type.trim().toUpperCase() !== checksum?.type) {
    throw s3Refusal('InvalidRequest', checksum
      ? `The upload was created using the ${checksum.type} checksum mode. The complete request must use the same checksum mode.`
      : 'The upload was created without a checksum algorithm: the complete request cannot state a checksum type.');
  }
  const sent = stated.checksum;
  if (!sent) return;
  if (sent.algorithm !== checksum?.algorithm) {
    throw s3Refusal('InvalidRequest', `Checksum Type mismatch occurred, expected checksum Type: ${checksum ? lower(checksum.algorithm) : 'null'}, actual checksum Type: ${lower(sent.algorithm)}`);
  }
  const value = computed[sent.algorithm];
  const matches = value !== undefined && (sent.value === value || (checksum.type === 'COMPOSITE' && sent.value === value.replace(/-\d+$/, '')));
  if (!matches) throw s3Refusal('BadDigest', `The ${sent.algorithm} you specified did not match the calculated checksum.`);
}

/** Whether `value` may be Complete's x-amz-checksum-*: a digest of `algorithm`, `-N` allowed (a composite one). */
export function isObjectChecksumValue(algorithm: ChecksumAlgorithm, value: string): boolean {
  const m = /^(.*?)(-\d{1,5})?$/.exec(value);
  return m !== null && isChecksumValue(algorithm, m[1]!);
}
