// A publication's blocks as the catalog's functions take them: each digest once, sorted, so that
// every transaction locks block rows in the same order.
import type { StoredBlock } from '../block-store.js';

export interface BlockArrays {
  keys: Buffer[];
  sizes: number[];
}

export function blockArrays(blocks: readonly StoredBlock[]): BlockArrays {
  const sizeByHex = new Map<string, number>();
  for (const b of blocks) sizeByHex.set(b.hex, b.size);
  const hexes = [...sizeByHex.keys()].sort();
  return { keys: hexes.map((hex) => Buffer.from(hex, 'hex')), sizes: hexes.map((hex) => sizeByHex.get(hex)!) };
}
