// The CRC of concatenated bytes from the CRCs and lengths of the pieces, no byte read: S3's
// FULL_OBJECT checksum of a multipart object (./checksum-types.ts) from its parts' checksums.
//
// The method is zlib's crc32_combine (Mark Adler; zlib 1.2.12's multmodp / x2nmodp): for a CRC
// whose initial value equals its final XOR (all ones for CRC-32, CRC-32C and CRC-64/NVME),
//   crc(A ‖ B) = crc(A) · x^(8·len(B)) mod P  ⊕  crc(B)
// in GF(2)[x], values in the reflected bit order the CRC is computed in (the top bit is x^0).
// x^(8·n) is the product of the precomputed x^(2^k) for the bits of 8·n. Works for any
// reflected CRC of that kind; the polynomials here are the ones ./checksums.ts computes with.
// No maintained npm package combines CRC-32C and CRC-64/NVME (@balena/node-crc-utils: CRC-32 only).

/** A reflected CRC: its width in bits and its reversed polynomial. */
interface ReflectedCrc {
  width: number;
  poly: bigint;
  /** x^(2^k) mod P for k = 0…63, filled on first use. */
  powers?: bigint[];
}

const CRCS = {
  CRC32: { width: 32, poly: 0xedb88320n },
  CRC32C: { width: 32, poly: 0x82f63b78n },
  CRC64NVME: { width: 64, poly: 0x9a6c9329ac4bc9b5n },
} satisfies Record<string, ReflectedCrc>;

export type CombinableCrc = keyof typeof CRCS;

export function isCombinable(algorithm: string): algorithm is CombinableCrc {
  return algorithm in CRCS;
}

/** a · b mod P (reflected: the top bit of `a` is x^0). */
function multiply(crc: ReflectedCrc, a: bigint, b: bigint): bigint {
  if (a === 0n) return 0n;
  let m = 1n << BigInt(crc.width - 1);
  let product = 0n;
  for (;;) {
    if (a & m) {
      product ^= b;
      if ((a & (m - 1n)) === 0n) break;
    }
    m >>= 1n;
    b = b & 1n ? (b >> 1n) ^ crc.poly : b >> 1n;
  }
  return product;
}

/** x^(8·bytes) mod P. */
function shiftOperator(crc: ReflectedCrc, bytes: number): bigint {
  if (!crc.powers) {
    crc.powers = [1n << BigInt(crc.width - 2)]; // x^1
    for (let k = 1; k < 64; k++) crc.powers.push(multiply(crc, crc.powers[k - 1]!, crc.powers[k - 1]!));
  }
  let operator = 1n << BigInt(crc.width - 1); // x^0
  let n = BigInt(bytes);
  for (let k = 3; n > 0n; k++, n >>= 1n) if (n & 1n) operator = multiply(crc, crc.powers[k]!, operator);
  return operator;
}

/**
 * The CRC (big-endian bytes, as S3's base64 values carry it) of the pieces' bytes in order, from
 * each piece's CRC (big-endian bytes) and length. Empty pieces change nothing; no pieces: the CRC of nothing (0).
 */
export function combineCrcs(algorithm: CombinableCrc, pieces: ReadonlyArray<{ crc: Uint8Array; length: number }>): Buffer {
  const crc: ReflectedCrc = CRCS[algorithm];
  const bytes = crc.width / 8;
  // Parts but the last are mostly of one size: one operator per distinct length.
  const operators = new Map<number, bigint>();
  let value = 0n;
  for (const piece of pieces) {
    if (piece.crc.length !== bytes) throw new Error(`A ${algorithm} is ${bytes} bytes, not ${piece.crc.length}`);
    if (piece.length > 0) {
      let operator = operators.get(piece.length);
      if (operator === undefined) operators.set(piece.length, (operator = shiftOperator(crc, piece.length)));
      value = multiply(crc, operator, value);
    }
    value ^= BigInt(`0x${Buffer.from(piece.crc).toString('hex')}`);
  }
  return Buffer.from(value.toString(16).padStart(bytes * 2, '0'), 'hex');
}
