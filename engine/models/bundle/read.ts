// Reads an MLeap bundle (zip file or directory) into a BundleDoc, within limits, each named in
// its refusal: a zip's entry count (from its central directory, before any entry is read), a
// directory's entries met by the walk (it stops there), the JSON files read and their expanded
// bytes (a zip entry's declared size first, then what it inflates to), so a zip bomb or a huge
// tree is refused rather than expanded into memory or walked to its end. Links inside a
// directory bundle are not followed.

import { opendir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import yauzl from 'yauzl';
import { bundleError, isModelError } from '../errors.js';
import type { BundleDoc, BundleInfo } from './spec.js';

interface BundleLimits {
  /** MODEL_MAX_BUNDLE_BYTES: largest total of expanded JSON file bytes. */
  maxBytes: number;
  /** MODEL_MAX_BUNDLE_FILES: most JSON files read. */
  maxFiles: number;
  /** MODEL_MAX_ZIP_ENTRIES: most entries of any kind in a zip. */
  maxZipEntries: number;
  /** MODEL_MAX_DIRECTORY_ENTRIES: most entries of any kind a directory walk meets. */
  maxDirectoryEntries: number;
}

/** Reads the bundle at `path`; `signal` stops the reading (a load past its time limit). */
export async function readBundle(path: string, limits: BundleLimits, signal?: AbortSignal): Promise<BundleDoc> {
  const info = await stat(path).catch(() => {
    throw bundleError(`bundle file does not exist: ${path}`);
  });
  const files = info.isDirectory() ? await readDirectory(path, limits, signal) : await readZip(path, limits, signal);
  return { info: bundleInfo(files), files: withoutBundleJson(files) };
}

const tooManyFiles = (max: number) => bundleError(`bundle has more than ${max} files (MODEL_MAX_BUNDLE_FILES)`);

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

async function readDirectory(root: string, limits: BundleLimits, signal?: AbortSignal): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  let entries = 0;
  let count = 0;
  let bytes = 0;
  // Folders still to list; one listing open at a time, however deep the tree.
  const pending = [root];
  try {
    for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
      // Listed in batches (opendir), so a huge folder is stopped at the limit, not read whole first.
      for await (const entry of await opendir(dir, { bufferSize: 256 })) {
        if (++entries > limits.maxDirectoryEntries) throw bundleError(`bundle directory has more than ${limits.maxDirectoryEntries} entries (MODEL_MAX_DIRECTORY_ENTRIES)`);
        signal?.throwIfAborted();
        const full = join(dir, entry.name);
        if (entry.isDirectory()) pending.push(full);
        if (!entry.isFile()) continue;
        const rel = relative(root, full).split(sep).join('/');
        if (!wanted(rel)) continue;
        if (++count > limits.maxFiles) throw tooManyFiles(limits.maxFiles);
        bytes += (await stat(full)).size;
        if (bytes > limits.maxBytes) throw bundleError(`bundle is larger than ${limits.maxBytes} bytes (MODEL_MAX_BUNDLE_BYTES)`);
        files[rel] = await readFile(full, { encoding: 'utf8', signal });
      }
    }
  } catch (err) {
    if (isModelError(err) || signal?.aborted) throw err;
    throw bundleError(`bundle directory cannot be read (${(err as NodeJS.ErrnoException).code ?? 'unknown error'})`);
  }
  return files;
}

async function readZip(path: string, limits: BundleLimits, signal?: AbortSignal): Promise<Record<string, string>> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(path, { lazyEntries: true, autoClose: true, validateEntrySizes: true }, (err, z) =>
      err || !z ? reject(bundleError(`bundle is not a readable zip file: ${err?.message ?? 'unknown error'}`)) : resolve(z),
    ),
  );
  // The central directory's count, known before any entry is read.
  if (zip.entryCount > limits.maxZipEntries) {
    zip.close();
    throw bundleError(`bundle zip has ${zip.entryCount} entries, more than ${limits.maxZipEntries} (MODEL_MAX_ZIP_ENTRIES)`);
  }
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
      if (signal?.aborted) return fail(signal.reason);
      const name = entry.fileName.replace(/^\.\//, '');
      if (name.endsWith('/') || !wanted(name)) return zip.readEntry();
      if (++count > limits.maxFiles) return fail(tooManyFiles(limits.maxFiles));
      // Declared sizes are checked first; validateEntrySizes stops a stream that inflates past them.
      bytes += entry.uncompressedSize;
      if (bytes > limits.maxBytes) return fail(bundleError(`bundle expands to more than ${limits.maxBytes} bytes (MODEL_MAX_BUNDLE_BYTES)`));
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
