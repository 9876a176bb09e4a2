// S3 multipart uploads on the store (engine/s3/multipart-uploads.ts), on the engine itself (real
// LMDB, real block files, security on with a tenant policy): parts as unlisted content in any
// order and in parallel, a part replaced, Complete as a manifest of the parts' blocks (nothing
// copied) whose id is the SHA-256 of the concatenation, the object's hash advanced between parts
// (Complete reads only what is not hashed yet, counted at the block store), S3's refusals, abort
// and expiry, the tenant gate, and the hash going on after a restart and on another node
// (PostgreSQL's units store: two store instances on one database); UploadPartCopy's parts (the
// source's blocks named when the bytes fall on its block boundaries, else ingested).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../dist/engine/base/config.js';
import { Engine } from '../dist/engine/engine.js';
import { Logger } from '../dist/engine/base/log.js';
import { pushAll } from '../dist/engine/cas/index.js';
import { type UnitStore, table } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { S3Index } from '../dist/engine/s3/s3-index.js';
import { multipartEtag } from '../dist/engine/s3/multipart.js';
import { MultipartUploads } from '../dist/engine/s3/multipart-uploads.js';
import { loadRunningSha256, newRunningSha256 } from '../dist/engine/s3/running-sha256.js';
import { createSHA256 } from 'hash-wasm';
import type { S3Owner } from '../dist/engine/s3/records.js';
import { S3_MIN_PART_BYTES } from '../dist/engine/base/limits.js';
import { contentIdOf } from '../dist/engine/base/content-id.js';
import { refusal } from './helpers/engine-refusal.js';
import { seededBytes } from './helpers/http.js';
import { startPostgres } from './helpers/postgres.js';
import { tempRoot } from './helpers/server.js';

const MiB = 1024 * 1024;
const POLICY = {
  tenants: {
    'mp-quota': { quotaBytes: 12 * MiB },
    'mp-object': { maxObjectBytes: 8 * MiB },
  },
};

let engine: Engine;
let root: string;
let config: ReturnType<typeof loadConfig>;
/** Block reads of the multipart service (the parts' bytes read back to hash them). */
let blockReads = 0;

const owner = (tenant = 'mp'): S3Owner => ({ tenant, subject: 'alice' });

/** The multipart service on `units` (the engine's own by default), reading blocks through a counter. */
function service(units: UnitStore = engine.units) {
  const index = new S3Index(units, engine.clock, 'us-east-1');
  const uploads = new MultipartUploads({
    index, units, gate: engine.gate, manifests: engine.manifests, stats: engine.stats, log: engine.log, clock: engine.clock,
    startIngest: (options) => engine.ingests.start(options),
    readBlock: (hex, size) => {
      blockReads++;
      return engine.blocks.read(hex, size);
    },
    readRange: (manifest, start, end) => engine.reader.range(manifest, start, end),
    tenantBlobs: true,
    config: { ttlMs: config.uploads.ttlMs, cleanupIntervalMs: config.uploads.cleanupIntervalMs },
  });
  return { index, uploads };
}

type Service = ReturnType<typeof service>;


/** One UploadPart: the body fed in 256 KiB pieces as the edge does (each seen by `chunk` first). */
async function sendPart(s: Service, who: S3Owner, bucket: string, key: string, uploadId: string, partNumber: number, bytes: Buffer, extra: { contentMd5?: string } = {}) {
  const part = await s.uploads.uploadPart(who, bucket, key, uploadId, partNumber, { declaredLength: bytes.length, ...extra });
  const pieces = function* () {
    for (let at = 0; at < bytes.length; at += 256 * 1024) yield bytes.subarray(at, at + 256 * 1024);
  };
  try {
    await pushAll(part.ingest, pieces(), (piece) => part.chunk(piece));
  } catch (err) {
    part.abort();
    throw err;
  }
  return part.finish();
}

/** A bucket and an upload of `key` in it. */
async function newUpload(s: Service, who: S3Owner, bucket: string, key = 'object.bin') {
  await s.index.buckets.create(who, bucket);
  const { uploadId } = await s.uploads.create(who, bucket, key, { contentType: 'application/x-test', userMetadata: {} });
  return { bucket, key, uploadId };
}

const sha256 = (...parts: Buffer[]) => {
  const hash = createHash('sha256');
  for (const p of parts) hash.update(p);
  return hash.digest('hex');
};

/** The blob's bytes through the engine's reader. */
async function readBlob(blobId: string, tenant: string): Promise<Buffer> {
  const manifest = await engine.manifests.get(blobId, tenant);
  expect(manifest).toBeDefined();
  const pieces: Buffer[] = [];
  for await (const piece of engine.reader.range(manifest!, 0, manifest!.record.size)) pieces.push(Buffer.from(piece));
  return Buffer.concat(pieces);
}

/** Every digest a BlockRoots source yields, hex. */
async function rootsOf(s: Service): Promise<Set<string>> {
  const out = new Set<string>();
  for await (const d of s.uploads.blockRoots().digests()) out.add(d.toString('hex'));
  return out;
}

async function openEngine() {
  return Engine.open(config, new Logger('silent'));
}

beforeAll(async () => {
  root = tempRoot();
  const policyFile = path.join(root, 'policy.json');
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  config = loadConfig({
    SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2', SVC_SECURITY_ENABLED: 'true',
    SVC_DEV_SHARED_SECRET: 'a development secret of at least thirty-two bytes', SVC_TENANT_POLICY_FILE: policyFile,
  });
  engine = await openEngine();
});

afterAll(async () => {
  await engine?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('multipart uploads on the store', () => {
  test('parts out of order, in parallel and one replaced: Complete is the SHA-256 of the concatenation, its blocks the parts\' blocks, its bytes read back exactly', async () => {
    const s = service();
    const who = owner();
    const { bucket, key, uploadId } = await newUpload(s, who, 'mp-order');
    const p = [seededBytes(S3_MIN_PART_BYTES, 11), seededBytes(S3_MIN_PART_BYTES + 12_345, 12), seededBytes(S3_MIN_PART_BYTES, 13), seededBytes(700_001, 14)];
    const replacement = seededBytes(S3_MIN_PART_BYTES + 3, 15);
    const e3 = await sendPart(s, who, bucket, key, uploadId, 3, p[2]!);
    const [e1, , e4] = await Promise.all([1, 2, 4].map((n) => sendPart(s, who, bucket, key, uploadId, n, p[n - 1]!)));
    const e2 = await sendPart(s, who, bucket, key, uploadId, 2, replacement);
    expect(e3.etag).toBe(createHash('md5').update(p[2]!).digest('hex'));
    expect(e2.etag).toBe(createHash('md5').update(replacement).digest('hex'));
    const { parts } = await s.uploads.listParts(who.tenant, bucket, key, uploadId);
    expect(parts.map((x) => [x.partNumber, x.size])).toEqual([[1, p[0]!.length], [2, replacement.length], [3, p[2]!.length], [4, p[3]!.length]]);
    const partRefs = Buffer.concat(parts.map((x) => x.content.blocks!.refs));

    const etags = [e1!, e2, e3, e4!].map((e) => e.etag);
    const done = await s.uploads.complete(who, bucket, key, uploadId, etags.map((etag, i) => ({ partNumber: i + 1, etag: `"${etag}"` })));
    const whole = Buffer.concat([p[0]!, replacement, p[2]!, p[3]!]);
    expect(done.blobId).toBe(`sha-256:${sha256(whole)}:${whole.length}`);
    expect(done.etag).toBe(multipartEtag(etags));
    expect(done.record.parts).toEqual([p[0]!.length, replacement.length, p[2]!.length, p[3]!.length]);
    // No block copied: the manifest's references are the parts' own, in order.
    const manifest = await engine.manifests.get(done.blobId, who.tenant);
    expect(manifest!.record.refs.equals(partRefs)).toBe(true);
    expect((await readBlob(done.blobId, who.tenant)).equals(whole)).toBe(true);
    expect((await engine.blobs.verify(contentIdOf(done.blobId)!, who.tenant)).verified).toBe(true);
    // The object names the blob; the upload is gone, and so are its parts' roots.
    expect((await s.index.objects.get(who.tenant, bucket, key)).blobId).toBe(done.blobId);
    expect(await refusal(() => s.uploads.listParts(who.tenant, bucket, key, uploadId))).toBe('NoSuchUpload');
    const roots = await rootsOf(s);
    for (let at = 0; at < partRefs.length; at += 40) expect(roots.has(partRefs.toString('hex', at, at + 32))).toBe(false);
  });

  test('UploadPartCopy: a whole multipart object and a range on its block boundaries name its blocks (nothing written), a range that cuts a block is ingested; the parts hashed as they are read', async () => {
    const s = service();
    const who = owner();
    const src = await newUpload(s, who, 'mp-copy-src');
    const sp = [seededBytes(S3_MIN_PART_BYTES, 31), seededBytes(MiB + 77, 32)];
    const se = [];
    for (let n = 1; n <= 2; n++) se.push((await sendPart(s, who, src.bucket, src.key, src.uploadId, n, sp[n - 1]!)).etag);
    const source = await s.uploads.complete(who, src.bucket, src.key, src.uploadId, se.map((etag, i) => ({ partNumber: i + 1, etag })));
    const record = await s.index.objects.get(who.tenant, src.bucket, src.key);
    const manifest = (await engine.manifests.get(source.blobId, who.tenant))!;
    const all = Buffer.concat(sp);
    const from = (range?: { first: number; last: number }) => ({
      blobId: record.blobId, size: record.size, etag: record.etag, multipart: true, checksums: record.checksums, manifest, ...(range ? { range } : {}),
    });
    const dst = await newUpload(s, who, 'mp-copy-dst');
    blockReads = 0;
    const cut = all.subarray(1000, 1000 + S3_MIN_PART_BYTES);
    const parts = [
      await s.uploads.copyPart(who, dst.bucket, dst.key, dst.uploadId, 1, from()),
      await s.uploads.copyPart(who, dst.bucket, dst.key, dst.uploadId, 2, from({ first: 0, last: S3_MIN_PART_BYTES - 1 })),
      await s.uploads.copyPart(who, dst.bucket, dst.key, dst.uploadId, 3, from({ first: 1000, last: 1000 + S3_MIN_PART_BYTES - 1 })),
    ];
    expect(parts.map((p) => p.etag)).toEqual([all, sp[0]!, cut].map((b) => createHash('md5').update(b).digest('hex')));
    const { parts: listed } = await s.uploads.listParts(who.tenant, dst.bucket, dst.key, dst.uploadId);
    const refs = manifest.record.refs;
    // Part 1: the source's blocks; part 2: those of the source's first part (a prefix of them); part 3: its own.
    expect(listed[0]!.content.blocks!.refs.equals(refs)).toBe(true);
    expect(refs.subarray(0, listed[1]!.content.blocks!.refs.length).equals(listed[1]!.content.blocks!.refs)).toBe(true);
    expect(listed[1]!.content.blocks!.refs.length).toBeLessThan(refs.length);
    expect(listed.map((p) => p.content.blobId)).toEqual([all, sp[0]!, cut].map((b) => `sha-256:${sha256(b)}:${b.length}`));
    await s.uploads.hashIdle(dst.uploadId);
    const done = await s.uploads.complete(who, dst.bucket, dst.key, dst.uploadId, parts.map((p, i) => ({ partNumber: i + 1, etag: p.etag })));
    // Each part went into the object's hash as it was read: nothing read back from the block store.
    expect(done.partsHashedAtComplete).toBe(0);
    expect(blockReads).toBe(0);
    const whole = Buffer.concat([all, sp[0]!, cut]);
    expect(done.blobId).toBe(`sha-256:${sha256(whole)}:${whole.length}`);
    expect((await readBlob(done.blobId, who.tenant)).equals(whole)).toBe(true);
    const { uploadId } = await s.uploads.create(who, dst.bucket, 'past-the-end.bin', { userMetadata: {} });
    expect(await refusal(() => s.uploads.copyPart(who, dst.bucket, 'past-the-end.bin', uploadId, 1, from({ first: 0, last: all.length })))).toBe('InvalidRange');
    await s.uploads.abort(who.tenant, dst.bucket, 'past-the-end.bin', uploadId);
  });

  test('Complete reads only the parts not hashed yet: none after parts in order, the early ones once the gap closes', async () => {
    const s = service();
    const who = owner();
    const p = [seededBytes(S3_MIN_PART_BYTES, 21), seededBytes(S3_MIN_PART_BYTES, 22), seededBytes(1_000_000, 23)];
    // In order: each part is hashed as it streams; nothing is read back, at any time.
    const a = await newUpload(s, who, 'mp-reads-a');
    blockReads = 0;
    const ea = [];
    for (let n = 1; n <= 3; n++) ea.push((await sendPart(s, who, a.bucket, a.key, a.uploadId, n, p[n - 1]!)).etag);
    await s.uploads.hashIdle(a.uploadId);
    const doneA = await s.uploads.complete(who, a.bucket, a.key, a.uploadId, ea.map((etag, i) => ({ partNumber: i + 1, etag })));
    expect(doneA.partsHashedAtComplete).toBe(0);
    expect(blockReads).toBe(0);
    expect(doneA.blobId).toBe(`sha-256:${sha256(...p)}:${p[0]!.length * 2 + p[2]!.length}`);

    // Parts 3 and 2 first, then 1: once 1 is in, 2 and 3 are read back (in the background), once.
    const b = await newUpload(s, who, 'mp-reads-b');
    const eb: string[] = [];
    eb[2] = (await sendPart(s, who, b.bucket, b.key, b.uploadId, 3, p[2]!)).etag;
    eb[1] = (await sendPart(s, who, b.bucket, b.key, b.uploadId, 2, p[1]!)).etag;
    await s.uploads.hashIdle(b.uploadId);
    expect(blockReads).toBe(0);
    eb[0] = (await sendPart(s, who, b.bucket, b.key, b.uploadId, 1, p[0]!)).etag;
    await s.uploads.hashIdle(b.uploadId);
    const readBack = blockReads;
    expect(readBack).toBeGreaterThan(0);
    const doneB = await s.uploads.complete(who, b.bucket, b.key, b.uploadId, eb.map((etag, i) => ({ partNumber: i + 1, etag })));
    expect(doneB.partsHashedAtComplete).toBe(0);
    expect(blockReads).toBe(readBack);
    // Same bytes, same blob: the second Complete found it published.
    expect(doneB.blobId).toBe(doneA.blobId);
    expect(doneB.existed).toBe(true);

    // A list with a gap (parts 1 and 3): what follows the gap is read at Complete.
    const c = await newUpload(s, who, 'mp-reads-c');
    const c1 = await sendPart(s, who, c.bucket, c.key, c.uploadId, 1, p[0]!);
    const c3 = await sendPart(s, who, c.bucket, c.key, c.uploadId, 3, p[2]!);
    await s.uploads.hashIdle(c.uploadId);
    const doneC = await s.uploads.complete(who, c.bucket, c.key, c.uploadId, [{ partNumber: 1, etag: c1.etag }, { partNumber: 3, etag: c3.etag }]);
    expect(doneC.partsHashedAtComplete).toBe(1);
    expect(doneC.blobId).toBe(`sha-256:${sha256(p[0]!, p[2]!)}:${p[0]!.length + p[2]!.length}`);
    expect((await readBlob(doneC.blobId, who.tenant)).equals(Buffer.concat([p[0]!, p[2]!]))).toBe(true);
  });

  test('S3\'s refusals: EntityTooSmall, InvalidPart, BadDigest, NoSuchUpload', async () => {
    const s = service();
    const who = owner();
    const { bucket, key, uploadId } = await newUpload(s, who, 'mp-refusals');
    const small = seededBytes(1_000_000, 31);
    const e1 = await sendPart(s, who, bucket, key, uploadId, 1, small);
    const e2 = await sendPart(s, who, bucket, key, uploadId, 2, small);
    expect(await refusal(() => s.uploads.complete(who, bucket, key, uploadId, [{ partNumber: 1, etag: e1.etag }, { partNumber: 2, etag: e2.etag }]))).toBe('EntityTooSmall');
    expect(await refusal(() => s.uploads.complete(who, bucket, key, uploadId, [{ partNumber: 1, etag: 'ab'.repeat(16) }]))).toBe('InvalidPart');
    expect(await refusal(() => s.uploads.complete(who, bucket, key, uploadId, [{ partNumber: 1, etag: e1.etag }, { partNumber: 5, etag: e1.etag }]))).toBe('InvalidPart');
    const wrongMd5 = createHash('md5').update('something else').digest('base64');
    expect(await refusal(() => sendPart(s, who, bucket, key, uploadId, 3, small, { contentMd5: wrongMd5 }))).toBe('BadDigest');
    expect((await s.uploads.listParts(who.tenant, bucket, key, uploadId)).parts.map((x) => x.partNumber)).toEqual([1, 2]);
    // A single part (the last may be small) completes.
    const done = await s.uploads.complete(who, bucket, key, uploadId, [{ partNumber: 1, etag: e1.etag }]);
    expect(done.blobId).toBe(`sha-256:${sha256(small)}:${small.length}`);
    expect(await refusal(() => sendPart(s, who, bucket, key, uploadId, 1, small))).toBe('NoSuchUpload');
  });

  test('abort and expiry release the parts: their blocks are no longer roots, the hash marks go', async () => {
    const s = service();
    const who = owner();
    const marks = table<unknown, [string, number]>('s3_part_hash_marks');
    const countMarks = async (uploadId: string) => (await engine.units.range(marks, { start: [uploadId, 0], end: [uploadId, 10_001] })).length;
    const a = await newUpload(s, who, 'mp-abort');
    await sendPart(s, who, a.bucket, a.key, a.uploadId, 1, seededBytes(2_000_000, 41));
    await sendPart(s, who, a.bucket, a.key, a.uploadId, 2, seededBytes(2_000_000, 42));
    await s.uploads.hashIdle(a.uploadId);
    const partRefs = (await s.uploads.listParts(who.tenant, a.bucket, a.key, a.uploadId)).parts.map((x) => x.content.blocks!.refs.toString('hex', 0, 32));
    const before = await rootsOf(s);
    for (const hex of partRefs) expect(before.has(hex)).toBe(true);
    expect(await countMarks(a.uploadId)).toBe(2);
    await s.uploads.abort(who.tenant, a.bucket, a.key, a.uploadId);
    const after = await rootsOf(s);
    for (const hex of partRefs) expect(after.has(hex)).toBe(false);
    expect(await countMarks(a.uploadId)).toBe(0);
    expect(await refusal(() => s.uploads.listParts(who.tenant, a.bucket, a.key, a.uploadId))).toBe('NoSuchUpload');

    const b = await newUpload(s, who, 'mp-expiry');
    await sendPart(s, who, b.bucket, b.key, b.uploadId, 1, seededBytes(1_000_000, 43));
    await s.uploads.hashIdle(b.uploadId);
    expect((await s.uploads.cleanup()).expired).toBe(0);
    expect((await s.uploads.cleanup(engine.clock.now() + config.uploads.ttlMs + 1)).expired).toBeGreaterThanOrEqual(1);
    expect(await refusal(() => s.uploads.listParts(who.tenant, b.bucket, b.key, b.uploadId))).toBe('NoSuchUpload');
    expect(await countMarks(b.uploadId)).toBe(0);
  });

  test('the tenant gate: a part past the quota (507) or taking the upload past the object limit (413) is refused before any byte', async () => {
    const s = service();
    const q = owner('mp-quota');
    const a = await newUpload(s, q, 'mp-quota-bucket');
    const part = seededBytes(S3_MIN_PART_BYTES, 51);
    await sendPart(s, q, a.bucket, a.key, a.uploadId, 1, part);
    await sendPart(s, q, a.bucket, a.key, a.uploadId, 2, part);
    // 15 MiB would not fit the 12 MiB quota: refused when the part starts.
    expect(await refusal(() => s.uploads.uploadPart(q, a.bucket, a.key, a.uploadId, 3, { declaredLength: part.length }))).toBe('tenant_storage_quota_exceeded');
    // Sending part 2 again replaces it: the running total stays 10 MiB.
    await sendPart(s, q, a.bucket, a.key, a.uploadId, 2, part);

    const o = owner('mp-object');
    const b = await newUpload(s, o, 'mp-object-bucket');
    await sendPart(s, o, b.bucket, b.key, b.uploadId, 1, part);
    expect(await refusal(() => s.uploads.uploadPart(o, b.bucket, b.key, b.uploadId, 2, { declaredLength: part.length }))).toBe('tenant_object_limit_exceeded');
  });

  test('a restart between parts: the hash goes on from its saved state (nothing read back), and a lost state is recomputed from the blocks', async () => {
    let s = service();
    const who = owner();
    const p = [seededBytes(S3_MIN_PART_BYTES, 61), seededBytes(S3_MIN_PART_BYTES, 62), seededBytes(123_457, 63)];
    const a = await newUpload(s, who, 'mp-restart');
    const b = await newUpload(s, who, 'mp-lost');
    const ea = [(await sendPart(s, who, a.bucket, a.key, a.uploadId, 1, p[0]!)).etag];
    const eb = [(await sendPart(s, who, b.bucket, b.key, b.uploadId, 1, p[0]!)).etag];
    await s.uploads.hashIdle(a.uploadId);
    await s.uploads.hashIdle(b.uploadId);
    await engine.close();
    engine = await openEngine();
    s = service();
    blockReads = 0;
    ea.push((await sendPart(s, who, a.bucket, a.key, a.uploadId, 2, p[1]!)).etag, (await sendPart(s, who, a.bucket, a.key, a.uploadId, 3, p[2]!)).etag);
    await s.uploads.hashIdle(a.uploadId);
    const doneA = await s.uploads.complete(who, a.bucket, a.key, a.uploadId, ea.map((etag, i) => ({ partNumber: i + 1, etag })));
    expect(blockReads).toBe(0);
    expect(doneA.partsHashedAtComplete).toBe(0);
    expect(doneA.blobId).toBe(`sha-256:${sha256(...p)}:${p[0]!.length * 2 + p[2]!.length}`);

    // The marks of the other upload lost: the next part's advance recomputes them from the
    // blocks (part 1 read back, part 2 too: it could not be hashed as it streamed); lost again,
    // Complete hashes every part from its blocks.
    await s.uploads.hashes.drop(b.uploadId);
    eb.push((await sendPart(s, who, b.bucket, b.key, b.uploadId, 2, p[1]!)).etag);
    await s.uploads.hashIdle(b.uploadId);
    expect(blockReads).toBeGreaterThan(0);
    await s.uploads.hashes.drop(b.uploadId);
    const doneB = await s.uploads.complete(who, b.bucket, b.key, b.uploadId, eb.map((etag, i) => ({ partNumber: i + 1, etag })));
    expect(doneB.partsHashedAtComplete).toBe(2);
    expect(doneB.blobId).toBe(`sha-256:${sha256(p[0]!, p[1]!)}:${p[0]!.length * 2}`);
  });
});

describe('a saved SHA-256 state', () => {
  test('saved, loaded in a fresh hash and continued, either implementation gives node:crypto\'s digest; an unknown one is lost', async () => {
    const [a, b] = [seededBytes(100_003, 81), seededBytes(77_777, 82)];
    const want = sha256(a, b);
    const own = await newRunningSha256();
    own.update(a);
    const resumed = await loadRunningSha256(own.save());
    resumed!.update(b);
    expect(resumed!.hex()).toBe(want);
    // hash-wasm's state (a node without the native pair) loads anywhere.
    const wasm = await createSHA256();
    wasm.init();
    wasm.update(a);
    const fromWasm = await loadRunningSha256({ impl: 'hash-wasm-sha256-v4', state: Buffer.from(wasm.save()) });
    fromWasm!.update(b);
    expect(fromWasm!.hex()).toBe(want);
    fromWasm!.update(a);
    expect(fromWasm!.hex()).toBe(sha256(a, b, a));
    expect(await loadRunningSha256({ impl: 'some-other-v1', state: Buffer.alloc(112) })).toBeUndefined();
  });
});

describe('on PostgreSQL\'s units store: a part on one node, the next on another', () => {
  let nodes: [UnitStore, UnitStore] | undefined;
  let close: () => Promise<void> = async () => {};
  let skip: string | undefined;

  beforeAll(async () => {
    const server = await startPostgres();
    if ('skip' in server) {
      skip = server.skip;
      return;
    }
    const url = await server.createDatabase('s3multipart');
    const catalogs = await Promise.all([PgBlobCatalog.open(url, { poolSize: 4 }), PgBlobCatalog.open(url, { poolSize: 4 })]);
    nodes = [catalogs[0].unitStore(), catalogs[1].unitStore()];
    close = async () => {
      await Promise.all(catalogs.map((c) => c.unitStore().close()));
      await Promise.all(catalogs.map((c) => c.close()));
      await server.stop();
    };
  }, 120_000);

  afterAll(() => close());

  test('the second node continues the first one\'s hash as its part streams; Complete on either reads nothing back', async (ctx) => {
    if (!nodes) return ctx.skip(skip);
    const [one, two] = [service(nodes[0]), service(nodes[1])];
    const who = owner();
    const p = [seededBytes(S3_MIN_PART_BYTES, 71), seededBytes(S3_MIN_PART_BYTES, 72), seededBytes(999_999, 73)];
    const { bucket, key, uploadId } = await newUpload(one, who, 'mp-pg-nodes');
    const etags = [(await sendPart(one, who, bucket, key, uploadId, 1, p[0]!)).etag];
    await one.uploads.hashIdle(uploadId);
    blockReads = 0;
    etags.push((await sendPart(two, who, bucket, key, uploadId, 2, p[1]!)).etag);
    etags.push((await sendPart(one, who, bucket, key, uploadId, 3, p[2]!)).etag);
    await one.uploads.hashIdle(uploadId);
    await two.uploads.hashIdle(uploadId);
    const done = await two.uploads.complete(who, bucket, key, uploadId, etags.map((etag, i) => ({ partNumber: i + 1, etag })));
    expect(blockReads).toBe(0);
    expect(done.partsHashedAtComplete).toBe(0);
    expect(done.blobId).toBe(`sha-256:${sha256(...p)}:${p[0]!.length * 2 + p[2]!.length}`);
    expect((await readBlob(done.blobId, who.tenant)).equals(Buffer.concat(p))).toBe(true);
  });
});
