// S3's checksum family (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256) as incremental
// hashers: update(bytes) as a body streams, digest() its value in base64 as S3 writes it.
//
// Implementations (measured on this machine, 64 KiB updates; docs/s3.md): CRC32 is Node's
// zlib.crc32 (about 2 GB/s); CRC32C and CRC64NVME are hash-wasm's (already a dependency: CRC32
// with the Castagnoli polynomial, CRC-64 with NVMe's reflected 0x9a6c9329ac4bc9b5; about 550 and
// 320 MB/s, 3x and 1.4x the AWS SDK's JavaScript tables); SHA-1 and SHA-256 are node:crypto.
// A hash-wasm instance costs most of a millisecond to create: released instances (at digest)
// are kept in a small pool and reset.

import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { createCRC32, createCRC64, type IHasher } from 'hash-wasm';

export type ChecksumAlgorithm = 'CRC32' | 'CRC32C' | 'CRC64NVME' | 'SHA1' | 'SHA256';

/** What an object's checksum covers (./checksum-types.ts): its bytes, or its parts' checksums (`-N`). */
export type ChecksumType = 'COMPOSITE' | 'FULL_OBJECT';

export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = ['CRC32', 'CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'];

/** The header (and trailer) that carries each checksum. */
export const CHECKSUM_HEADER: Readonly<Record<ChecksumAlgorithm, string>> = {
  CRC32: 'x-amz-checksum-crc32',
  CRC32C: 'x-amz-checksum-crc32c',
  CRC64NVME: 'x-amz-checksum-crc64nvme',
  SHA1: 'x-amz-checksum-sha1',
  SHA256: 'x-amz-checksum-sha256',
};

/** Bytes of each digest (its base64 is 4 * ceil(n / 3) characters). */
const DIGEST_BYTES: Readonly<Record<ChecksumAlgorithm, number>> = { CRC32: 4, CRC32C: 4, CRC64NVME: 8, SHA1: 20, SHA256: 32 };

export interface Checksum {
  readonly algorithm: ChecksumAlgorithm;
  update(data: Uint8Array): void;
  /** The value, base64 (`AAAAAA==`). Ends the hasher: no update after it. */
  digest(): string;
}

/** The algorithm an `x-amz-checksum-*` header or trailer names (lower-case name), if any. */
export function checksumOfTrailer(name: string): ChecksumAlgorithm | undefined {
  return CHECKSUM_ALGORITHMS.find((a) => CHECKSUM_HEADER[a] === name);
}

/** `CRC32C`, `crc32c` (x-amz-checksum-algorithm, x-amz-sdk-checksum-algorithm) → the algorithm, if it is one. */
export function checksumAlgorithm(name: string): ChecksumAlgorithm | undefined {
  const upper = name.toUpperCase();
  return CHECKSUM_ALGORITHMS.find((a) => a === upper);
}

/** Whether `value` is the base64 of a digest of `algorithm` (a value of another length is 400 InvalidRequest for S3). */
export function isChecksumValue(algorithm: ChecksumAlgorithm, value: string): boolean {
  const bytes = DIGEST_BYTES[algorithm];
  return value.length === 4 * Math.ceil(bytes / 3) && /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, 'base64').length === bytes;
}

class Crc32 implements Checksum {
  readonly algorithm = 'CRC32';
  private value = 0;
  update(data: Uint8Array): void {
    this.value = zlib.crc32(data, this.value);
  }
  digest(): string {
    const out = Buffer.allocUnsafe(4);
    out.writeUInt32BE(this.value >>> 0);
    return out.toString('base64');
  }
}

class NodeHash implements Checksum {
  private readonly hash: crypto.Hash;
  constructor(readonly algorithm: 'SHA1' | 'SHA256') {
    this.hash = crypto.createHash(algorithm === 'SHA1' ? 'sha1' : 'sha256');
  }
  update(data: Uint8Array): void {
    this.hash.update(data);
  }
  digest(): string {
    return this.hash.digest('base64');
  }
}

/** hash-wasm instances kept for reuse, per algorithm: enough for the checksummed uploads in flight at once. */
const POOLED = 64;
const pools: Record<'CRC32C' | 'CRC64NVME', IHasher[]> = { CRC32C: [], CRC64NVME: [] };
const CASTAGNOLI = 0x82f63b78;
const NVME = '9a6c9329ac4bc9b5';

class WasmCrc implements Checksum {
  private ended = false;
  constructor(
    readonly algorithm: 'CRC32C' | 'CRC64NVME',
    private readonly hasher: IHasher,
  ) {}
  update(data: Uint8Array): void {
    // After digest the instance may serve another upload: nothing of this one may reach it.
    if (this.ended) throw new Error('checksum already digested');
    this.hasher.update(data);
  }
  digest(): string {
    if (this.ended) throw new Error('checksum already digested');
    this.ended = true;
    const value = Buffer.from(this.hasher.digest('binary')).toString('base64');
    const pool = pools[this.algorithm];
    if (pool.length < POOLED) pool.push(this.hasher);
    return value;
  }
}

async function wasmHasher(algorithm: 'CRC32C' | 'CRC64NVME'): Promise<IHasher> {
  const pooled = pools[algorithm].pop();
  if (pooled) return pooled.init();
  return algorithm === 'CRC32C' ? createCRC32(CASTAGNOLI) : createCRC64(NVME);
}

/** A fresh hasher of `algorithm`. */
export async function createChecksum(algorithm: ChecksumAlgorithm): Promise<Checksum> {
  switch (algorithm) {
    case 'CRC32':
      return new Crc32();
    case 'SHA1':
    case 'SHA256':
      return new NodeHash(algorithm);
    case 'CRC32C':
    case 'CRC64NVME':
      return new WasmCrc(algorithm, await wasmHasher(algorithm));
  }
}
