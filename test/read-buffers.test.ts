// The read path recycles its block buffers across downloads. A download given up while its next
// block is still being read ahead must not hand that buffer to another download before the read
// lands: the other download would verify its block and then have it overwritten.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../dist/engine/base/config.js';
import { Engine } from '../dist/engine/engine.js';
import { Logger } from '../dist/engine/base/log.js';
import { contentId, seededBytes } from './helpers/http.js';
import { tempRoot } from './helpers/server.js';

const MiB = 1024 * 1024;
let engine: Engine;
let root: string;

async function ingest(bytes: Buffer): Promise<string> {
  const upload = engine.ingests.start({ declaredLength: bytes.length });
  await new Promise<void>((resolve) => upload.admit(resolve));
  for (let at = 0; at < bytes.length; at += MiB) upload.push(bytes.subarray(at, at + MiB));
  return (await upload.end()).blob.id;
}

beforeAll(async () => {
  root = tempRoot();
  engine = await Engine.open(loadConfig({ SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2' }), new Logger('silent'));
});

afterAll(async () => {
  await engine?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('recycled read buffers', () => {
  it('a download given up during its read-ahead never corrupts the next download', async () => {
    const first = seededBytes(12 * MiB, 81);
    const second = seededBytes(12 * MiB, 82);
    const firstId = await ingest(first);
    const secondId = await ingest(second);
    expect([firstId, secondId]).toEqual([contentId(first), contentId(second)]);
    const a = (await engine.manifests.get(firstId))!;
    const b = (await engine.manifests.get(secondId))!;
    expect(a.blockCount).toBeGreaterThan(2);
    for (let round = 0; round < 40; round++) {
      const abandoned = engine.reader.range(a, 0, a.record.size);
      await abandoned.next();
      await abandoned.next(); // block 1 handed out, block 2 being read ahead just now
      const giveUp = abandoned.return(undefined);
      const pieces: Buffer[] = [];
      for await (const piece of engine.reader.range(b, 0, b.record.size)) pieces.push(Buffer.from(piece));
      await giveUp;
      expect(Buffer.concat(pieces).equals(second), `round ${round}`).toBe(true);
    }
  });
});
