// The CRC combination behind S3's FULL_OBJECT checksums (engine/s3/crc-combine.ts): the CRC of
// random bytes cut at random places (empty and one-byte pieces among them) combined from the
// pieces' CRCs equals the CRC of the whole computed directly (zlib's CRC-32, hash-wasm's CRC-32C
// and CRC-64/NVME through engine/s3/checksums.ts).

import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createChecksum } from '../dist/engine/s3/checksums.js';
import { multipartChecksum, multipartObjectChecksums } from '../dist/engine/s3/checksum-types.js';
import { type CombinableCrc, combineCrcs } from '../dist/engine/s3/crc-combine.js';
import type { UploadRecord } from '../dist/engine/s3/records.js';

async function crcOf(algorithm: CombinableCrc, bytes: Uint8Array): Promise<Buffer> {
  const c = await createChecksum(algorithm);
  c.update(bytes);
  return Buffer.from(c.digest(), 'base64');
}

/** Cut points: random, with empty and one-byte pieces forced in. */
function randomSplit(length: number): number[] {
  const cuts = new Set<number>([0, length]);
  const n = crypto.randomInt(0, 12);
  for (let i = 0; i < n; i++) cuts.add(crypto.randomInt(0, length + 1));
  if (length > 2) cuts.add(1); // a one-byte first piece
  const sorted = [...cuts].sort((a, b) => a - b);
  sorted.splice(1, 0, 0); // an empty piece
  sorted.push(length); // and an empty last piece
  return sorted;
}

describe('crc combine', () => {
  for (const algorithm of ['CRC32', 'CRC32C', 'CRC64NVME'] as const) {
    it(`${algorithm}: the pieces' CRCs combine to the whole's, for random bytes and random splits`, async () => {
      for (let round = 0; round < 40; round++) {
        const length = round < 3 ? round : crypto.randomInt(0, round % 5 === 0 ? 300_000 : 5_000);
        const bytes = crypto.randomBytes(length);
        const cuts = randomSplit(length);
        const pieces = [];
        for (let i = 1; i < cuts.length; i++) {
          const piece = bytes.subarray(cuts[i - 1]!, cuts[i]!);
          pieces.push({ crc: await crcOf(algorithm, piece), length: piece.length });
        }
        expect(combineCrcs(algorithm, pieces).toString('hex'), `${length} bytes cut at ${cuts.join(',')}`).toBe((await crcOf(algorithm, bytes)).toString('hex'));
      }
    });

    it(`${algorithm}: no pieces is the CRC of nothing; one piece is itself; equal-length pieces`, async () => {
      expect(combineCrcs(algorithm, []).equals(await crcOf(algorithm, new Uint8Array(0)))).toBe(true);
      const one = crypto.randomBytes(1000);
      expect(combineCrcs(algorithm, [{ crc: await crcOf(algorithm, one), length: 1000 }]).equals(await crcOf(algorithm, one))).toBe(true);
      // Many pieces of one size (a multipart upload's parts): the cached operator.
      const whole = crypto.randomBytes(64 * 1024);
      const pieces = [];
      for (let at = 0; at < whole.length; at += 4096) pieces.push({ crc: await crcOf(algorithm, whole.subarray(at, at + 4096)), length: 4096 });
      expect(combineCrcs(algorithm, pieces).equals(await crcOf(algorithm, whole))).toBe(true);
    });
  }

  it('lengths past 32 bits: shifting by 5 GiB at once or by 2 then 3 GiB agrees (x^(8n) for large n)', () => {
    // A piece whose CRC is 0 only shifts what came before it: the operator alone is tested.
    const gib = 1024 ** 3;
    const a = combineCrcs('CRC64NVME', [{ crc: Buffer.from('0123456789abcdef', 'hex'), length: 7 }, { crc: Buffer.alloc(8), length: 5 * gib }]);
    const b = combineCrcs('CRC64NVME', [
      { crc: Buffer.from('0123456789abcdef', 'hex'), length: 7 },
      { crc: Buffer.alloc(8), length: 2 * gib },
      { crc: Buffer.alloc(8), length: 3 * gib },
    ]);
    expect(a.equals(b)).toBe(true);
  });

  it('a multipart object\'s checksum by type: FULL_OBJECT the whole bytes\' CRC (empty and one-byte parts too), COMPOSITE -N; S3\'s defaults and refused pairs', async () => {
    const parts = [crypto.randomBytes(70_000), Buffer.alloc(0), crypto.randomBytes(1), crypto.randomBytes(3)];
    const whole = Buffer.concat(parts);
    const record = async (algorithm: CombinableCrc) => Promise.all(parts.map(async (p) => ({ size: p.length, checksums: { [algorithm]: (await crcOf(algorithm, p)).toString('base64') } })));
    const upload = (checksumAlgorithm: CombinableCrc, checksumType?: 'FULL_OBJECT' | 'COMPOSITE') =>
      ({ owner: { tenant: 't', subject: 's' }, initiated: 0, meta: { userMetadata: {} }, checksumAlgorithm, ...(checksumType ? { checksumType } : {}) }) as UploadRecord;
    for (const algorithm of ['CRC32', 'CRC32C'] as const) {
      expect(await multipartObjectChecksums(upload(algorithm, 'FULL_OBJECT'), await record(algorithm))).toEqual({ [algorithm]: (await crcOf(algorithm, whole)).toString('base64') });
      const composite = await crcOf(algorithm, Buffer.concat(await Promise.all(parts.map((p) => crcOf(algorithm, p)))));
      expect(await multipartObjectChecksums(upload(algorithm), await record(algorithm))).toEqual({ [algorithm]: `${composite.toString('base64')}-4` });
    }
    // A record without a type (kept before types were): CRC64NVME's default, FULL_OBJECT.
    expect(await multipartObjectChecksums(upload('CRC64NVME'), await record('CRC64NVME'))).toEqual({ CRC64NVME: (await crcOf('CRC64NVME', whole)).toString('base64') });
    expect(multipartChecksum('CRC64NVME', undefined)).toEqual({ algorithm: 'CRC64NVME', type: 'FULL_OBJECT' });
    expect(multipartChecksum('SHA1', undefined)).toEqual({ algorithm: 'SHA1', type: 'COMPOSITE' });
    expect(multipartChecksum('CRC32', 'full_object')).toEqual({ algorithm: 'CRC32', type: 'FULL_OBJECT' });
    expect(multipartChecksum(undefined, undefined)).toBeUndefined();
    for (const [algorithm, type] of [['SHA256', 'FULL_OBJECT'], ['SHA1', 'FULL_OBJECT'], ['CRC64NVME', 'COMPOSITE'], ['CRC32', 'BOTH'], [undefined, 'COMPOSITE']] as const) {
      expect(() => multipartChecksum(algorithm, type), `${algorithm} ${type}`).toThrow(expect.objectContaining({ code: 'invalid_request' }));
    }
  });
});
