// s3rver 3.7.1 (test/s3-preconditions.test.ts records its other quirks) writes a PUT's object
// file in place (truncated, then written) and answers once the body has passed through its hash,
// before the file write is done. So a GET right after a PUT's answer can read the file empty or
// half written, and a second PUT of the key can mix its bytes with the first's: a test on
// s3rver then fails by chance (seen 2 in 2,000 PUT-then-GET rounds under CPU load). S3 answers a
// PUT once the object is stored, and replaces an object whole. Imported for its effect, before
// any S3rver starts (vitest.config.ts setupFiles, test/helpers/s3rver-child.mjs): every s3rver
// of the process writes to a file of its own, waits for it, and renames it into place.
//
// What stays: a GET stats the file before it opens it, so one that an overwrite of another
// length lands in between answers the old length with the new bytes. A read beside a write of
// the same key can still be torn; svc's one S3-only node orders its own (s3-only/objects.ts).
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';

const require = createRequire(import.meta.url);
const FilesystemStore = require('s3rver/lib/stores/filesystem.js');

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await mkdir(path.dirname(objectPath), { recursive: true });
  // Not a name s3rver lists: its object files end in "._S3rver_object".
  const temp = `${objectPath}.${randomUUID()}.tmp`;
  const md5 = createHash('md5');
  let size = 0;
  const measure = new Transform({
    transform(chunk, _encoding, done) {
      md5.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    await pipeline(Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content, measure, createWriteStream(temp));
    await rename(temp, objectPath);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  const hex = md5.digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, hex);
  return { size, md5: hex };
};
