// The tenant's holds of S3 objects' blobs (engine/s3/blob-refs.ts) on the engine itself (real
// LMDB, real block files, security on), where a write is refused after its body was published:
// a PutObject or a CompleteMultipartUpload whose condition fails between its publication and its
// object write (a concurrent writer) releases the hold it took, unless an object names the blob
// or the tenant held it before; the blob API's delete against an object written meanwhile; and
// expiry of multipart uploads, every expired upload in one run.

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Principal } from '../dist/engine/auth/index.js';
import { loadConfig } from '../dist/engine/base/config.js';
import { S3_RELEASE_TOMBSTONE_MS, S3_UPLOAD_CLEANUP_PAGE } from '../dist/engine/base/limits.js';
import { Logger } from '../dist/engine/base/log.js';
import { pushAll } from '../dist/engine/cas/index.js';
import { Engine } from '../dist/engine/engine.js';
import { UPLOADS } from '../dist/engine/s3/records.js';
import { EMPTY_BLOB_ID, EMPTY_MD5 } from '../dist/engine/s3/s3-service.js';
import { refusal } from './helpers/engine-refusal.js';
import { seededBytes } from './helpers/http.js';
import { tempRoot } from './helpers/server.js';

let engine: Engine;
let root: string;
let config: ReturnType<typeof loadConfig>;

const caller = (tenant: string): Principal => ({ tenant, subject: 'robot', scopes: ['blob.read', 'blob.write', 'blob.delete'], roles: [] });
const META = { contentType: 'application/x-test', userMetadata: {} };
const EMPTY = { blobId: EMPTY_BLOB_ID, size: 0, etag: EMPTY_MD5, checksums: {} };


/** A PutObject's body published for the caller, as the listener does before the object write. */
async function publishBody(who: Principal, bytes: Buffer) {
  const ingest = await engine.s3.ingest(who, { declaredLength: bytes.length, contentType: 'application/octet-stream' }, {});
  await pushAll(ingest, [bytes]);
  // Read before the publication, as the listener does (the release protocol's tombstones judge it).
  const since = engine.clock.now();
  const result = await ingest.end();
  return { content: { blobId: result.blob.id, size: bytes.length, etag: result.md5!, checksums: {} }, tookHold: ingest.tookHold, since };
}

/** Whether the tenant holds the blob in the blob catalog (it is in its GET /api/v1/blobs). */
const holds = async (tenant: string, blobId: string) => (await engine.manifests.get(blobId, tenant)) !== undefined;

beforeAll(async () => {
  root = tempRoot();
  fs.mkdirSync(root, { recursive: true });
  config = loadConfig({
    SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2', SVC_SECURITY_ENABLED: 'true',
    SVC_DEV_SHARED_SECRET: 'a development secret of at least thirty-two bytes',
  });
  engine = await Engine.open(config, new Logger('silent'));
});

afterAll(async () => {
  await engine?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('a write refused after its body was published', () => {
  test('PutObject: If-None-Match: * and If-Match refused at the write release the hold the publication took; an object naming the blob, or a hold from before, keeps it', async () => {
    const who = caller('holds-put');
    await engine.s3.createBucket(who, 'race');
    // The concurrent writer's object is there: the body below was published after beforePut passed.
    await engine.s3.putObject(who, 'race', 'taken', EMPTY, META);

    const lost = seededBytes(300_000, 1);
    const first = await publishBody(who, lost);
    expect(await holds(who.tenant, first.content.blobId)).toBe(true);
    expect(await refusal(() => engine.s3.putObject(who, 'race', 'taken', first.content, META, { ifNoneMatch: '*' }, first.tookHold))).toBe('PreconditionFailed');
    expect(await holds(who.tenant, first.content.blobId)).toBe(false);
    expect(await engine.s3.index.refs.count(who.tenant, first.content.blobId)).toBe(0);
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([]);

    const second = await publishBody(who, seededBytes(200_000, 2));
    expect(await refusal(() => engine.s3.putObject(who, 'race', 'taken', second.content, META, { ifMatch: '"0123"' }, second.tookHold))).toBe('PreconditionFailed');
    expect(await holds(who.tenant, second.content.blobId)).toBe(false);

    // The same bytes named by an object of the tenant: the refused write leaves the hold.
    const named = await publishBody(who, seededBytes(100_000, 3));
    await engine.s3.putObject(who, 'race', 'named', named.content, META, undefined, named.tookHold);
    const again = await publishBody(who, seededBytes(100_000, 3));
    expect(await refusal(() => engine.s3.putObject(who, 'race', 'taken', again.content, META, { ifNoneMatch: '*' }, again.tookHold))).toBe('PreconditionFailed');
    expect(await holds(who.tenant, named.content.blobId)).toBe(true);
    expect(await engine.s3.index.refs.count(who.tenant, named.content.blobId)).toBe(1);

    // A blob the tenant held before (the blob API's upload): the refused write did not take the hold, and leaves it.
    const before = await publishBody(who, seededBytes(50_000, 4));
    const repeat = await publishBody(who, seededBytes(50_000, 4));
    expect(await refusal(() => engine.s3.putObject(who, 'race', 'taken', repeat.content, META, { ifNoneMatch: '*' }, repeat.tookHold))).toBe('PreconditionFailed');
    expect(await holds(who.tenant, before.content.blobId)).toBe(true);
  });

  test('CompleteMultipartUpload: If-None-Match: * refused at the write releases the hold of the blob it published, at once', async () => {
    const who = caller('holds-complete');
    await engine.s3.createBucket(who, 'race-mp');
    const { uploadId } = await engine.s3.createMultipart(who, 'race-mp', 'taken', META);
    const part = await engine.s3.uploadPart(who, 'race-mp', 'taken', uploadId, 1, { declaredLength: 400_000 });
    const bytes = seededBytes(400_000, 5);
    await pushAll(part.ingest, [bytes], (piece) => part.chunk(piece));
    const { etag } = await part.finish();
    await engine.s3.multipart.hashIdle(uploadId);
    // The concurrent writer's object: written after the Complete's own early checks.
    await engine.s3.putObject(who, 'race-mp', 'taken', EMPTY, META);
    expect(await refusal(() => engine.s3.completeMultipart(who, 'race-mp', 'taken', uploadId, [{ partNumber: 1, etag: `"${etag}"` }], { ifNoneMatch: '*' }))).toBe('PreconditionFailed');
    const { summaries } = await engine.manifests.page(100, undefined, who.tenant);
    expect(summaries).toEqual([]);
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([]);
    await engine.s3.abortMultipart(who, 'race-mp', 'taken', uploadId);
  });
});

describe('the blob API\'s delete and the objects\' writes', () => {
  test('a blob API delete cut short (its process died between its mark and its removal): the sweep ends the mark and leaves the hold', async () => {
    const who = caller('holds-cut-delete');
    const { content } = await publishBody(who, seededBytes(60_000, 11));
    // The removal never comes: as if the process died after the mark was committed.
    void engine.s3.index.refs.removeUnlessNamed(who.tenant, content.blobId, engine.clock.now(), () => new Promise<boolean>(() => {}));
    for (let i = 0; i < 100 && (await engine.s3.index.refs.pendingReleases()).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([{ tenant: who.tenant, blobId: content.blobId, deleting: true }]);
    await engine.s3.sweepReleases();
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([]);
    // Still the tenant's: a DELETE without an answer may have happened or not; the catalog says which.
    expect(await holds(who.tenant, content.blobId)).toBe(true);
  });

  test('an object write while a blob API delete removes the hold meets the mark (503 SlowDown): no object names a blob whose hold went', async () => {
    const who = caller('holds-delete');
    await engine.s3.createBucket(who, 'deleting');
    const bytes = seededBytes(80_000, 7);
    const { content } = await publishBody(who, bytes);
    let during = '';
    const outcome = await engine.s3.index.refs.removeUnlessNamed(who.tenant, content.blobId, engine.clock.now(), async () => {
      // A PutObject of the same bytes between the delete's check and its removal: its publication finds the hold.
      const racing = await publishBody(who, bytes);
      expect(racing.tookHold).toBe(false);
      during = await refusal(() => engine.s3.putObject(who, 'deleting', 'k', racing.content, META, undefined, racing.tookHold));
      return engine.manifests.remove(content.blobId, who.tenant);
    });
    expect(outcome).toEqual({ removed: true });
    expect(during).toBe('slow_down');
    expect(await holds(who.tenant, content.blobId)).toBe(false);
    expect(await refusal(() => engine.s3.getObject(who, 'deleting', 'k'))).toBe('NoSuchKey');
    expect(await engine.s3.index.refs.count(who.tenant, content.blobId)).toBe(0);
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([]);
    // The client's retry publishes the blob anew and names it; the delete is then refused with the count.
    const retried = await publishBody(who, bytes);
    await engine.s3.putObject(who, 'deleting', 'k', retried.content, META, undefined, retried.tookHold);
    expect(await engine.s3.index.refs.removeUnlessNamed(who.tenant, content.blobId, engine.clock.now(), () => engine.manifests.remove(content.blobId, who.tenant))).toEqual({ named: 1 });
    expect(await holds(who.tenant, content.blobId)).toBe(true);
  });
});

/** A tenant's bucket holding object `a`: `size` seeded bytes, published and written. */
async function oneObject(tenant: string, bucket: string, size: number, seed: number) {
  const who = caller(tenant);
  await engine.s3.createBucket(who, bucket);
  const bytes = seededBytes(size, seed);
  const first = await publishBody(who, bytes);
  await engine.s3.putObject(who, bucket, 'a', first.content, META, undefined, first.tookHold, first.since);
  return { who, bytes, first };
}

describe('a release that ended between a publication and its object write', () => {
  test('the write meets the tombstone (503 SlowDown), not a blob whose hold went; its retry publishes anew and names a held blob', async () => {
    const { who, bytes, first } = await oneObject('holds-window', 'window', 120_000, 21);
    const blobId = first.content.blobId;
    // A PutObject of the same bytes publishes: it finds the tenant's hold (the object above keeps it).
    const late = await publishBody(who, bytes);
    expect(late.tookHold).toBe(false);
    // Before its object write, the only object naming the blob goes and its release runs to its end: the hold is removed.
    await engine.s3.deleteObject(who, 'window', 'a');
    expect(await holds(who.tenant, blobId)).toBe(false);
    expect(await engine.s3.index.refs.pendingReleases()).toEqual([]);
    // The late write: refused (without the tombstone it was written, naming a blob its tenant no longer held).
    expect(await refusal(() => engine.s3.putObject(who, 'window', 'b', late.content, META, undefined, late.tookHold, late.since))).toBe('slow_down');
    expect(await refusal(() => engine.s3.getObject(who, 'window', 'b'))).toBe('NoSuchKey');
    expect(await engine.s3.index.refs.count(who.tenant, blobId)).toBe(0);
    // The client's retry: published after the removal, it takes the hold again and names the blob.
    const retried = await publishBody(who, bytes);
    expect(retried.tookHold).toBe(true);
    await engine.s3.putObject(who, 'window', 'b', retried.content, META, undefined, retried.tookHold, retried.since);
    expect(await holds(who.tenant, blobId)).toBe(true);
    expect(await engine.s3.index.refs.count(who.tenant, blobId)).toBe(1);
    expect((await engine.s3.getObject(who, 'window', 'b')).manifest?.id).toBe(blobId);
  });

  test('tombstones go after S3_RELEASE_TOMBSTONE_MS; a publication older than that is refused (its tombstone may be gone)', async () => {
    const { who, bytes, first } = await oneObject('holds-tombstones', 'tombs', 90_000, 22);
    await engine.s3.deleteObject(who, 'tombs', 'a');
    const now = engine.clock.now();
    expect(await engine.s3.index.refs.pruneTombstones(now)).toBe(0);
    // Every tombstone of this engine is older than that moment plus the horizon.
    expect(await engine.s3.index.refs.pruneTombstones(now + S3_RELEASE_TOMBSTONE_MS + 1)).toBeGreaterThanOrEqual(1);
    expect(await engine.s3.index.refs.pruneTombstones(now + S3_RELEASE_TOMBSTONE_MS + 1)).toBe(0);
    const stale = await publishBody(who, bytes);
    expect(await refusal(() => engine.s3.putObject(who, 'tombs', 'b', stale.content, META, undefined, stale.tookHold, stale.since - S3_RELEASE_TOMBSTONE_MS - 1))).toBe('slow_down');
    const fresh = await publishBody(who, bytes);
    await engine.s3.putObject(who, 'tombs', 'b', fresh.content, META, undefined, fresh.tookHold, fresh.since);
    expect(await holds(who.tenant, fresh.content.blobId)).toBe(true);
  });
});

describe('expiry of multipart uploads', () => {
  test('one cleanup run aborts every expired upload (deleting while it walks the uploads skips none)', async () => {
    const who = caller('holds-expiry');
    await engine.s3.createBucket(who, 'expiring');
    const ids: string[] = [];
    for (const key of ['a', 'b', 'c', 'd']) ids.push((await engine.s3.createMultipart(who, 'expiring', key, META)).uploadId);
    const open = async () => (await engine.s3.listUploads(who, 'expiring', {})).items.length;
    expect(await open()).toBe(4);
    const all = (await engine.units.range(UPLOADS)).length;
    const { expired } = await engine.s3.multipart.cleanup(engine.clock.now() + config.uploads.ttlMs + 1);
    expect(expired).toBe(all);
    expect(await open()).toBe(0);
  });

  test('past a page of uploads, expired ones mixed with live ones in key order: the expired all go, the live all stay', async () => {
    const who = caller('holds-expiry-pages');
    await engine.s3.createBucket(who, 'expiring-pages');
    const key = (n: number) => `k${String(n).padStart(4, '0')}`;
    const old = Array.from({ length: S3_UPLOAD_CLEANUP_PAGE + 60 }, (_, i) => key(2 * i));
    for (const k of old) await engine.s3.createMultipart(who, 'expiring-pages', k, META);
    const cut = engine.clock.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const live = Array.from({ length: S3_UPLOAD_CLEANUP_PAGE + 10 }, (_, i) => key(2 * i + 1));
    for (const k of live) await engine.s3.createMultipart(who, 'expiring-pages', k, META);
    const { expired } = await engine.s3.multipart.cleanup(cut + config.uploads.ttlMs);
    expect(expired).toBe(old.length);
    const left: string[] = [];
    let keyMarker: string | undefined;
    for (;;) {
      const page = await engine.s3.listUploads(who, 'expiring-pages', { ...(keyMarker ? { keyMarker } : {}), maxUploads: 1000 });
      for (const item of page.items) if (item.key !== undefined) left.push(item.key);
      if (!page.truncated) break;
      keyMarker = page.nextKeyMarker;
    }
    expect(left).toEqual(live);
  });
});
