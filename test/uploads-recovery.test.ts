// Recovery of resumable sessions by the cleanup, on the engine itself (real LMDB, real files):
// the states a crash can leave behind, set up exactly, then one cleanup pass.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../dist/engine/base/config.js';
import { Engine } from '../dist/engine/engine.js';
import { Logger } from '../dist/engine/base/log.js';
import { LmdbUploadCatalog as UploadLedger, type OpenSession, type SessionRecord } from '../dist/engine/store/index.js';
import { contentId, seededBytes } from './helpers/http.js';
import { tempRoot } from './helpers/server.js';

const TENANT = '00000000-0000-4000-8000-000000000000';
let engine: Engine | undefined;
let root: string | undefined;

async function open(): Promise<Engine> {
  root ??= tempRoot();
  engine = await Engine.open(loadConfig({ SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2' }), new Logger('silent'));
  return engine;
}

/** The record of a session the test left Open, to write over it as a crash would have left it. */
function openRecord(r: SessionRecord | undefined): OpenSession {
  if (r?.state !== 'Open') throw new Error(`the session is ${r?.state ?? 'gone'}, not Open`);
  return r;
}

/** One part through the engine, as the HTTP layer drives it. */
async function part(e: Engine, id: string, offset: number, bytes: Buffer): Promise<void> {
  const started = await e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset, length: bytes.length }));
  if (!('part' in started)) throw new Error('unexpected replay');
  await started.part.ready;
  await new Promise<void>((resolve) => started.part.ingest.admit(resolve));
  started.part.ingest.push(bytes);
  await started.part.finish();
}

afterEach(async () => {
  await engine?.close();
  engine = undefined;
  if (root) fs.rmSync(root, { recursive: true, force: true });
  root = undefined;
});

describe('staged tails', () => {
  test('parts alternate between two tail files; one a crash left half-written is written over, never read', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(5 * 1024 * 1024 + 17, 40), seededBytes(3 * 1024 * 1024 + 5, 41), seededBytes(2 * 1024 * 1024 + 9, 42)];
    await e.uploads.create({ tenant: TENANT, id });
    const dir = path.join(root!, 'blocks', '.staging', id);
    await part(e, id, 0, pieces[0]);
    expect((await e.uploads.status(TENANT, id)).tail).toBe('tail-a');
    expect(fs.readdirSync(dir)).toEqual(['tail-a']);
    // A part that crashed while writing its tail leaves the other file longer and wrong.
    fs.writeFileSync(path.join(dir, 'tail-b'), Buffer.alloc(6 * 1024 * 1024, 0x55));
    await part(e, id, pieces[0].length, pieces[1]);
    const afterTwo = (await e.uploads.status(TENANT, id));
    expect(afterTwo.tail).toBe('tail-b');
    expect(fs.statSync(path.join(dir, 'tail-b')).size).toBe(afterTwo.offset - afterTwo.tailStart);
    await part(e, id, afterTwo.offset, pieces[2]);
    expect((await e.uploads.status(TENANT, id)).tail).toBe('tail-a');
    expect(fs.readdirSync(dir).sort()).toEqual(['tail-a', 'tail-b']);
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(Buffer.concat(pieces)));
    expect(fs.existsSync(dir)).toBe(false);
  });
});

/** A failed part gives its lease back asynchronously: waits for that (a second at most). */
async function leaseReleased(e: Engine, id: string): Promise<void> {
  for (let i = 0; i < 100 && (await e.uploads.status(TENANT, id)).lease; i++) await new Promise((r) => setTimeout(r, 10));
}

/** What a crash right now would leave of the session: its recorded blocks, then its staged tail. */
async function durableBytes(e: Engine, id: string): Promise<Buffer> {
  const record = (await e.uploads.status(TENANT, id));
  const blocks = await Promise.all((await new UploadLedger(e.catalog).blocks(id)).map((b) => e.blocks.read(b.hex, b.size)));
  const tail = record.tail ? fs.readFileSync(path.join(root!, 'blocks', '.staging', id, record.tail)) : Buffer.alloc(0);
  return Buffer.concat([...blocks, tail]);
}

/** Makes the session's current staged tail unreadable; returns how to put it back. */
async function breakTail(e: Engine, id: string): Promise<() => void> {
  const tail = path.join(root!, 'blocks', '.staging', id, (await e.uploads.status(TENANT, id)).tail!);
  fs.renameSync(tail, `${tail}.saved`);
  fs.mkdirSync(tail); // opens, then every read fails (EISDIR)
  return () => {
    fs.rmdirSync(tail);
    fs.renameSync(`${tail}.saved`, tail);
  };
}

describe('parts answered before their pipeline drains', () => {
  test('each answer leaves blocks and a staged tail that hold exactly the acknowledged bytes', async () => {
    const e = await open();
    const id = randomUUID();
    const data = seededBytes(23 * 1024 * 1024 + 7, 60);
    const cuts = [0, 5 * 1024 * 1024 + 3, 9 * 1024 * 1024, 17 * 1024 * 1024 + 1, data.length];
    await e.uploads.create({ tenant: TENANT, id });
    for (let i = 1; i < cuts.length; i++) {
      await part(e, id, cuts[i - 1], data.subarray(cuts[i - 1], cuts[i]));
      const record = (await e.uploads.status(TENANT, id));
      expect(record.offset).toBe(cuts[i]);
      expect((await durableBytes(e, id)).equals(data.subarray(0, cuts[i]))).toBe(true);
    }
    const duplicates = e.stats.duplicateBlocks;
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(data));
    // New content: the commit takes the live ingest's blocks as they are, it does not cut them
    // again from the staged tail (they would be found present and counted as duplicates).
    expect(e.stats.duplicateBlocks).toBe(duplicates);
  });

  test('the next part sent at once goes on with the same ingest; one sent later starts from the staged tail', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(4 * 1024 * 1024 + 1, 61), seededBytes(3 * 1024 * 1024 + 2, 62), seededBytes(2 * 1024 * 1024 + 3, 63)];
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, pieces[0]);
    // At once: the part does not read the staged tail (it is unreadable and the part succeeds).
    const restore = await breakTail(e, id);
    await part(e, id, pieces[0].length, pieces[1]);
    restore();
    // Later, after the ingest drained and closed: the part reads the staged tail (and fails while it is unreadable).
    await new Promise((r) => setTimeout(r, 400));
    const restoreAgain = await breakTail(e, id);
    const offset = pieces[0].length + pieces[1].length;
    await expect(e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset, length: pieces[2].length }))).rejects.toThrow(
      expect.objectContaining({ kind: 'internal', code: 'ingest_failed' }),
    );
    restoreAgain();
    await leaseReleased(e, id);
    await part(e, id, offset, pieces[2]);
    expect((await durableBytes(e, id)).equals(Buffer.concat(pieces))).toBe(true);
    expect((await e.uploads.commit(TENANT, id)).committedBlob).toBe(contentId(Buffer.concat(pieces)));
  });

  test('blocks an ingest stored after its last answer are recorded by the next part or the commit, not cut again', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(12 * 1024 * 1024 + 5, 64), seededBytes(9 * 1024 * 1024 + 6, 65)];
    const fresh = e.stats.freshBlocks;
    const duplicates = e.stats.duplicateBlocks;
    await e.uploads.create({ tenant: TENANT, id });
    // Each part's ingest closes before the next request, having stored blocks after its answer:
    // the next part, then the commit, replay the staged tail after them and record them (cut
    // again, they would be found present and counted as duplicates).
    await part(e, id, 0, pieces[0]);
    await new Promise((r) => setTimeout(r, 400));
    // A part that fails after replaying leaves them for its retry.
    const failed = await e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: pieces[0].length, length: pieces[1].length }));
    if (!('part' in failed)) throw new Error('unexpected replay');
    await failed.part.ready;
    await new Promise<void>((resolve) => failed.part.ingest.admit(resolve));
    failed.part.ingest.push(pieces[1].subarray(0, 2 * 1024 * 1024));
    await failed.part.release();
    await part(e, id, pieces[0].length, pieces[1]);
    expect((await durableBytes(e, id)).equals(Buffer.concat(pieces))).toBe(true);
    await new Promise((r) => setTimeout(r, 400));
    expect((await e.uploads.commit(TENANT, id)).committedBlob).toBe(contentId(Buffer.concat(pieces)));
    expect(e.stats.duplicateBlocks - duplicates).toBe(0);
    expect(e.stats.freshBlocks - fresh).toBe((await e.manifests.get(contentId(Buffer.concat(pieces))))!.blockCount);
  });

  test('a continued part that fails leaves the session as acknowledged, and its retry completes the object', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(6 * 1024 * 1024 + 5, 64), seededBytes(5 * 1024 * 1024 + 6, 65)];
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, pieces[0]);
    const started = await e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: pieces[0].length, length: pieces[1].length }));
    if (!('part' in started)) throw new Error('unexpected replay');
    await started.part.ready;
    await new Promise<void>((resolve) => started.part.ingest.admit(resolve));
    started.part.ingest.push(pieces[1].subarray(0, 3 * 1024 * 1024));
    await started.part.release(); // the client went away
    expect(await e.uploads.status(TENANT, id)).toMatchObject({ offset: pieces[0].length, partCount: 1, lease: undefined });
    expect((await durableBytes(e, id)).equals(pieces[0])).toBe(true);
    await part(e, id, pieces[0].length, pieces[1]);
    expect((await e.uploads.commit(TENANT, id)).committedBlob).toBe(contentId(Buffer.concat(pieces)));
  });

  test('cancelling, committing or closing the engine right after a part ends its ingest', async () => {
    let e = await open();
    const cancelled = randomUUID();
    const committed = randomUUID();
    const kept = randomUUID();
    const data = seededBytes(7 * 1024 * 1024 + 9, 66);
    for (const id of [cancelled, committed, kept]) {
      await e.uploads.create({ tenant: TENANT, id });
      await part(e, id, 0, data);
    }
    await e.uploads.cancel(TENANT, cancelled);
    expect(fs.existsSync(path.join(root!, 'blocks', '.staging', cancelled))).toBe(false);
    expect((await e.uploads.commit(TENANT, committed)).committedBlob).toBe(contentId(data));
    await e.close(); // with the third session's ingest still live
    e = await open();
    expect((await durableBytes(e, kept)).equals(data)).toBe(true);
    expect((await e.uploads.commit(TENANT, kept)).committedBlob).toBe(contentId(data));
  });
});

describe('an ingest admitted while it is full', () => {
  test('calls its admission back once it takes bytes again, so a body that arrived early still completes', async () => {
    const e = await open();
    // Bytes pushed before admission wait in the backlog; more than the pause mark of them keeps
    // the ingest full after admission until blocks are stored. The admission must still come
    // (a continued part of a resumable upload is admitted into an ingest in the same state).
    const data = seededBytes(20 * 1024 * 1024 + 5, 68);
    const ingest = e.ingests.start({ declaredLength: data.length });
    ingest.push(data.subarray(0, 16 * 1024 * 1024));
    await new Promise<void>((resolve) => ingest.admit(resolve));
    ingest.push(data.subarray(16 * 1024 * 1024));
    expect((await ingest.end()).blob.id).toBe(contentId(data));
  });
});

describe('a staged tail that cannot be read', () => {
  test('fails its part with 500 ingest_failed, holds nothing, and the part succeeds once the tail is back', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(5 * 1024 * 1024 + 17, 50), seededBytes(3 * 1024 * 1024 + 5, 51)];
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, pieces[0]);
    // The next part must start from the staged tail, not go on with the first part's ingest.
    await e.uploads.closeLive(id);
    const restore = await breakTail(e, id);
    await expect(e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: pieces[0].length, length: pieces[1].length }))).rejects.toThrow(
      expect.objectContaining({ kind: 'internal', code: 'ingest_failed' }),
    );
    // The lease goes back asynchronously; the offset never moved.
    await leaseReleased(e, id);
    expect(await e.uploads.status(TENANT, id)).toMatchObject({ offset: pieces[0].length, lease: undefined });
    restore();
    await part(e, id, pieces[0].length, pieces[1]);
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(Buffer.concat(pieces)));
  });
});

describe('a staged tail that does not match its record', () => {
  test('fails parts and the commit with 500 ingest_failed, in this process and after a restart, and never hangs', async () => {
    let e = await open();
    const id = randomUUID();
    const data = seededBytes(5 * 1024 * 1024 + 21, 67);
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, data);
    await e.uploads.closeLive(id);
    const record = (await e.uploads.status(TENANT, id));
    expect(record.offset - record.tailStart).toBeGreaterThan(1);
    fs.truncateSync(path.join(root!, 'blocks', '.staging', id, record.tail!), record.offset - record.tailStart - 1);
    const failure = expect.objectContaining({ kind: 'internal', code: 'ingest_failed' });
    await expect(e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: data.length, length: 10 }))).rejects.toThrow(failure);
    await leaseReleased(e, id);
    await expect(e.uploads.commit(TENANT, id)).rejects.toEqual(failure);
    await e.close();
    e = await open(); // no kept hash: the rebuild reads the blocks and the short tail
    await expect(e.uploads.commit(TENANT, id)).rejects.toEqual(failure);
    expect(await e.uploads.status(TENANT, id)).toMatchObject({ state: 'Open', offset: data.length });
  });
});

describe('a part whose block writes fail', () => {
  test('fails with ingest_failed even when its body ends after the failure', async () => {
    const e = await open();
    const id = randomUUID();
    await e.uploads.create({ tenant: TENANT, id });
    // Files where the workers' write directories go: every block write fails.
    const tmp = path.join(root!, 'blocks', '.tmp');
    for (const p of Array.from({ length: 256 }, (_, i) => path.join(tmp, `w${i}`))) if (!fs.existsSync(p)) fs.writeFileSync(p, '');
    const data = seededBytes(6 * 1024 * 1024, 50);
    const started = await e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: 0, length: data.length }));
    if (!('part' in started)) throw new Error('unexpected replay');
    const upload = started.part;
    await upload.ready;
    await new Promise<void>((resolve) => upload.ingest.admit(resolve));
    const failure = new Promise<{ kind: string; code: string }>((resolve) => (upload.ingest.onError = resolve));
    upload.ingest.push(data.subarray(0, 5 * 1024 * 1024));
    expect(await failure).toMatchObject({ kind: 'internal', code: 'ingest_failed' });
    // The rest of the body arrives before the failure has been answered (as under load).
    upload.ingest.push(data.subarray(5 * 1024 * 1024));
    await expect(upload.finish()).rejects.toMatchObject({ kind: 'internal', code: 'ingest_failed' });
    expect(await e.uploads.status(TENANT, id)).toMatchObject({ offset: 0, partCount: 0 });
  });
});

describe('a part given up before its ingest was admitted', () => {
  test('holds no memory when its admission comes (its client went away during the hash rebuild)', async () => {
    let e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(3 * 1024 * 1024 + 11, 60), seededBytes(1024 * 1024 + 3, 61)];
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, pieces[0]);
    await e.close();
    e = await open(); // no kept hash: the next part waits for its rebuild before it is admitted
    const started = await e.uploads.beginPart(await e.uploads.admitPart({ tenant: TENANT, id, partId: randomUUID(), offset: pieces[0].length, length: pieces[1].length }));
    if (!('part' in started)) throw new Error('unexpected replay');
    started.part.abort();
    await started.part.ready;
    // What the HTTP layer does once the part is ready, gone client or not (server/body-feed.ts).
    await new Promise<void>((resolve) => started.part.ingest.admit(resolve));
    expect({ transfers: e.memory.transfers, bufferedBytes: e.memory.bufferedBytes }).toEqual({ transfers: 0, bufferedBytes: 0 });
    await part(e, id, pieces[0].length, pieces[1]);
    expect(await e.uploads.status(TENANT, id)).toMatchObject({ offset: pieces[0].length + pieces[1].length, partCount: 2 });
  });
});

describe('cleanup after a crash', () => {
  test('a commit that published its manifest but not its state becomes Committed; its staging goes', async () => {
    let e = await open();
    const id = randomUUID();
    const data = seededBytes(3 * 1024 * 1024 + 11, 5);
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, data);
    expect(fs.readdirSync(path.join(root!, 'blocks', '.staging', id))).toHaveLength(1);
    // The crash window: the manifest is published, the session still says Committing under a lease of the dead process.
    const ingest = e.ingests.start({ declaredLength: data.length });
    await new Promise<void>((resolve) => ingest.admit(resolve));
    ingest.push(data);
    await ingest.end();
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(id, (r) => ({ ...openRecord(r), state: 'Committing', pendingBlob: contentId(data), lease: { kind: 'commit', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    await e.close();
    e = await open(); // the cleanup runs at start
    const s = (await e.uploads.status(TENANT, id));
    expect(s.state).toBe('Committed');
    expect(s.committedBlob).toBe(contentId(data));
    expect(fs.existsSync(path.join(root!, 'blocks', '.staging', id))).toBe(false);
  });

  test('a commit that did not publish goes back to Open and can be committed', async () => {
    let e = await open();
    const id = randomUUID();
    const data = seededBytes(2 * 1024 * 1024 + 3, 6);
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, data);
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(id, (r) => ({ ...openRecord(r), state: 'Committing', pendingBlob: contentId(data), lease: { kind: 'commit', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    await e.close();
    e = await open();
    expect((await e.uploads.status(TENANT, id)).state).toBe('Open');
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(data));
  });

  test('a session that moved on after the cleanup listed it is left as it is (another node, a commit that ended)', async () => {
    const e = await open();
    const [committed, expired] = [randomUUID(), randomUUID()];
    const data = seededBytes(100_000, 9);
    await e.uploads.create({ tenant: TENANT, id: committed });
    await part(e, committed, 0, data);
    await e.uploads.commit(TENANT, committed);
    await e.uploads.create({ tenant: TENANT, id: expired });
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(expired, (r) => ({ ...openRecord(r), state: 'Expired', lease: undefined, expiresAt: Date.now() - 1 }));
    // What the cleanup listed a moment earlier: a commit of a dead process, an open session past its expiry.
    const dead = { kind: 'commit' as const, owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 };
    const listed = [
      { ...(await ledger.get(committed))!, state: 'Committing' as const, committedBlob: undefined, lease: dead },
      { ...(await ledger.get(expired))!, state: 'Open' as const },
    ];
    const sessions = (e.uploads as unknown as { deps: { ledger: { all(): AsyncIterable<unknown> } } }).deps.ledger;
    sessions.all = async function* () {
      yield* listed;
    };
    expect(await e.uploads.cleanup()).toMatchObject({ expired: 0, recovered: 0 });
    expect(await ledger.get(committed)).toMatchObject({ state: 'Committed', committedBlob: contentId(data) });
    expect(await ledger.get(expired)).toMatchObject({ state: 'Expired' });
  });

  test('a part lease of a dead process does not block; stray tails and orphan staging directories are removed', async () => {
    let e = await open();
    const id = randomUUID();
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, seededBytes(5000, 7));
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(id, (r) => ({ ...openRecord(r), lease: { kind: 'part', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    const staging = path.join(root!, 'blocks', '.staging');
    fs.writeFileSync(path.join(staging, id, 'tail-b'), 'a part that crashed before it was recorded');
    fs.mkdirSync(path.join(staging, randomUUID()));
    await e.close();
    e = await open();
    expect(fs.readdirSync(path.join(staging, id))).toEqual(['tail-a']);
    expect(fs.readdirSync(staging)).toEqual([id]);
    await part(e, id, 5000, seededBytes(100, 8));
    expect((await e.uploads.status(TENANT, id)).offset).toBe(5100);
  });
});
