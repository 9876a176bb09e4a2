// Recovery of resumable sessions by the cleanup, on the engine itself (real LMDB, real files):
// the states a crash can leave behind, set up exactly, then one cleanup pass.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../dist/engine/config.js';
import { Engine } from '../dist/engine/engine.js';
import { Logger } from '../dist/engine/log.js';
import { UploadLedger } from '../dist/engine/uploads/ledger.js';
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

/** One part through the engine, as the HTTP layer drives it. */
async function part(e: Engine, id: string, offset: number, bytes: Buffer): Promise<void> {
  const started = e.uploads.beginPart({ tenant: TENANT, id, partId: randomUUID(), offset, length: bytes.length });
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
    expect(e.uploads.status(TENANT, id).tail).toBe('tail-a');
    expect(fs.readdirSync(dir)).toEqual(['tail-a']);
    // A part that crashed while writing its tail leaves the other file longer and wrong.
    fs.writeFileSync(path.join(dir, 'tail-b'), Buffer.alloc(6 * 1024 * 1024, 0x55));
    await part(e, id, pieces[0].length, pieces[1]);
    const afterTwo = e.uploads.status(TENANT, id);
    expect(afterTwo.tail).toBe('tail-b');
    expect(fs.statSync(path.join(dir, 'tail-b')).size).toBe(afterTwo.offset - afterTwo.tailStart);
    await part(e, id, afterTwo.offset, pieces[2]);
    expect(e.uploads.status(TENANT, id).tail).toBe('tail-a');
    expect(fs.readdirSync(dir).sort()).toEqual(['tail-a', 'tail-b']);
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(Buffer.concat(pieces)));
    expect(fs.existsSync(dir)).toBe(false);
  });
});

describe('a staged tail that cannot be read', () => {
  test('fails its part with 500 ingest_failed, holds nothing, and the part succeeds once the tail is back', async () => {
    const e = await open();
    const id = randomUUID();
    const pieces = [seededBytes(5 * 1024 * 1024 + 17, 50), seededBytes(3 * 1024 * 1024 + 5, 51)];
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, pieces[0]);
    const tail = path.join(root!, 'blocks', '.staging', id, 'tail-a');
    fs.renameSync(tail, `${tail}.saved`);
    fs.mkdirSync(tail); // opens, then every read fails (EISDIR)
    expect(() => e.uploads.beginPart({ tenant: TENANT, id, partId: randomUUID(), offset: pieces[0].length, length: pieces[1].length })).toThrow(
      expect.objectContaining({ status: 500, code: 'ingest_failed' }),
    );
    // The lease goes back asynchronously; the offset never moved.
    for (let i = 0; i < 100 && e.uploads.status(TENANT, id).lease; i++) await new Promise((r) => setTimeout(r, 10));
    expect(e.uploads.status(TENANT, id)).toMatchObject({ offset: pieces[0].length, lease: undefined });
    fs.rmdirSync(tail);
    fs.renameSync(`${tail}.saved`, tail);
    await part(e, id, pieces[0].length, pieces[1]);
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(Buffer.concat(pieces)));
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
    const started = e.uploads.beginPart({ tenant: TENANT, id, partId: randomUUID(), offset: 0, length: data.length });
    if (!('part' in started)) throw new Error('unexpected replay');
    const upload = started.part;
    await upload.ready;
    await new Promise<void>((resolve) => upload.ingest.admit(resolve));
    const failure = new Promise<{ status: number; code: string }>((resolve) => (upload.ingest.onError = resolve));
    upload.ingest.push(data.subarray(0, 5 * 1024 * 1024));
    expect(await failure).toMatchObject({ status: 500, code: 'ingest_failed' });
    // The rest of the body arrives before the failure has been answered (as under load).
    upload.ingest.push(data.subarray(5 * 1024 * 1024));
    await expect(upload.finish()).rejects.toMatchObject({ status: 500, code: 'ingest_failed' });
    expect(e.uploads.status(TENANT, id)).toMatchObject({ offset: 0, partCount: 0 });
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
    const ingest = e.startIngest({ declaredLength: data.length });
    await new Promise<void>((resolve) => ingest.admit(resolve));
    ingest.push(data);
    await ingest.end();
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(id, (r) => ({ ...r!, state: 'Committing', pendingBlob: contentId(data), lease: { kind: 'commit', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    await e.close();
    e = await open(); // the cleanup runs at start
    const s = e.uploads.status(TENANT, id);
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
    await ledger.update(id, (r) => ({ ...r!, state: 'Committing', pendingBlob: contentId(data), lease: { kind: 'commit', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    await e.close();
    e = await open();
    expect(e.uploads.status(TENANT, id).state).toBe('Open');
    const committed = await e.uploads.commit(TENANT, id);
    expect(committed.committedBlob).toBe(contentId(data));
  });

  test('a part lease of a dead process does not block; stray tails and orphan staging directories are removed', async () => {
    let e = await open();
    const id = randomUUID();
    await e.uploads.create({ tenant: TENANT, id });
    await part(e, id, 0, seededBytes(5000, 7));
    const ledger = new UploadLedger(e.catalog);
    await ledger.update(id, (r) => ({ ...r!, lease: { kind: 'part', owner: 'the-dead-process', token: 't', until: Date.now() + 60_000 } }));
    const staging = path.join(root!, 'blocks', '.staging');
    fs.writeFileSync(path.join(staging, id, 'tail-b'), 'a part that crashed before it was recorded');
    fs.mkdirSync(path.join(staging, randomUUID()));
    await e.close();
    e = await open();
    expect(fs.readdirSync(path.join(staging, id))).toEqual(['tail-a']);
    expect(fs.readdirSync(staging)).toEqual([id]);
    await part(e, id, 5000, seededBytes(100, 8));
    expect(e.uploads.status(TENANT, id).offset).toBe(5100);
  });
});
