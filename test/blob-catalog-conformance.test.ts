// One suite for every BlobCatalog: the embedded LMDB catalog and the PostgreSQL one (a fresh
// database in a cluster of the test's own) must answer the same calls the same way. Cases use
// their own tenants and fresh blocks, so they share one catalog and compare totals by difference.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BlobCatalog, CatalogEnv, LmdbBlobCatalog, type StoredBlock } from '../dist/engine/store/index.js';
import { PgBlobCatalog } from '../dist/engine/store/pg/blob-catalog.js';
import { S3BlockStore } from '../dist/engine/store/s3/block-store.js';
import { openS3OnlyCatalog } from '../dist/engine/store/s3-only.js';
import { startPostgres } from './helpers/postgres.js';
import { startS3rverProcess } from './helpers/backends.js';
import { type S3Endpoint, s3ClientFor, startRadosgw } from './helpers/s3-servers.js';
import { tempRoot } from './helpers/server.js';

interface OpenCatalog {
  /**
   * Two nodes on one catalog: separate instances where the backend serves several nodes
   * (PostgreSQL), the one instance where it is embedded in a single process (LMDB).
   */
  nodes: [BlobCatalog, BlobCatalog];
  close(): Promise<void>;
}

interface Backend {
  name: string;
  open(): Promise<OpenCatalog | { skip: string }>;
  /**
   * Where a backend differs by design (docs/backends.md says why), the reason; the cases check
   * its behaviour instead, or leave the assertion out.
   */
  differs?: {
    /** Each tenant keeps its own manifest of a blob: no manifest is shared across tenants. */
    manifestsPerTenant: string;
    /** totals() counts block objects in the bucket (a listing, at most every 30 s), not block records. */
    totalsByListing: string;
    /** A node answers the inline bytes it read for a while after another node removed the blob. */
    inlineCached: string;
  };
}

const S3_ONLY_DIFFERS = {
  manifestsPerTenant: 'the S3-only catalog keeps a manifest per (tenant, blob): no shared manifest, so no holder count to contend on',
  totalsByListing: 'S3-only totals list the block objects (none here: the cases store no bytes) and are up to 30 s old',
  inlineCached: 'an S3-only node answers inline bytes from its cache (asked for only after get() found the tenant\'s hold)',
};

const backends: Backend[] = [
  {
    name: 'lmdb',
    async open() {
      const root = tempRoot('svc-catalog-');
      const env = CatalogEnv.open(root, 'relaxed');
      const catalog = new LmdbBlobCatalog(env);
      return {
        nodes: [catalog, catalog],
        async close() {
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
      if ('skip' in server) return server;
      try {
        const url = await server.createDatabase('conformance');
        // Opened at once: the two nodes migrate the same empty database concurrently.
        const [a, b] = await Promise.all([PgBlobCatalog.open(url, { poolSize: 4 }), PgBlobCatalog.open(url, { poolSize: 4 })]);
        return {
          nodes: [a, b],
          async close() {
            await Promise.all([a.close(), b.close()]);
            await server.stop();
          },
        };
      } catch (err) {
        await server.stop();
        throw err;
      }
    },
  },
  { name: 's3 on s3rver (one node)', open: async () => openS3Only(await s3rverInAProcess(), false), differs: S3_ONLY_DIFFERS },
  { name: 's3 on radosgw (two nodes)', open: async () => openS3Only(await startRadosgw(), true), differs: S3_ONLY_DIFFERS },
];

/**
 * The S3-only catalog (SVC_BLOB_BACKEND=s3) on `server`: two nodes (two catalogs, each its own
 * node id and client) where the server honours conditional writes, else the one catalog (one node).
 */
async function openS3Only(server: S3Endpoint | { skip: string }, twoNodes: boolean): Promise<OpenCatalog | { skip: string }> {
  if ('skip' in server) return server;
  try {
    const client = s3ClientFor(server);
    await client.send(new CreateBucketCommand({ Bucket: 'conformance' }));
    client.destroy();
    const env = { AWS_ACCESS_KEY_ID: server.accessKeyId, AWS_SECRET_ACCESS_KEY: server.secretAccessKey };
    Object.assign(process.env, env);
    const location = { kind: 's3' as const, endpoint: server.endpoint, region: server.region, bucket: 'conformance', prefix: '', forcePathStyle: true };
    const stores = [new S3BlockStore(location), new S3BlockStore(location)];
    const a = await openS3OnlyCatalog(stores[0]!, 'node-a', 15_000);
    const b = twoNodes ? await openS3OnlyCatalog(stores[1]!, 'node-b', 15_000) : a;
    // Both nodes beat as a server's collector would: a node whose heartbeat is older than the
    // TTL counts as gone, and its writes in progress are settled by the other node.
    const beat = () => Promise.all([a.nodes.heartbeat('', null), b.nodes.heartbeat('', null)]);
    await beat();
    const beats = setInterval(() => void beat().catch(() => {}), 1000);
    return {
      nodes: [a.manifests, b.manifests],
      async close() {
        clearInterval(beats);
        for (const s of stores) s.client.destroy();
        await server.stop();
      },
    };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** s3rver as the s3 test project runs it: a child process with OpenSSL's legacy provider (its listings' tokens are DES). */
async function s3rverInAProcess(): Promise<S3Endpoint> {
  const dir = tempRoot('svc-s3rver-');
  const child = await startS3rverProcess(dir);
  return {
    kind: 's3rver',
    endpoint: `http://127.0.0.1:${child.port}`,
    region: 'us-east-1',
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    storage: `files under ${dir}`,
    async stop() {
      await child.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

class QuotaExceeded extends Error {}
const quotaExceeded = () => new QuotaExceeded('quota exceeded');

/** A block of random bytes, as a store task reports it. */
function block(size = 1024): { stored: StoredBlock; bytes: Buffer } {
  const bytes = randomBytes(size);
  const stored: StoredBlock = { hex: createHash('sha256').update(bytes).digest('hex'), size, checksum: randomBytes(8).readBigUInt64LE(), fresh: true };
  return { stored, bytes };
}

interface Blob {
  hex: string;
  size: number;
  id: string;
  blocks: StoredBlock[];
  bytes: Buffer;
}

/** A blob made of `parts` (a block reused in it appears twice). */
function blob(...parts: { stored: StoredBlock; bytes: Buffer }[]): Blob {
  const bytes = Buffer.concat(parts.map((p) => p.bytes));
  const hex = createHash('sha256').update(bytes).digest('hex');
  return { hex, size: bytes.length, id: `sha-256:${hex}:${bytes.length}`, blocks: parts.map((p) => p.stored), bytes };
}

function tenant(): string {
  return randomUUID();
}

function publish(catalog: BlobCatalog, b: Blob, owner: string, extra: { mediaType?: string; chunker?: string; quotaBytes?: number; tenantBlocks?: boolean; inline?: boolean } = {}) {
  return catalog.publish(b.hex, b.size, extra.mediaType ?? 'application/octet-stream', extra.chunker ?? 'fastcdc', b.blocks, extra.inline ? b.bytes : undefined, {
    tenant: owner,
    tenantBlocks: extra.tenantBlocks,
    quotaBytes: extra.quotaBytes,
    quotaExceeded,
  });
}

/** Every id the tenant lists, newest first, following the cursors. */
async function listAll(catalog: BlobCatalog, owner: string, pageSize = 50): Promise<string[]> {
  const ids: string[] = [];
  let after: string | undefined;
  for (;;) {
    const { summaries, next } = await catalog.page(pageSize, after, owner);
    ids.push(...summaries.map((s) => s.id));
    if (next === undefined) return ids;
    after = next;
  }
}

/** Integers below n from a fixed seed (mulberry32), so that a failing mix can be run again. */
function seededRandom(seed: number): (n: number) => number {
  let state = seed >>> 0;
  return (n) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (((t ^ (t >>> 14)) >>> 0) % n);
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(backends)('BlobCatalog conformance: $name', (backend) => {
  let opened: OpenCatalog | { skip: string };
  beforeAll(async () => {
    opened = await backend.open();
  });
  afterAll(async () => {
    if ('nodes' in opened) await opened.close();
  });
  const exactTotals = !backend.differs;
  function nodes(skip: (note: string) => never): [BlobCatalog, BlobCatalog] {
    if ('skip' in opened) skip(opened.skip);
    return opened.nodes;
  }

  it('publishes a manifest and reads it back, from either node; inline bytes are kept in the catalog', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const first = block(3000);
    const second = block(1000);
    const big = blob(first, second, first);
    const before = Date.now();
    const publication = await publish(a, big, owner, { mediaType: 'text/plain', chunker: 'fastcdc' });
    const after = Date.now();
    expect(publication.existed).toBe(false);
    expect(publication.newToTenant).toBeUndefined();

    for (const node of [a, b]) {
      const manifest = (await node.get(big.id, owner))!;
      expect(manifest.id).toBe(big.id);
      expect(manifest.record.size).toBe(7000);
      expect(manifest.record.mediaType).toBe('text/plain');
      expect(manifest.record.chunker).toBe('fastcdc');
      expect(manifest.record.inline).toBeUndefined();
      expect(manifest.record.seq).toBe(publication.manifest.record.seq);
      expect(manifest.record.createdAt).toBe(publication.manifest.record.createdAt);
      expect(manifest.record.createdAt).toBeGreaterThanOrEqual(before - 1);
      expect(manifest.record.createdAt).toBeLessThanOrEqual(after + 1);
      expect(manifest.blockCount).toBe(3);
      expect([0, 1, 2].map((i) => manifest.block(i))).toEqual([
        { index: 0, hex: first.stored.hex, offset: 0, size: 3000, checksum: first.stored.checksum },
        { index: 1, hex: second.stored.hex, offset: 3000, size: 1000, checksum: second.stored.checksum },
        { index: 2, hex: first.stored.hex, offset: 4000, size: 3000, checksum: first.stored.checksum },
      ]);
      expect(await node.inlineBytes(big.id)).toBeUndefined();
    }

    const small = blob(block(100));
    const inline = await publish(b, small, owner, { inline: true });
    expect(inline.manifest.record.inline).toBe(true);
    for (const node of [a, b]) {
      expect((await node.get(small.id, owner))!.record.inline).toBe(true);
      expect(await node.inlineBytes(small.id)).toEqual(small.bytes);
    }
    expect(await a.get(blob(block(10)).id, owner)).toBeUndefined();
    expect(await a.get('not-an-id', owner)).toBeUndefined();
  });

  it('one tenant publishing the same blobs on two nodes at once: every publication succeeds, each blob new once', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const xs = Array.from({ length: 4 }, () => blob(block(300), block(300)));
    // Writes that wait for the same blob's write on the other node must not hold up their own
    // node's other writes (the S3-only ledger once did: a busy wait inside the tenant's queue on
    // each node, each waiting for a write the other node's queue held back, for 30 s).
    const results = await Promise.all(xs.flatMap((x, i) => [publish(i % 2 ? a : b, x, owner, { quotaBytes: 100_000 }), publish(i % 2 ? b : a, x, owner, { quotaBytes: 100_000 })]));
    expect(results.filter((r) => !r.existed)).toHaveLength(xs.length);
    expect(await a.retainedBytes(owner)).toBe(600 * xs.length);
    expect((await listAll(b, owner)).sort()).toEqual(xs.map((x) => x.id).sort());
  });

  it('a repeat publication is `existed`, changes nothing and is free of quota; the first manifest is kept', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const other = tenant();
    const x = blob(block(500), block(500));
    const first = await publish(a, x, owner, { quotaBytes: 1000, mediaType: 'text/plain' });
    const totals = await a.totals();
    const again = await publish(b, x, owner, { quotaBytes: 1000, mediaType: 'image/png', chunker: 'fixed', tenantBlocks: true });
    expect(again.existed).toBe(true);
    expect(again.newToTenant).toBeUndefined();
    expect(again.manifest.record.seq).toBe(first.manifest.record.seq);
    expect(again.manifest.record.mediaType).toBe('text/plain');
    expect(await a.retainedBytes(owner)).toBe(1000);
    if (exactTotals) expect(await a.totals()).toEqual(totals);
    expect(await listAll(a, owner)).toEqual([x.id]);

    // Another tenant's publication of the same id with other cut points gets the stored manifest's
    // blocks (S3-only: its own manifest, see S3_ONLY_DIFFERS).
    const recut = await publish(b, { ...x, blocks: [x.blocks[0]] }, other, { chunker: 'fixed' });
    expect(recut.existed).toBe(false);
    const kept = backend.differs ? { chunker: 'fixed', blocks: 1 } : { chunker: 'fastcdc', blocks: 2 };
    expect(recut.manifest.record.chunker).toBe(kept.chunker);
    expect(recut.manifest.blockCount).toBe(kept.blocks);
    expect((await a.get(x.id, other))!.record.chunker).toBe(kept.chunker);
  });

  it("another tenant's blob is absent to a tenant: get, list and remove", async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const stranger = tenant();
    const x = blob(block());
    await publish(a, x, owner);
    expect(await b.get(x.id, stranger)).toBeUndefined();
    expect(await b.page(10, undefined, stranger)).toEqual({ summaries: [], next: undefined });
    expect(await b.remove(x.id, stranger)).toBe(false);
    expect(await b.retainedBytes(stranger)).toBe(0);
    expect(await a.get(x.id, owner)).toBeDefined();
  });

  it("each tenant's publication has its own media type, time and place in its order", async ({ skip }) => {
    const [a, b] = nodes(skip);
    const alice = tenant();
    const bob = tenant();
    const x = blob(block());
    const y = blob(block());
    const ax = await publish(a, x, alice, { mediaType: 'text/plain' });
    await sleep(15);
    const ay = await publish(a, y, alice);
    await sleep(15);
    const bx = await publish(b, x, bob, { mediaType: 'application/json' });
    expect(bx.existed).toBe(false);
    expect(bx.manifest.record.mediaType).toBe('application/json');
    expect(bx.manifest.record.createdAt).toBeGreaterThan(ax.manifest.record.createdAt);
    expect(bx.manifest.record.seq).toBeGreaterThan(ay.manifest.record.seq);
    expect(ay.manifest.record.seq).toBeGreaterThan(ax.manifest.record.seq);

    const aliceView = (await b.get(x.id, alice))!;
    const bobView = (await a.get(x.id, bob))!;
    expect(aliceView.record.mediaType).toBe('text/plain');
    expect(aliceView.record.createdAt).toBe(ax.manifest.record.createdAt);
    expect(bobView.record.mediaType).toBe('application/json');
    expect(bobView.record.createdAt).toBe(bx.manifest.record.createdAt);
    expect(bobView.record.seq).toBe(bx.manifest.record.seq);

    const alicePage = await a.page(10, undefined, alice);
    expect(alicePage.summaries.map((s) => [s.id, s.mediaType])).toEqual([[y.id, 'application/octet-stream'], [x.id, 'text/plain']]);
    const bobPage = await b.page(10, undefined, bob);
    expect(bobPage.summaries).toEqual([
      { id: x.id, size: x.size, mediaType: 'application/json', chunker: 'fastcdc', blockCount: 1, createdAt: new Date(bx.manifest.record.createdAt).toISOString() },
    ]);
  });

  it('pages newest first after a cursor; next continues, and is absent on the last page', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const published: Blob[] = [];
    for (let i = 0; i < 5; i++) {
      const x = blob(block(100 + i));
      await publish(i % 2 ? a : b, x, owner);
      published.push(x);
    }
    const newestFirst = published.map((x) => x.id).reverse();
    const first = await a.page(2, undefined, owner);
    expect(first.summaries.map((s) => s.id)).toEqual(newestFirst.slice(0, 2));
    expect(first.next).toBeDefined();
    const second = await b.page(2, first.next, owner);
    expect(second.summaries.map((s) => s.id)).toEqual(newestFirst.slice(2, 4));
    const third = await a.page(2, second.next, owner);
    expect(third.summaries.map((s) => s.id)).toEqual(newestFirst.slice(4));
    expect(third.next).toBeUndefined();
    expect((await a.page(5, undefined, owner)).next).toBeUndefined();
    expect((await a.page(4, undefined, owner)).next).toBeDefined();
    expect(await listAll(b, owner, 3)).toEqual(newestFirst);
    // The cursor names the last summary's position: a page after it starts with the next one.
    const afterSecond = (await a.page(2, undefined, owner)).next;
    expect((await a.page(1, afterSecond, owner)).summaries.map((s) => s.id)).toEqual([newestFirst[2]]);
    // A removed blob leaves no gap in the pages.
    await a.remove(newestFirst[2], owner);
    expect(await listAll(a, owner, 2)).toEqual([newestFirst[0], newestFirst[1], newestFirst[3], newestFirst[4]]);
  });

  it("a removal drops only the tenant's hold; the manifest and its inline bytes go with the last holder", async ({ skip }) => {
    const [a, b] = nodes(skip);
    const alice = tenant();
    const bob = tenant();
    const x = blob(block(2000));
    const small = blob(block(50));
    const start = await a.totals();
    await publish(a, x, alice);
    await publish(b, x, bob);
    await publish(a, small, alice, { inline: true });
    await publish(b, small, bob, { inline: true });
    if (exactTotals) expect((await a.totals()).blobs - start.blobs).toBe(2);

    expect(await a.remove(x.id, alice)).toBe(true);
    expect(await b.remove(x.id, alice)).toBe(false);
    expect(await b.get(x.id, alice)).toBeUndefined();
    expect((await a.get(x.id, bob))!.id).toBe(x.id);
    expect(await listAll(a, bob)).toEqual([small.id, x.id]);
    if (exactTotals) expect((await a.totals()).blobs - start.blobs).toBe(2);

    expect(await b.remove(small.id, bob)).toBe(true);
    expect(await a.inlineBytes(small.id)).toEqual(small.bytes);
    expect((await a.get(small.id, alice))!.record.inline).toBe(true);
    expect(await a.remove(small.id, alice)).toBe(true);
    if (!backend.differs) expect(await b.inlineBytes(small.id)).toBeUndefined();
    expect(await b.get(small.id, alice)).toBeUndefined();

    expect(await b.remove(x.id, bob)).toBe(true);
    expect(await a.get(x.id, bob)).toBeUndefined();
    const end = await a.totals();
    if (exactTotals) expect(end.blobs).toBe(start.blobs);
    // Blocks stay for garbage collection.
    if (exactTotals) expect(end.blocks - start.blocks).toBe(1);
    if (exactTotals) expect(end.storedBytes - start.storedBytes).toBe(2000);

    // Published again after it went: a new manifest, found again by its new holder.
    const again = await publish(b, x, alice);
    expect(again.existed).toBe(false);
    expect((await a.get(x.id, alice))!.blockCount).toBe(1);
  });

  it('retained bytes count the distinct blobs a tenant holds, exactly, through publications and removals', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const alice = tenant();
    const bob = tenant();
    const shared = block(4000);
    const x = blob(shared, block(1000)); // 5000
    const y = blob(shared); // 4000: shares a block with x
    const z = blob(block(300)); // 300, inline
    await publish(a, x, alice);
    expect(await b.retainedBytes(alice)).toBe(5000);
    await publish(b, y, alice);
    expect(await a.retainedBytes(alice)).toBe(9000);
    await publish(a, z, alice, { inline: true });
    await publish(a, x, alice);
    await publish(b, x, bob);
    expect(await a.retainedBytes(alice)).toBe(9300);
    expect(await a.retainedBytes(bob)).toBe(5000);
    // The usage route's pair: the same bytes and the count of the tenant's distinct blobs.
    expect(await b.tenantUsage(alice)).toEqual({ bytes: 9300, objects: 3 });
    expect(await a.tenantUsage(bob)).toEqual({ bytes: 5000, objects: 1 });
    await b.remove(x.id, alice);
    expect(await a.retainedBytes(alice)).toBe(4300);
    expect(await a.retainedBytes(bob)).toBe(5000);
    expect(await a.tenantUsage(alice)).toEqual({ bytes: 4300, objects: 2 });
    expect(await b.tenantUsage(tenant())).toEqual({ bytes: 0, objects: 0 });
    await a.remove(x.id, alice);
    expect(await a.retainedBytes(alice)).toBe(4300);
    await a.remove(y.id, alice);
    await a.remove(z.id, alice);
    await b.remove(x.id, bob);
    expect(await a.retainedBytes(alice)).toBe(0);
    expect(await b.retainedBytes(bob)).toBe(0);
  });

  it('a publication past the quota is refused from inside its atomic step, with nothing half-published', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const other = tenant();
    const x = blob(block(600));
    const y = blob(block(300), block(100)); // 400
    await publish(a, x, owner, { quotaBytes: 1000 });
    const before = await a.totals();
    const beforeList = await listAll(a, owner);

    await expect(publish(b, blob(block(401)), owner, { quotaBytes: 1000, tenantBlocks: true })).rejects.toBeInstanceOf(QuotaExceeded);
    await expect(publish(a, blob(block(401)), owner, { quotaBytes: 1000, inline: true })).rejects.toBeInstanceOf(QuotaExceeded);
    // Held by another tenant: it would still be new bytes to this one.
    await publish(a, y, other);
    const withY = await a.totals();
    await expect(publish(b, y, owner, { quotaBytes: 999, tenantBlocks: true })).rejects.toBeInstanceOf(QuotaExceeded);
    expect(await a.get(y.id, owner)).toBeUndefined();
    expect(await a.retainedBytes(owner)).toBe(600);
    expect(await listAll(b, owner)).toEqual(beforeList);
    if (exactTotals) expect(await a.totals()).toEqual(withY);
    if (exactTotals) expect(withY.blobs - before.blobs).toBe(1);
    if (exactTotals) expect(withY.blocks - before.blocks).toBe(2);

    // Up to the quota exactly is allowed; the refused attempt claimed no block for the tenant.
    const allowed = await publish(b, y, owner, { quotaBytes: 1000, tenantBlocks: true });
    expect(allowed.existed).toBe(false);
    expect(allowed.newToTenant).toEqual([true, true]);
    expect(await a.retainedBytes(owner)).toBe(1000);
    expect(await listAll(a, owner)).toEqual([y.id, x.id]);
  });

  it('newToTenant tells which blocks the tenant had never referenced', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const alice = tenant();
    const bob = tenant();
    const b1 = block();
    const b2 = block();
    const b3 = block();
    const x = blob(b1, b2);
    const y = blob(b2, b3, b3);
    expect((await publish(a, x, alice, { tenantBlocks: true })).newToTenant).toEqual([true, true]);
    expect((await publish(b, y, alice, { tenantBlocks: true })).newToTenant).toEqual([false, true, false]);
    expect((await publish(a, y, bob, { tenantBlocks: true })).newToTenant).toEqual([true, true, false]);
    // Blocks of a blob the tenant removed stay its own.
    await a.remove(x.id, alice);
    expect((await b.publish(x.hex, x.size, 'application/octet-stream', 'fastcdc', x.blocks, undefined, { tenant: alice, tenantBlocks: true })).newToTenant).toEqual([false, false]);
    expect((await publish(a, x, bob)).newToTenant).toBeUndefined();
    expect((await publish(a, blob(b1), tenant(), { tenantBlocks: true, inline: true })).newToTenant).toEqual([true]);
  });

  it('recordUnlisted records the blocks and nothing else', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const owner = tenant();
    const b1 = block(700);
    const b2 = block(300);
    const x = blob(b1, b2, b1);
    const before = await a.totals();
    const start = Date.now();
    const { id, record } = await b.recordUnlisted(x.hex, x.size, 'application/json', 'fastcdc', x.blocks);
    expect(id).toBe(x.id);
    expect(record.seq).toBe(0);
    expect(record.size).toBe(1700);
    expect(record.mediaType).toBe('application/json');
    expect(record.chunker).toBe('fastcdc');
    expect(record.inline).toBeUndefined();
    expect(record.createdAt).toBeGreaterThanOrEqual(start - 1);
    expect(record.refs.length).toBe(3 * 40);
    expect(record.sizes.length).toBe(3 * 4);
    expect(record.refs.toString('hex', 40, 72)).toBe(b2.stored.hex);
    expect(record.sizes.readUInt32LE(8)).toBe(700);
    const after = await a.totals();
    if (exactTotals) expect(after.blobs).toBe(before.blobs);
    if (exactTotals) expect(after.blocks - before.blocks).toBe(2);
    if (exactTotals) expect(after.storedBytes - before.storedBytes).toBe(1000);
    expect(await a.get(x.id, owner)).toBeUndefined();
    // Publishing it later adds the manifest, not the blocks again.
    await publish(a, x, owner);
    const published = await a.totals();
    if (exactTotals) expect(published.blobs - after.blobs).toBe(1);
    if (exactTotals) expect(published.blocks).toBe(after.blocks);
    if (exactTotals) expect(published.storedBytes).toBe(after.storedBytes);
  });

  it('totals count manifests, recorded blocks once each and their bytes; inline blobs add no block', async ({ skip }) => {
    if (backend.differs) skip(backend.differs.totalsByListing);
    const [a, b] = nodes(skip);
    const alice = tenant();
    const bob = tenant();
    const shared = block(1000);
    const before = await b.totals();
    await publish(a, blob(shared, block(24)), alice);
    await publish(b, blob(shared, shared), bob);
    await publish(a, blob(block(10)), alice, { inline: true });
    // Backends whose totals differ (listings, cached) skipped above: these are exact.
    const after = await b.totals();
    expect(after.blobs - before.blobs).toBe(3);
    expect(after.blocks - before.blocks).toBe(2);
    expect(after.storedBytes - before.storedBytes).toBe(1024);
  });

  it('stays exact under concurrent publications and removals of overlapping blobs by several tenants on two nodes', async ({ skip }) => {
    const [a, b] = nodes(skip);
    const tenants = [tenant(), tenant(), tenant(), tenant()];
    const pool = [block(), block(), block(), block(), block(), block()];
    const blobs = Array.from({ length: 10 }, (_, i) => blob(pool[i % 6], pool[(i * 5 + 1) % 6], block(64 + i)));
    const inlineOnes = new Set([blobs[8].id, blobs[9].id]);
    const start = await a.totals();

    // Rounds of operations run all at once; within a round, tenants publish and remove the same ids on both nodes.
    const random = seededRandom(7);
    for (let round = 0; round < 8; round++) {
      await Promise.all(
        Array.from({ length: 60 }, () => {
          const node = random(2) ? a : b;
          const owner = tenants[random(tenants.length)];
          const x = blobs[random(blobs.length)];
          return random(3) ? publish(node, x, owner, { tenantBlocks: true, inline: inlineOnes.has(x.id) }) : node.remove(x.id, owner);
        }),
      );
    }

    const held = new Map<string, Set<string>>();
    for (const owner of tenants) {
      const ids = await listAll(random(2) ? a : b, owner, 3);
      expect(new Set(ids).size).toBe(ids.length);
      let bytes = 0;
      for (const id of ids) {
        const x = blobs.find((candidate) => candidate.id === id)!;
        bytes += x.size;
        if (!held.has(id)) held.set(id, new Set());
        held.get(id)!.add(owner);
        expect((await a.get(id, owner))!.blockCount).toBe(3);
        expect((await b.get(id, owner))!.id).toBe(id);
      }
      for (const x of blobs) if (!ids.includes(x.id)) expect(await a.get(x.id, owner)).toBeUndefined();
      expect(await a.retainedBytes(owner)).toBe(bytes);
    }
    if (exactTotals) expect((await b.totals()).blobs - start.blobs).toBe(held.size);

    // Every hold goes, on either node: a manifest lives exactly as long as its holders.
    await Promise.all([...held].flatMap(([id, owners]) => [...owners].map(async (owner) => expect(await (random(2) ? a : b).remove(id, owner)).toBe(true))));
    for (const owner of tenants) expect(await a.retainedBytes(owner)).toBe(0);
    const end = await a.totals();
    if (exactTotals) expect(end.blobs).toBe(start.blobs);
    if (!backend.differs) for (const x of blobs) expect(await b.inlineBytes(x.id)).toBeUndefined();
    // Each distinct block recorded once: the six shared ones and each blob's own (inline blobs record none).
    if (exactTotals) expect(end.blocks - start.blocks).toBe(6 + 8);
  });

  it('never lets concurrent publications on two nodes take a tenant past its quota', async ({ skip }) => {
    const [a, b] = nodes(skip);
    for (let round = 0; round < 5; round++) {
      const owner = tenant();
      const candidates = Array.from({ length: 40 }, () => blob(block(100)));
      const outcomes = await Promise.allSettled(candidates.map((x, i) => publish(i % 2 ? a : b, x, owner, { quotaBytes: 1000 })));
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(10);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(QuotaExceeded);
      expect(await a.retainedBytes(owner)).toBe(1000);
      expect(await listAll(b, owner)).toHaveLength(10);
    }
  });
});
