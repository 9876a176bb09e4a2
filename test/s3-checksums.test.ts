// S3's checksum family (issue 39): the check values of each CRC ("123456789"), known digests, the
// AWS SDK's own implementations (@aws-sdk/checksums, installed with @aws-sdk/client-s3) on random
// bytes fed in uneven pieces, pooled hasher reuse, and the validation of sent values.

import crypto from 'node:crypto';
import { Crc32, Crc32c, Crc64Nvme } from '@aws-sdk/checksums/crc';
import { describe, expect, it } from 'vitest';
import { CHECKSUM_ALGORITHMS, checksumAlgorithm, checksumOfTrailer, createChecksum, isChecksumValue, type ChecksumAlgorithm } from '../dist/engine/s3/checksums.js';

async function digest(algorithm: ChecksumAlgorithm, pieces: Uint8Array[]): Promise<string> {
  const c = await createChecksum(algorithm);
  for (const p of pieces) c.update(p);
  return c.digest();
}

const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');

describe('checksums', () => {
  it('the catalogued check values of "123456789" and known digests', async () => {
    const check = [Buffer.from('123456789')];
    expect(await digest('CRC32', check)).toBe(b64('cbf43926'));
    expect(await digest('CRC32C', check)).toBe(b64('e3069283'));
    expect(await digest('CRC64NVME', check)).toBe(b64('ae8b14860a799888'));
    expect(await digest('SHA1', check)).toBe(b64('f7c3bc1d808e04732adf679965ccc34ca7ae3441'));
    expect(await digest('SHA256', check)).toBe(b64('15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225'));
    // Of no bytes, as S3 answers for an empty object.
    expect(await digest('CRC32', [])).toBe('AAAAAA==');
    expect(await digest('CRC64NVME', [])).toBe('AAAAAAAAAAA=');
    // 32 zero bytes: CRC64NVME's published vector.
    expect(await digest('CRC64NVME', [new Uint8Array(32)])).toBe(b64('cf3473434d4ecf3b'));
  });

  it('agree with the AWS SDK on random bytes fed in uneven pieces', async () => {
    const data = crypto.randomBytes(300_001);
    const pieces = [data.subarray(0, 1), data.subarray(1, 65_537), data.subarray(65_537, 65_540), data.subarray(65_540)];
    const sdk = async (hasher: { update(d: Uint8Array): void; digest(): Promise<Uint8Array> }) => {
      hasher.update(data);
      return Buffer.from(await hasher.digest()).toString('base64');
    };
    expect(await digest('CRC32', pieces)).toBe(await sdk(new Crc32()));
    expect(await digest('CRC32C', pieces)).toBe(await sdk(new Crc32c()));
    expect(await digest('CRC64NVME', pieces)).toBe(await sdk(new Crc64Nvme()));
    expect(await digest('SHA1', pieces)).toBe(crypto.createHash('sha1').update(data).digest('base64'));
    expect(await digest('SHA256', pieces)).toBe(crypto.createHash('sha256').update(data).digest('base64'));
    // One flipped bit changes every one.
    const flipped = Buffer.from(data);
    flipped[150_000] ^= 1;
    for (const a of CHECKSUM_ALGORITHMS) expect(await digest(a, [flipped])).not.toBe(await digest(a, [data]));
  });

  it('a pooled hasher starts afresh, and one digested takes no more bytes', async () => {
    const first = await createChecksum('CRC32C');
    first.update(Buffer.from('left over'));
    first.digest();
    expect(() => first.update(Buffer.from('x'))).toThrow(/already digested/);
    // Concurrent hashers do not share state.
    const [a, b] = await Promise.all([createChecksum('CRC64NVME'), createChecksum('CRC64NVME')]);
    a.update(Buffer.from('1234'));
    b.update(Buffer.from('abcd'));
    a.update(Buffer.from('56789'));
    expect(a.digest()).toBe(b64('ae8b14860a799888'));
    expect(await digest('CRC32C', [Buffer.from('123456789')])).toBe(b64('e3069283'));
    b.digest();
  });

  it('names and values', () => {
    expect(checksumOfTrailer('x-amz-checksum-crc64nvme')).toBe('CRC64NVME');
    expect(checksumOfTrailer('x-amz-checksum-md5')).toBeUndefined();
    expect(checksumAlgorithm('crc32c')).toBe('CRC32C');
    expect(checksumAlgorithm('MD5')).toBeUndefined();
    expect(isChecksumValue('CRC32', 'AAAAAA==')).toBe(true);
    expect(isChecksumValue('CRC32', 'AAAAAAA=')).toBe(false);
    expect(isChecksumValue('CRC64NVME', 'AAAAAAAAAAA=')).toBe(true);
    expect(isChecksumValue('SHA256', b64('15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225'))).toBe(true);
    expect(isChecksumValue('SHA1', 'AAAAAA==')).toBe(false);
    expect(isChecksumValue('CRC32', 'AA*AAA==')).toBe(false);
  });
});
