/**
 * What the catalog's journal costs a pg-s3 publication of a 4 KiB (inline) blob, measured at the
 * catalog (PgBlobCatalog, 16 publications in flight) on a PostgreSQL cluster of its own and a
 * single-node Ceph radosgw (s3rver when Ceph cannot start, said loudly). svc_publish always adds
 * the entry to journal_outbox in its transaction; the catalogs differ in whether a flusher takes
 * the entries to the bucket (engine/store/pg/journal-flusher.ts, engine/store/s3/journal.ts):
 *   - new blobs: entries left in the outbox, and flushed to segments meanwhile;
 *   - repeats by the same tenant (nothing journaled).
 *
 *   npm run build && node dist/bench/pg-s3-holdings.js [--seconds N]
 */
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { PgBlobCatalog } from '../engine/store/pg/blob-catalog.js';
import { s3Client } from '../engine/store/s3/block-store.js';
import { S3Journal } from '../engine/store/s3/journal.js';
import { benchArgs } from './args.js';
import { requirePostgres } from './postgres-server.js';

const run = promisify(execFile);
const CEPH_SCRIPTS = fileURLToPath(new URL('../../scripts/ceph/', import.meta.url));
const args = benchArgs({
  usage: 'usage: node dist/bench/pg-s3-holdings.js [--seconds N]',
  options: { seconds: { type: 'string', value: 'N', default: '5', help: 'seconds per measured window' } },
});
const seconds = args.number('seconds');
const IN_FLIGHT = 16;
const SIZE = 4096;
const log = (line: string) => process.stderr.write(`[bench:holdings] ${line}\n`);

async function startS3(): Promise<{ endpoint: string; keys: [string, string]; stop(): Promise<void> }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-holdings-ceph-'));
  try {
    const { stdout } = await run(path.join(CEPH_SCRIPTS, 'start.sh'), [dir], { timeout: 120_000 });
    const info = JSON.parse(stdout.trim().split('\n').at(-1)!) as { endpoint: string; accessKeyId: string; secretAccessKey: string };
    log(`radosgw at ${info.endpoint}`);
    return {
      endpoint: info.endpoint,
      keys: [info.accessKeyId, info.secretAccessKey],
      stop: async () => {
        await run(path.join(CEPH_SCRIPTS, 'stop.sh'), [dir]).catch(() => {});
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    log(`!!!!! Ceph radosgw could not start (${(err as Error).message.split('\n')[0]}): FALLING BACK TO s3rver, not a production S3 server`);
    const { default: S3rver } = (await import('s3rver' as string)) as { default: new (o: object) => { run(): Promise<{ port: number }>; close(): Promise<void> } };
    const s3dir = mkdtempSync(path.join(os.tmpdir(), 'svc-holdings-s3rver-'));
    const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: s3dir });
    const { port } = await server.run();
    return { endpoint: `http://127.0.0.1:${port}`, keys: ['S3RVER', 'S3RVER'], stop: async () => { await server.close(); rmSync(s3dir, { recursive: true, force: true }); } };
  }
}

function blob(): { hex: string; bytes: Buffer } {
  const bytes = randomBytes(SIZE);
  return { hex: createHash('sha256').update(bytes).digest('hex'), bytes };
}

/** Publications per second, IN_FLIGHT at once, for `seconds`. */
async function rate(publish: (i: number) => Promise<unknown>): Promise<number> {
  const end = Date.now() + seconds * 1000;
  let done = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (Date.now() < end) await publish(done++);
  }));
  return done / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const pg = await requirePostgres();
  const s3 = await startS3();
  process.env.AWS_ACCESS_KEY_ID = s3.keys[0];
  process.env.AWS_SECRET_ACCESS_KEY = s3.keys[1];
  const location = { kind: 's3' as const, endpoint: s3.endpoint, region: 'us-east-1', bucket: 'svc-holdings', prefix: '', forcePathStyle: true };
  const client = s3Client(location);
  try {
    await client.send(new CreateBucketCommand({ Bucket: location.bucket }));
    const url = await pg.createDatabase('holdings');
    const plain = await PgBlobCatalog.open(url, { poolSize: 10 });
    const journaled = await PgBlobCatalog.open(url, { poolSize: 10, journal: new S3Journal(client, location) });
    const block = (b: { hex: string }) => [{ hex: b.hex, size: SIZE, checksum: 1n, fresh: true }];
    const publishNew = (catalog: PgBlobCatalog, tenant: string) => () => {
      const b = blob();
      return catalog.publish(b.hex, SIZE, 'application/octet-stream', 'fixed', block(b), b.bytes, { tenant });
    };
    // Repeats: a pool of blobs the tenant already holds.
    const pool = Array.from({ length: 256 }, blob);
    for (const b of pool) await journaled.publish(b.hex, SIZE, 'application/octet-stream', 'fixed', block(b), b.bytes, { tenant: 'repeat' });
    const repeat = (i: number) => pool[i % pool.length]!;
    const results: [string, number][] = [];
    for (let round = 0; round < 2; round++) {
      const counted = round > 0;
      const measure = async (name: string, publish: (i: number) => Promise<unknown>) => {
        const r = await rate(publish);
        log(`${counted ? '' : '(warm-up) '}${name}: ${r.toFixed(0)}/s`);
        if (counted) results.push([name, r]);
      };
      await measure('new blobs, entries left in journal_outbox', publishNew(plain, `plain-${round}`));
      await measure('new blobs, entries flushed to the bucket meanwhile', publishNew(journaled, `journaled-${round}`));
      await measure('repeats (nothing journaled)', (i) => { const b = repeat(i); return journaled.publish(b.hex, SIZE, 'application/octet-stream', 'fixed', block(b), b.bytes, { tenant: 'repeat' }); });
    }
    await plain.close();
    await journaled.close();
    const base = results[0]![1];
    process.stdout.write(`| 4 KiB publications, ${IN_FLIGHT} in flight, ${seconds} s | per second | vs entries left in the outbox |\n|---|---|---|\n`);
    for (const [name, r] of results) process.stdout.write(`| ${name} | ${r.toFixed(0)} | ${(r / base).toFixed(2)}x |\n`);
  } finally {
    client.destroy();
    await s3.stop();
    await pg.stop();
  }
}

void main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
