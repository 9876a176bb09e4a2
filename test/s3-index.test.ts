// The S3 index (engine/s3: buckets, objects, listing, multipart records, blob counts) on both
// units stores: the node's LMDB and PostgreSQL (two store instances on one database: two nodes).
// Every S3 refusal of the index, listing against a brute-force model of S3's semantics on random
// key sets, concurrent writes of one key, the tenants' blob counts, multipart Complete and Abort.
import fs from 'node:fs';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CatalogEnv, LmdbUnitStore, type UnitStore } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { S3Index } from '../dist/engine/s3/s3-index.js';
import { s3CodeOf } from '../dist/engine/s3/errors.js';
import { listObjects } from '../dist/engine/s3/listing.js';
import { afterStored, compareKeys, decodeKey, encodeKey } from '../dist/engine/s3/names.js';
import type { ObjectMeta, PartRecord, S3Owner } from '../dist/engine/s3/records.js';
import { S3_MAX_BUCKETS_PER_TENANT, S3_MIN_PART_BYTES } from '../dist/engine/base/limits.js';
import { startPostgres } from './helpers/postgres.js';
import { tempRoot } from './helpers/server.js';

interface Opened {
  nodes: [UnitStore, UnitStore];
  close(): Promise<void>;
}

const backends: Array<{ name: string; open(): Promise<Opened | { skip: string }> }> = [
  {
    name: 'lmdb',
    async open() {
      const root = tempRoot('svc-s3-index-');
      const env = CatalogEnv.open(root, 'relaxed');
      const store = new LmdbUnitStore(env);
      return {
        nodes: [store, store],
        async close() {
          await store.close();
          await env.close();
          fs.rmSync(root, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: 'postgres',
    async open() {
      const server = await startPostgres();
      if ('skip' in server) return { skip: `PostgreSQL cannot start here: ${server.skip}` };
      const catalogs: PgBlobCatalog[] = [];
      const close = async () => {
        await Promise.all(catalogs.map((c) => c.unitStore().close()));
        await Promise.all(catalogs.map((c) => c.close()));
        await server.stop();
      };
      try {
        const url = await server.createDatabase('s3index');
        catalogs.push(...(await Promise.all([PgBlobCatalog.open(url, { poolSize: 8 }), PgBlobCatalog.open(url, { poolSize: 8 })])));
        return { nodes: [catalogs[0]!.unitStore(), catalogs[1]!.unitStore()], close };
      } catch (err) {
        await close();
        throw err;
      }
    },
  },
];

/** The S3 code a promise is refused with. */
async function refusal(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return s3CodeOf(err) ?? `not an S3 refusal: ${String(err)}`;
  }
  return 'no refusal';
}

const META: ObjectMeta = { contentType: 'text/plain', userMetadata: { a: '1' } };
const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const content = (blobId: string, size = 3) => ({ blobId, size, etag: md5(blobId), checksums: { CRC32: 'AAAAAA==' } });
const owner = (tenant: string): S3Owner => ({ tenant, subject: `sub-${tenant}` });
const uniq = () => randomUUID().slice(0, 8);
const bucketName = () => `b-${uniq()}`;

/** S3's listing semantics, brute force: every key above `after` under `prefix`, rolled up by `delimiter`. */
function model(keys: string[], q: { prefix: string; delimiter?: string; after: string; max: number }) {
  const sorted = [...keys].sort(compareKeys);
  const all: string[] = [];
  for (const key of sorted) {
    if (!key.startsWith(q.prefix) || compareKeys(key, q.after) <= 0) continue;
    const at = q.delimiter ? key.indexOf(q.delimiter, q.prefix.length) : -1;
    const item = at < 0 ? key : `P:${key.slice(0, at + q.delimiter!.length)}`;
    if (item === `P:${q.after}` || all[all.length - 1] === item) continue;
    all.push(item);
  }
  return { items: all.slice(0, q.max), truncated: all.length > q.max };
}

describe.each(backends)('S3 index on $name', (backend) => {
  let opened: Opened | { skip: string };
  let now = Date.UTC(2026, 0, 1);
  const clock = { now: () => now };
  /** The index on each node, in us-east-1 and in eu-west-1. */
  let east: [S3Index, S3Index];
  let west: S3Index;

  beforeAll(async () => {
    opened = await backend.open();
    if ('skip' in opened) return;
    east = [new S3Index(opened.nodes[0], clock, 'us-east-1'), new S3Index(opened.nodes[1], clock, 'us-east-1')];
    west = new S3Index(opened.nodes[0], clock, 'eu-west-1');
  }, 120_000);
  afterAll(async () => {
    if (!('skip' in opened)) await opened.close();
  });
  const ready = (skip: (note: string) => never) => {
    if ('skip' in opened) skip(opened.skip);
  };

  it('bucket names are checked as S3 checks them', async ({ skip }) => {
    ready(skip);
    const bad = ['ab', 'a'.repeat(64), 'Abc', 'a_b', '-ab', 'ab-', '.ab', 'a..b', '192.168.5.4', 'xn--abc', 'sthree-x', 'amzn-s3-demo-x', 'abc-s3alias', 'abc--ol-s3', 'abc.mrap', 'abc--x-s3', 'abc--table-s3', 'a b'];
    for (const name of bad) expect([name, await refusal(east[0].buckets.create(owner('t1'), name))]).toEqual([name, 'InvalidBucketName']);
    for (const name of ['abc', `a${'b'.repeat(61)}c`, `x-${uniq()}.y.z`, `1.2.3.${uniq()}`]) expect(await east[0].buckets.create(owner('t1'), name)).toEqual({ created: true });
  });

  it('buckets: one namespace, owned by a tenant; another tenant is refused; us-east-1 answers 200 to its owner', async ({ skip }) => {
    ready(skip);
    const [t1, t2] = [`t1-${uniq()}`, `t2-${uniq()}`];
    const [b, a] = [`zz-${uniq()}`, `aa-${uniq()}`];
    expect(await east[0].buckets.create(owner(t1), b)).toEqual({ created: true });
    expect(await east[1].buckets.create(owner(t1), a)).toEqual({ created: true });
    expect(await refusal(east[1].buckets.create(owner(t2), b))).toBe('BucketAlreadyExists');
    expect(await east[1].buckets.create(owner(t1), b)).toEqual({ created: false });
    expect(await refusal(west.buckets.create(owner(t1), b))).toBe('BucketAlreadyOwnedByYou');
    expect(await refusal(east[0].buckets.head(t2, b))).toBe('AccessDenied');
    expect(await refusal(east[0].buckets.head(t1, `no-${uniq()}`))).toBe('NoSuchBucket');
    expect((await east[1].buckets.head(t1, b)).tenant).toBe(t1);
    expect((await east[0].buckets.list(t1)).map((x) => x.name)).toEqual([a, b]);
    expect(await east[0].buckets.list(t2)).toEqual([]);
    expect(await refusal(east[0].buckets.delete(t2, b))).toBe('AccessDenied');
    expect(await refusal(east[0].objects.put(owner(t2), b, 'k', content('x'), META))).toBe('AccessDenied');
    expect(await refusal(east[0].objects.list(t2, b, {}))).toBe('AccessDenied');
  });

  it(`a tenant owns at most ${S3_MAX_BUCKETS_PER_TENANT} buckets (TooManyBuckets)`, async ({ skip }) => {
    ready(skip);
    const t = `many-${uniq()}`;
    const prefix = `m-${uniq()}`;
    // Two at a time, one per node: creates of one tenant run one after the other (its count is read and written).
    for (let i = 0; i < S3_MAX_BUCKETS_PER_TENANT; i += 2) {
      await Promise.all([0, 1].map((j) => east[j]!.buckets.create(owner(t), `${prefix}-${i + j}`)));
    }
    expect(await refusal(east[0].buckets.create(owner(t), `${prefix}-more`))).toBe('TooManyBuckets');
    expect((await east[1].buckets.list(t)).length).toBe(S3_MAX_BUCKETS_PER_TENANT);
    await east[0].buckets.delete(t, `${prefix}-0`);
    expect(await east[1].buckets.create(owner(t), `${prefix}-more`)).toEqual({ created: true });
  }, 120_000);

  it('DeleteBucket: only empty (no object, no open upload), then the name is free for anyone', async ({ skip }) => {
    ready(skip);
    const [t1, t2, b] = [`t1-${uniq()}`, `t2-${uniq()}`, bucketName()];
    await east[0].buckets.create(owner(t1), b);
    await east[0].objects.put(owner(t1), b, 'k', content('x'), META);
    expect(await refusal(east[1].buckets.delete(t1, b))).toBe('BucketNotEmpty');
    await east[1].objects.delete(t1, b, 'k');
    const { uploadId } = await east[0].multipart.create(owner(t1), b, 'm', META);
    expect(await refusal(east[1].buckets.delete(t1, b))).toBe('BucketNotEmpty');
    await east[1].multipart.abort(t1, b, 'm', uploadId);
    await east[1].buckets.delete(t1, b);
    expect(await refusal(east[0].buckets.head(t1, b))).toBe('NoSuchBucket');
    expect(await refusal(east[0].buckets.delete(t1, b))).toBe('NoSuchBucket');
    expect(await refusal(east[0].objects.put(owner(t1), b, 'k', content('x'), META))).toBe('NoSuchBucket');
    expect(await east[0].buckets.create(owner(t2), b)).toEqual({ created: true });
  });

  it('objects: put, get, conditions, key and metadata bounds, delete', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const o = east[0].objects;
    await east[0].buckets.create(owner(t), b);
    now += 1000;
    const put = await o.put(owner(t), b, 'a/é', { ...content('x', 5), etag: `"${md5('x')}"` }, { ...META, cacheControl: 'no-cache', expires: 'Thu, 01 Dec 2094 16:00:00 GMT' });
    expect(put.record).toEqual({ blobId: 'x', size: 5, etag: md5('x'), checksums: { CRC32: 'AAAAAA==' }, contentType: 'text/plain', cacheControl: 'no-cache', expires: 'Thu, 01 Dec 2094 16:00:00 GMT', userMetadata: { a: '1' }, lastModified: now, owner: owner(t) });
    expect(await east[1].objects.get(t, b, 'a/é')).toEqual(put.record);
    expect(await refusal(() => o.get(t, b, 'a/e'))).toBe('NoSuchKey');
    expect(await refusal(() => o.get(`other-${uniq()}`, b, 'a/é'))).toBe('AccessDenied');
    expect(await refusal(o.put(owner(t), b, 'é'.repeat(512) + 'x', content('x'), META))).toBe('KeyTooLongError');
    expect((await o.put(owner(t), b, 'é'.repeat(512), content('x'), META)).record.blobId).toBe('x');
    expect(await refusal(o.put(owner(t), b, '', content('x'), META))).toBe('InvalidArgument');
    expect(await refusal(o.put(owner(t), b, 'm', content('x'), { userMetadata: { big: 'v'.repeat(2046) } }))).toBe('MetadataTooLarge');
    expect((await o.put(owner(t), b, 'm', content('x'), { userMetadata: { big: 'v'.repeat(2045) } })).record.userMetadata.big).toHaveLength(2045);
    // Conditional writes, decided against the record replaced.
    expect(await refusal(o.put(owner(t), b, 'a/é', content('y'), META, { ifNoneMatch: '*' }))).toBe('PreconditionFailed');
    expect((await o.put(owner(t), b, 'new', content('y'), META, { ifNoneMatch: '*' })).record.blobId).toBe('y');
    expect(await refusal(o.put(owner(t), b, 'a/é', content('y'), META, { ifMatch: md5('nope') }))).toBe('PreconditionFailed');
    expect(await refusal(o.put(owner(t), b, 'absent', content('y'), META, { ifMatch: md5('x') }))).toBe('NoSuchKey');
    expect((await o.put(owner(t), b, 'a/é', content('y'), META, { ifMatch: `"${md5('x')}"` })).record.blobId).toBe('y');
    expect(await o.delete(t, b, 'a/é')).toMatchObject({ deleted: true });
    expect(await o.delete(t, b, 'a/é')).toEqual({ deleted: false, held: [], released: [] });
    expect(await refusal(() => o.get(t, b, 'a/é'))).toBe('NoSuchKey');
  });

  it('copy: a new record naming the same blob, COPY or REPLACE, across the tenant\'s buckets only', async ({ skip }) => {
    ready(skip);
    const [t, b, c] = [`t-${uniq()}`, bucketName(), bucketName()];
    const other = `o-${uniq()}`;
    const foreign = bucketName();
    await east[0].buckets.create(owner(t), b);
    await east[0].buckets.create(owner(t), c);
    await east[0].buckets.create(owner(other), foreign);
    await east[0].objects.put(owner(other), foreign, 'f', content('f'), META);
    const src = (await east[0].objects.put(owner(t), b, 's', { ...content('x'), parts: [1, 2] }, META)).record;
    now += 1000;
    const copied = await east[1].objects.copy(owner(t), { bucket: b, key: 's' }, c, 'd');
    expect(copied.record).toEqual({ ...src, lastModified: now });
    const replaced = await east[1].objects.copy(owner(t), { bucket: b, key: 's' }, b, 's', { userMetadata: { z: '2' } });
    expect(replaced.record).toMatchObject({ blobId: 'x', etag: src.etag, userMetadata: { z: '2' } });
    expect(replaced.record.contentType).toBeUndefined();
    expect(await refusal(east[0].objects.copy(owner(t), { bucket: b, key: 's' }, b, 's'))).toBe('InvalidRequest');
    expect(await refusal(east[0].objects.copy(owner(t), { bucket: foreign, key: 'f' }, b, 'g'))).toBe('AccessDenied');
    expect(await refusal(east[0].objects.copy(owner(t), { bucket: b, key: 'none' }, b, 'g'))).toBe('NoSuchKey');
    const check = () => {
      throw new (class extends Error {})('refused by the check');
    };
    await expect(east[0].objects.copy(owner(t), { bucket: b, key: 's', check }, b, 'g')).rejects.toThrow('refused by the check');
    expect(await east[0].refs.count(t, 'x')).toBe(2);
  });

  it('blob counts follow put, overwrite, copy and delete; a release is a protocol a write waits for', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const [i0, i1] = east;
    await i0.buckets.create(owner(t), b);
    expect(await i0.objects.put(owner(t), b, 'A', content('x'), META)).toMatchObject({ held: ['x'], released: [] });
    expect(await i1.objects.put(owner(t), b, 'B', content('x'), META)).toMatchObject({ held: [], released: [] });
    expect(await i0.refs.count(t, 'x')).toBe(2);
    expect(await i0.objects.put(owner(t), b, 'A', content('y'), META)).toMatchObject({ held: ['y'], released: [] });
    expect(await i1.objects.put(owner(t), b, 'A', content('y'), META)).toMatchObject({ held: [], released: [] });
    expect([await i0.refs.count(t, 'x'), await i0.refs.count(t, 'y')]).toEqual([1, 1]);
    expect(await i1.objects.copy(owner(t), { bucket: b, key: 'B' }, b, 'C')).toMatchObject({ held: [], released: [] });
    expect(await i0.refs.count(t, 'x')).toBe(2);
    expect(await i0.objects.delete(t, b, 'B')).toMatchObject({ deleted: true, released: [] });
    expect(await i1.objects.delete(t, b, 'C')).toMatchObject({ deleted: true, released: ['x'] });
    expect(await i0.refs.count(t, 'x')).toBe(0);
    expect(await i0.refs.pendingReleases(1000)).toContainEqual({ tenant: t, blobId: 'x', deleting: false });
    // Named again before a releaser came: held again, nothing left to release.
    expect(await i0.objects.put(owner(t), b, 'D', content('x'), META)).toMatchObject({ held: ['x'] });
    expect(await i0.refs.pendingReleases(1000)).not.toContainEqual({ tenant: t, blobId: 'x', deleting: false });
    expect(await i0.refs.beginRelease(t, 'x')).toBe(false);
    // Down to 0 again, and a releaser begins: a write naming the blob must publish again first.
    expect(await i0.objects.delete(t, b, 'D')).toMatchObject({ released: ['x'] });
    expect(await i1.refs.beginRelease(t, 'x')).toBe(true);
    const err = await i0.objects.put(owner(t), b, 'E', content('x'), META).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('s3_blob_releasing');
    await i1.refs.endRelease(t, 'x');
    expect(await i0.refs.pendingReleases(1000)).not.toContainEqual({ tenant: t, blobId: 'x', deleting: false });
    expect(await i0.objects.put(owner(t), b, 'E', content('x'), META)).toMatchObject({ held: ['x'] });
    expect(await i0.refs.count(t, 'x')).toBe(1);
    // Counts are per tenant.
    expect(await i0.refs.count(`other-${uniq()}`, 'x')).toBe(0);
  });

  it('concurrent puts of one key from two nodes: one record wins, the counts stay right', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    await east[0].buckets.create(owner(t), b);
    const blobs = Array.from({ length: 16 }, (_, i) => `c${i}`);
    const outcomes = await Promise.all(blobs.map((blob, i) => east[i % 2]!.objects.put(owner(t), b, 'hot', content(blob), META)));
    const final = await east[0].objects.get(t, b, 'hot');
    expect(blobs).toContain(final.blobId);
    const counts = await Promise.all(blobs.map((blob) => east[1].refs.count(t, blob)));
    expect(counts).toEqual(blobs.map((blob) => (blob === final.blobId ? 1 : 0)));
    // Every blob was held once and all but the winner released once.
    expect(outcomes.flatMap((o) => o.held).sort()).toEqual([...blobs].sort());
    expect(outcomes.flatMap((o) => o.released).sort()).toEqual(blobs.filter((x) => x !== final.blobId).sort());
  });

  it('keys list in UTF-8 binary order, control characters and characters above U+FFFF included', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    await east[0].buckets.create(owner(t), b);
    const keys = ['z', 'é', 'a', 'b', '\uffff', '\u{1f600}', 'a\tb', 'a\u0001', 'a\u0000', 'ab', `a${'\u0001'.repeat(70)}`, `a${'x'.repeat(70)}`, 'A'];
    for (const key of keys) await east[0].objects.put(owner(t), b, key, content('x'), META);
    const listed = (await east[1].objects.list(t, b, {})).items.map((i) => i.key);
    expect(listed).toEqual([...keys].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
    expect(listed.slice(0, 8)).toEqual(['A', 'a', 'a\u0000', 'a\u0001', `a${'\u0001'.repeat(70)}`, 'a\tb', 'ab', `a${'x'.repeat(70)}`]);
    expect(listed.slice(-5)).toEqual(['b', 'z', 'é', '\uffff', '\u{1f600}']);
    for (const key of keys) expect(decodeKey(encodeKey(key))).toBe(key);
  });

  it('ListObjects with prefix, delimiter, max-keys and positions matches a brute-force model on random key sets', async ({ skip }) => {
    ready(skip);
    const alphabet = ['a', 'b', '/', 'é', '\u{1f600}', '\t', '-', 'z'];
    // mulberry32: a seeded generator whose low bits are as random as its high ones.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
      return (((x ^ (x >>> 14)) >>> 0) % n);
    };
    let pagesEndingInPrefix = 0;
    const word = (max: number) => Array.from({ length: 1 + random(max) }, () => alphabet[random(alphabet.length)]).join('');
    for (let round = 0; round < 4; round++) {
      const [t, b] = [`t-${uniq()}`, bucketName()];
      await east[0].buckets.create(owner(t), b);
      const keys = [...new Set(Array.from({ length: 80 }, () => word(6)))];
      await Promise.all(keys.map((key, i) => east[i % 2]!.objects.put(owner(t), b, key, content('x'), META)));
      for (let q = 0; q < 25; q++) {
        const prefix = random(3) === 0 ? '' : word(2);
        const delimiter = [undefined, '/', 'a', 'é/'][random(4)];
        const max = [1, 2, 3, 7, 1000][random(5)]!;
        // A whole listing page by page, each page against the model from its position.
        let after = random(4) === 0 ? word(3) : '';
        for (let pages = 0; pages < 200; pages++) {
          const page = await east[pages % 2]!.objects.list(t, b, { prefix, delimiter, maxKeys: max, after });
          const expected = model(keys, { prefix, delimiter, after, max });
          const got = page.items.map((i) => (i.prefix !== undefined ? `P:${i.prefix}` : i.key));
          expect({ prefix, delimiter, after, max, got, truncated: page.truncated }).toEqual({ prefix, delimiter, after, max, got: expected.items, truncated: expected.truncated });
          if (!page.truncated) break;
          if (page.items[page.items.length - 1]!.prefix !== undefined) pagesEndingInPrefix++;
          expect(page.next).toBe(got[got.length - 1]!.replace(/^P:/, ''));
          after = page.next!;
        }
      }
    }
    // The case the position must get right: a page that ends in a common prefix.
    expect(pagesEndingInPrefix).toBeGreaterThan(10);
  }, 120_000);

  it('a common prefix is not scanned through: the listing seeks past it', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const store = (opened as Opened).nodes[0];
    await east[0].buckets.create(owner(t), b);
    const keys = ['a', ...Array.from({ length: 400 }, (_, i) => `big/${String(i).padStart(4, '0')}`), 'c/1', 'd'];
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((key) => east[0].objects.put(owner(t), b, key, content('x'), META)));
    let read = 0;
    const { OBJECTS } = await import('../dist/engine/s3/records.js');
    const source = {
      read: async (range: object) => {
        const entries = await store.range(OBJECTS, range);
        read += entries.length;
        return entries;
      },
      storedKeyOf: (key: unknown) => (key as [string, string])[1],
      startAfter: (key: unknown) => [b, afterStored((key as [string, string])[1])],
    };
    const page = await listObjects(source, b, { delimiter: '/' });
    expect(page.items.map((i) => i.prefix ?? i.key)).toEqual(['a', 'big/', 'c/', 'd']);
    // One read of 100 entries that meets the group, one read past it: not the 400 keys under big/.
    expect(read).toBeLessThan(120);
    read = 0;
    const all = await listObjects(source, b, {});
    expect(all.items).toHaveLength(403);
    expect(read).toBeGreaterThanOrEqual(403);
  });

  it('max-keys: 0 lists nothing, above 1000 is 1000, negative is refused', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    await east[0].buckets.create(owner(t), b);
    await east[0].objects.put(owner(t), b, 'k', content('x'), META);
    expect(await east[0].objects.list(t, b, { maxKeys: 0 })).toEqual({ items: [], truncated: false });
    expect((await east[0].objects.list(t, b, { maxKeys: 5000 })).items).toHaveLength(1);
    expect(await refusal(east[0].objects.list(t, b, { maxKeys: -1 }))).toBe('InvalidArgument');
  });

  const part = (blobId: string, size: number): Omit<PartRecord, 'lastModified'> => ({ etag: md5(blobId), size, checksums: { CRC32: `${blobId}==` }, content: { blobId, size } });
  const BIG = S3_MIN_PART_BYTES;

  it('multipart: parts replace by number, list with markers; Complete checks the list as S3 does and writes the object', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const [m0, m1] = [east[0].multipart, east[1].multipart];
    await east[0].buckets.create(owner(t), b);
    const { uploadId, record } = await m0.create(owner(t), b, 'big.bin', { ...META, contentType: 'application/x' }, { algorithm: 'CRC32', type: 'COMPOSITE' });
    expect(uploadId).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(record).toMatchObject({ owner: owner(t), checksumAlgorithm: 'CRC32', checksumType: 'COMPOSITE' });
    expect(await refusal(m0.putPart(t, b, 'big.bin', uploadId, 0, part('p0', 1)))).toBe('InvalidArgument');
    expect(await refusal(m0.putPart(t, b, 'big.bin', uploadId, 10001, part('p0', 1)))).toBe('InvalidArgument');
    expect(await refusal(m0.putPart(t, b, 'big.bin', 'nope', 1, part('p0', 1)))).toBe('NoSuchUpload');
    expect(await refusal(m0.putPart(t, b, 'other', uploadId, 1, part('p0', 1)))).toBe('NoSuchUpload');
    expect(await refusal(m0.putPart(`x-${uniq()}`, b, 'big.bin', uploadId, 1, part('p0', 1)))).toBe('AccessDenied');
    expect(await m0.putPart(t, b, 'big.bin', uploadId, 1, part('p1-old', BIG))).toEqual({});
    expect(await m1.putPart(t, b, 'big.bin', uploadId, 1, part('p1', BIG))).toEqual({ replaced: { blobId: 'p1-old', size: BIG } });
    await Promise.all([m0.putPart(t, b, 'big.bin', uploadId, 3, part('p3', 10)), m1.putPart(t, b, 'big.bin', uploadId, 2, part('p2', BIG)), m0.putPart(t, b, 'big.bin', uploadId, 5, part('p5', 1))]);
    const first = await m1.listParts(t, b, 'big.bin', uploadId, { maxParts: 2 });
    expect(first.parts.map((p) => p.partNumber)).toEqual([1, 2]);
    expect(first).toMatchObject({ truncated: true, nextPartNumberMarker: 2 });
    const rest = await m1.listParts(t, b, 'big.bin', uploadId, { partNumberMarker: 2 });
    expect(rest.parts.map((p) => [p.partNumber, p.etag, p.size])).toEqual([[3, md5('p3'), 10], [5, md5('p5'), 1]]);
    expect(rest.truncated).toBe(false);
    const ask = (...ns: number[]) => ns.map((n) => ({ partNumber: n, etag: `"${md5(`p${n}`)}"` }));
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, []))).toBe('MalformedXML');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, ask(2, 1, 3)))).toBe('InvalidPartOrder');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, ask(1, 1)))).toBe('InvalidPartOrder');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, ask(1, 4)))).toBe('InvalidPart');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, [{ partNumber: 1, etag: md5('p1-old') }]))).toBe('InvalidPart');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, [{ partNumber: 1, etag: md5('p1'), checksums: { CRC32: 'other==' } }]))).toBe('InvalidPart');
    expect(await refusal(m0.prepareComplete(t, b, 'big.bin', uploadId, ask(1, 3, 5)))).toBe('EntityTooSmall');
    const prepared = await m0.prepareComplete(t, b, 'big.bin', uploadId, ask(1, 2, 3));
    const expectedEtag = `${createHash('md5').update(Buffer.concat(['p1', 'p2', 'p3'].map((p) => Buffer.from(md5(p), 'hex')))).digest('hex')}-3`;
    expect(prepared).toMatchObject({ etag: expectedEtag, size: 2 * BIG + 10 });
    expect(prepared.parts.map((p) => p.content)).toEqual([{ blobId: 'p1', size: BIG }, { blobId: 'p2', size: BIG }, { blobId: 'p3', size: 10 }]);
    now += 1000;
    const done = await m1.commitComplete(owner(t), b, 'big.bin', uploadId, prepared, { blobId: 'whole', checksums: { CRC32: 'Zm9v-3' } });
    expect(done.record).toEqual({ blobId: 'whole', size: 2 * BIG + 10, etag: expectedEtag, parts: [BIG, BIG, 10], checksums: { CRC32: 'Zm9v-3' }, contentType: 'application/x', userMetadata: { a: '1' }, lastModified: now, owner: owner(t) });
    expect(done).toMatchObject({ held: ['whole'], discarded: [{ blobId: 'p5', size: 1 }] });
    expect(await east[0].objects.get(t, b, 'big.bin')).toEqual(done.record);
    expect(await refusal(m0.listParts(t, b, 'big.bin', uploadId))).toBe('NoSuchUpload');
    expect(await refusal(m0.commitComplete(owner(t), b, 'big.bin', uploadId, prepared, { blobId: 'whole', checksums: {} }))).toBe('NoSuchUpload');
    expect(await east[0].refs.count(t, 'whole')).toBe(1);
  });

  it('multipart: a part sent again between the two steps of Complete refuses it; Abort returns the parts to release', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const m = east[0].multipart;
    await east[0].buckets.create(owner(t), b);
    const { uploadId } = await m.create(owner(t), b, 'k', META);
    await m.putPart(t, b, 'k', uploadId, 1, part('q1', BIG));
    await m.putPart(t, b, 'k', uploadId, 2, part('q2', 3));
    const prepared = await m.prepareComplete(t, b, 'k', uploadId, [{ partNumber: 1, etag: md5('q1') }, { partNumber: 2, etag: md5('q2') }]);
    await east[1].multipart.putPart(t, b, 'k', uploadId, 2, { ...part('q2b', 3), etag: md5('q2') });
    expect(await refusal(m.commitComplete(owner(t), b, 'k', uploadId, prepared, { blobId: 'w', checksums: {} }))).toBe('InvalidPart');
    expect(await refusal(() => east[0].objects.get(t, b, 'k'))).toBe('NoSuchKey');
    const aborted = await east[1].multipart.abort(t, b, 'k', uploadId);
    expect(aborted.released.sort((x, y) => x.blobId.localeCompare(y.blobId))).toEqual([{ blobId: 'q1', size: BIG }, { blobId: 'q2b', size: 3 }]);
    expect(await refusal(m.abort(t, b, 'k', uploadId))).toBe('NoSuchUpload');
    expect(await refusal(m.listParts(t, b, 'k', uploadId))).toBe('NoSuchUpload');
  });

  it('ListMultipartUploads: by key then upload id, prefix, delimiter, key and upload-id markers', async ({ skip }) => {
    ready(skip);
    const [t, b] = [`t-${uniq()}`, bucketName()];
    const m = east[0].multipart;
    await east[0].buckets.create(owner(t), b);
    const ids: Record<string, string[]> = {};
    for (const key of ['a', 'a', 'd/1', 'd/2', 'é', 'x/y/z']) (ids[key] ??= []).push((await m.create(owner(t), b, key, META)).uploadId);
    for (const list of Object.values(ids)) list.sort();
    const all = await east[1].multipart.listUploads(t, b, {});
    expect(all.items.map((i) => [i.key, i.value?.uploadId])).toEqual([['a', ids.a![0]], ['a', ids.a![1]], ['d/1', ids['d/1']![0]], ['d/2', ids['d/2']![0]], ['x/y/z', ids['x/y/z']![0]], ['é', ids['é']![0]]]);
    const rolled = await m.listUploads(t, b, { delimiter: '/' });
    expect(rolled.items.map((i) => i.prefix ?? i.key)).toEqual(['a', 'a', 'd/', 'x/', 'é']);
    const page1 = await m.listUploads(t, b, { delimiter: '/', maxUploads: 3 });
    expect(page1).toMatchObject({ truncated: true, nextKeyMarker: 'd/' });
    expect(page1.nextUploadIdMarker).toBeUndefined();
    const page2 = await m.listUploads(t, b, { delimiter: '/', keyMarker: page1.nextKeyMarker });
    expect(page2.items.map((i) => i.prefix ?? i.key)).toEqual(['x/', 'é']);
    const byId = await m.listUploads(t, b, { maxUploads: 1 });
    expect(byId).toMatchObject({ truncated: true, nextKeyMarker: 'a', nextUploadIdMarker: ids.a![0] });
    const next = await m.listUploads(t, b, { keyMarker: 'a', uploadIdMarker: ids.a![0], maxUploads: 2 });
    expect(next.items.map((i) => [i.key, i.value?.uploadId])).toEqual([['a', ids.a![1]], ['d/1', ids['d/1']![0]]]);
    expect((await m.listUploads(t, b, { prefix: 'd/' })).items.map((i) => i.key)).toEqual(['d/1', 'd/2']);
    expect((await m.listUploads(t, b, { keyMarker: 'a' })).items.map((i) => i.key)).toEqual(['d/1', 'd/2', 'x/y/z', 'é']);
  });
});
