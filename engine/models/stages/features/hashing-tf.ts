// hashing_term_frequency: Spark's HashingTF. Each term's UTF-8 bytes are hashed with
// MurmurHash3 x86_32 (seed 42) and counted at index hash mod num_features.
//
// Spark 2 hashed with `hashUnsafeBytes` (version 1), which mixes each trailing byte (past the
// last whole 4-byte word) as its own sign-extended block; Spark 3 uses `hashUnsafeBytes2`
// (version 2), the standard MurmurHash3 tail. They differ only when length % 4 != 0.

import { bundleError } from '../../errors.js';
import type { NodeSpec } from '../../bundle/spec.js';
import { list, type Tensor } from '../../types.js';
import type { CompiledStage, OpDefinition } from '../op.js';
import { requireSingleColumn, vectorOutput } from './common.js';

const SEED = 42;
const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

const rotl = (x: number, r: number) => (x << r) | (x >>> (32 - r));

function mixK1(k: number): number {
  return Math.imul(rotl(Math.imul(k, C1), 15), C2);
}

function mixH1(h: number, k: number): number {
  return (Math.imul(rotl(h ^ k, 13), 5) + 0xe6546b64) | 0;
}

function fmix(h: number, length: number): number {
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

/** Spark's `Murmur3_x86_32.hashUnsafeBytes` (version 1) or `hashUnsafeBytes2` (version 2), as a signed int. */
function murmur3(bytes: Uint8Array, seed: number, version: 1 | 2): number {
  const aligned = bytes.length - (bytes.length % 4);
  let h = seed | 0;
  for (let i = 0; i < aligned; i += 4) {
    const word = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    h = mixH1(h, mixK1(word));
  }
  if (version === 1) {
    for (let i = aligned; i < bytes.length; i++) h = mixH1(h, mixK1((bytes[i]! << 24) >> 24));
  } else {
    let k = 0;
    for (let i = aligned, shift = 0; i < bytes.length; i++, shift += 8) k ^= bytes[i]! << shift;
    h ^= mixK1(k);
  }
  return fmix(h, bytes.length);
}

/** Index of a term: Spark's `nonNegativeMod(hash, numFeatures)`. */
function termIndex(term: string, numFeatures: number, version: 1 | 2): number {
  const raw = murmur3(Buffer.from(term, 'utf8'), SEED, version) % numFeatures;
  // `| 0` also turns a -0 remainder into 0.
  return (raw < 0 ? raw + numFeatures : raw) | 0;
}

function readVersion(node: NodeSpec): 1 | 2 {
  // Spark-side writers name it hashUnsafeBytesVersion, MLeap's runtime writer `version`; absent → 1 (Spark 2 bundles).
  const name = node.attrs.has('hashUnsafeBytesVersion') ? 'hashUnsafeBytesVersion' : 'version';
  const version = node.attrs.integer(name, 1);
  if (version !== 1 && version !== 2) throw bundleError(`${node.path}: ${name} ${version} is not 1 or 2`);
  return version;
}

function compile(node: NodeSpec): CompiledStage {
  requireSingleColumn(node);
  const numFeatures = node.attrs.integer('num_features', 1 << 18);
  if (numFeatures < 1 || numFeatures > 2 ** 31 - 1) throw bundleError(`${node.path}: num_features must be a positive int`);
  const binary = node.attrs.boolean('binary', false);
  const version = readVersion(node);
  return {
    inputs: [list('string', true)],
    outputs: [vectorOutput(numFeatures)],
    run(args) {
      const counts = new Map<number, number>();
      for (const term of args[0] as string[]) {
        const i = termIndex(term, numFeatures, version);
        counts.set(i, binary ? 1 : (counts.get(i) ?? 0) + 1);
      }
      const indices = [...counts.keys()].sort((a, b) => a - b);
      const out: Tensor = { kind: 'sparse', dims: [numFeatures], indices, values: indices.map((i) => counts.get(i)!) };
      return [out];
    },
  };
}

export const hashingTermFrequency: OpDefinition = { op: 'hashing_term_frequency', className: 'HashingTermFrequency', compile };
