// Writes zip files by hand (stored or deflated entries), including ones that lie about their
// sizes: the tests' zip bombs. No zip library is a dependency, and a library would refuse to lie.

import { crc32, deflateRawSync } from 'node:zlib';
import type { BundleDoc } from '../../engine/models/bundle/spec.js';

export interface ZipEntry {
  name: string;
  data?: Buffer;
  /** Deflate the data (default: stored). */
  deflate?: boolean;
  /** The uncompressed size written in the headers, when it is to differ from the data's. */
  declaredSize?: number;
}

/** The bytes of a zip holding `entries`, in order. */
export function zipBytes(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const data = entry.data ?? Buffer.alloc(0);
    const stored = entry.deflate ? deflateRawSync(data) : data;
    const name = Buffer.from(entry.name, 'utf8');
    const method = entry.deflate ? 8 : 0;
    const crc = crc32(data);
    const size = entry.declaredSize ?? data.length;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(stored.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(stored.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, stored);
    centrals.push(central, name);
    offset += local.length + name.length + stored.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** A bundle document as a zip (bundle.json and its files, deflated). */
export function zipBundle(doc: BundleDoc): Buffer {
  return zipBytes([
    { name: 'bundle.json', data: Buffer.from(JSON.stringify(doc.info)), deflate: true },
    ...Object.entries(doc.files).map(([name, text]) => ({ name, data: Buffer.from(text), deflate: true })),
  ]);
}
