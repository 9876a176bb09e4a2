// Reads an MLeap bundle (zip file or directory) into a BundleDoc, within limits: the bundle's
// total expanded size, its number of files, and each entry's size are checked before and while
// bytes are read, so a zip bomb is refused rather than expanded into memory.

import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import yauzl from 'yauzl';
import { bundleError } from '../errors.js';
import type { BundleDoc, BundleInfo } from './spec.js';

interface BundleLimits {
  /** Largest total of expanded file bytes. */
  maxBytes: number;
  maxFiles: number;
}

export async function readBundle(path: string, limits: BundleLimits): Promise<BundleDoc> {
  const info = await stat(path).catch(() => {
    throw bundleError(`bundle file does not exist: ${path}`);
  });
  const files = info.isDirectory() ? await readDirectory(path, limits) : await readZip(path, limits);
  return { info: bundleInfo(files), files: withoutBundleJson(files) };
}

function bundleInfo(files: Record<string, string>): BundleInfo {
  const text = files['bundle.json'];
  if (text === undefined) throw bundleError('bundle.json is missing: not an MLeap bundle');
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw bundleError('bundle.json is not valid JSON');
  }
  const field = (name: string) => (typeof raw[name] === 'string' ? (raw[name] as string) : '');
  if (!field('format')) throw bundleError('bundle.json has no "format"');
  const info: BundleInfo = {
    uid: field('uid'),
    name: field('name'),
    format: field('format'),
    version: field('version'),
    timestamp: field('timestamp'),
  };
  if (raw.meta !== undefined) info.meta = raw.meta;
  return info;
}

function withoutBundleJson(files: Record<string, string>): Record<string, string> {
  const { 'bundle.json': _, ...rest } = files;
  return rest;
}

/** Only the JSON files of a bundle are read: model.json, node.json, tree.json, bundle.json. */
function wanted(path: string): boolean {
  return path.endsWith('.json');
}

async function readDirectory(root: string, limits: BundleLimits): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  let count = 0;
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        await walk(full);
        continue;
      }
      if (!entry.isFile()) continue;
      const rel = relative(root, full).split(sep).join('/');
      if (!wanted(rel)) continue;
      if (++count > limits.maxFiles) throw bundleError(`bundle has more than ${limits.maxFiles} files`);
      bytes += (await stat(full)).size;
      if (bytes > limits.maxBytes) throw bundleError(`bundle is larger than ${limits.maxBytes} bytes`);
      files[rel] = await readFile(full, 'utf8');
    }
  };
  await walk(root);
  return files;
}

async function readZip(path: string, limits: BundleLimits): Promise<Record<string, string>> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(path, { lazyEntries: true, autoClose: true, validateEntrySizes: true }, (err, z) =>
      err || !z ? reject(bundleError(`bundle is not a readable zip file: ${err?.message ?? 'unknown error'}`)) : resolve(z),
    ),
  );
  return new Promise<Record<string, string>>((resolve, reject) => {
    const files: Record<string, string> = {};
    let count = 0;
    let bytes = 0;
    const fail = (error: unknown) => {
      zip.close();
      reject(error);
    };
    zip.on('error', (err: Error) => fail(bundleError(`bundle zip is corrupt: ${err.message}`)));
    zip.on('end', () => resolve(files));
    zip.on('entry', (entry: yauzl.Entry) => {
      const name = entry.fileName.replace(/^\.\//, '');
      if (name.endsWith('/') || !wanted(name)) return zip.readEntry();
      if (++count > limits.maxFiles) return fail(bundleError(`bundle has more than ${limits.maxFiles} files`));
      // Declared sizes are checked first; validateEntrySizes stops a stream that inflates past them.
      bytes += entry.uncompressedSize;
      if (bytes > limits.maxBytes) return fail(bundleError(`bundle expands to more than ${limits.maxBytes} bytes`));
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return fail(bundleError(`bundle entry ${name} cannot be read: ${err?.message ?? ''}`));
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('error', (e: Error) => fail(bundleError(`bundle entry ${name} is corrupt: ${e.message}`)));
        stream.on('end', () => {
          files[name] = Buffer.concat(chunks).toString('utf8');
          zip.readEntry();
        });
      });
    });
    zip.readEntry();
  });
}
