/**
 * svc's own CPU per block PUT to S3 (issue 40): `BlockPuts` (engine/store/s3/block-put.ts), the
 * request every pg-s3 block is stored by, on this thread (no worker), to a single-node radosgw
 * (scripts/ceph/start.sh, as bench/pg-s3.ts starts it; s3rver only when Ceph cannot start, said
 * loudly, and then the server's CPU is this process's too). N fresh blocks per cell, 8 in
 * flight, one piece each, `If-None-Match: *` as on radosgw; the cell's process CPU
 * (process.cpuUsage: all threads) / N; medians over rounds, after an uncounted pass. With
 * --before=DIR the BlockPuts of an earlier build too, in the same process, cells alternating.
 *
 * Why BlockPuts sends on an undici Pool with its own signer (commit 3c1900e has the variants
 * selectable: `node dist/bench/block-put-cost.js --only=TEXT` there). µs CPU per PUT, medians of
 * 7 rounds, cells alternating (order rotated each round), 2000 × 64 KiB and 400 × 1 MiB per
 * cell, 2 CPUs shared with other work:
 *
 *   | variant                               | 64 KiB | 1 MiB |  (run 1 / run 2 / run 3; load average 1-min during the run)
 *   | node:http + @smithy/signature-v4 (was) | 340 / 380 / 249 | 763 / 862 / 700 |  (~10 / ~12 / 0.5-10)
 *   | undici request() + smithy             | 268 / 356 / 246 | 707 / 855 / 625 |
 *   | undici request() + lean signer        | 245 / 242 / 208 | 632 / 701 / 570 |
 *   | undici dispatch() + lean signer (now) | 201 / 279 / 194 | 610 / 679 / 550 |
 *   | node:http + lean signer               | 264 / 360 / 228 | 743 / 784 / 631 |
 *
 * Together the two levers take 20-40% off at 64 KiB and ~20% at 1 MiB (run 3, the quietest: 22%
 * and 21%); either alone saves 0-20% depending on the run. At 1 MiB ~40% of what is left is
 * system time (the kernel's copy of the body to the loopback socket).
 *
 * The final build against the one before it (`--before`, d80c7cf: node:http + smithy), 9 rounds,
 * load average 5-11: 225 against 312 µs per 64 KiB PUT (-28%), 718 against 873 per 1 MiB (-18%);
 * lower in every round at both sizes.
 */
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHash, randomBytes } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { BlockPuts } from '../engine/store/s3/block-put.js';
import { idleTimeoutOf, s3Client } from '../engine/store/s3/block-store.js';
import type { S3Location } from '../engine/store/block-store.js';
import { benchArgs } from './args.js';
import { BUCKET, REGION, client as benchClient, deletePrefix, type S3Server, startS3 } from './pg-s3.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const IN_FLIGHT = 8;
const WARMUP = 40;

const log = (line: string) => process.stderr.write(`[bench:block-put-cost] ${line}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (x: number, d = 0) => x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });

interface Size {
  label: string;
  bytes: number;
  count: number;
  body: Buffer;
  hex: string;
}

/** What the bench asks of a BlockPuts, this build's or an earlier one's. */
interface Puts {
  available(): Promise<boolean>;
  put(key: string, hex: string, size: number, pieces: readonly Uint8Array[], ifAbsent: boolean): Promise<'written' | 'present'>;
  close?(): Promise<void>;
}

/**
 * The BlockPuts of the build in `dir` (`dist/` of a built worktree), on svc's client of that build.
 * A build from before the undici pool (its BlockPuts has no `close`) took the client's keep-alive agents, not a connection count.
 */
async function blockPutsOf(dir: string, location: S3Location): Promise<{ client: { destroy(): void }; puts: Puts }> {
  const built = (file: string) => pathToFileURL(path.resolve(dir, 'dist/engine/store/s3', file)).href;
  const { BlockPuts: Before } = (await import(built('block-put.js'))) as { BlockPuts: new (...args: unknown[]) => Puts };
  const { s3Client: clientOf } = (await import(built('block-store.js'))) as { s3Client: (l: S3Location, agents?: object) => { destroy(): void } };
  if (typeof Before.prototype.close === 'function') {
    const client = clientOf(location);
    return { client, puts: new Before(client, location, 64, idleTimeoutOf(location)) };
  }
  const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 64 }), https: new https.Agent({ keepAlive: true, maxSockets: 64 }) };
  const client = clientOf(location, agents);
  return { client, puts: new Before(client, location, agents) };
}

/** Puts `count` blocks of `size` under `prefix`, `IN_FLIGHT` at a time; each must be written. */
async function putAll(puts: Puts, size: Size, prefix: string, count: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) {
      const outcome = await puts.put(`${prefix}${i}`, size.hex, size.bytes, [size.body], true);
      if (outcome !== 'written') throw new Error(`${prefix}${i}: ${outcome}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
}

async function main(): Promise<void> {
  const args = benchArgs({
    usage: 'usage: node dist/bench/block-put-cost.js [--rounds=N] [--small=N] [--large=N] [--before=DIR]',
    options: {
      rounds: { type: 'string', value: 'N', default: '5', help: 'rounds; each runs every variant at every size once' },
      small: { type: 'string', value: 'N', default: '2000', help: 'PUTs of 64 KiB per cell' },
      large: { type: 'string', value: 'N', default: '400', help: 'PUTs of 1 MiB per cell' },
      before: { type: 'string', value: 'DIR', help: 'also the BlockPuts of the build in DIR (a built worktree of an earlier commit), cells alternating' },
    },
  });
  const rounds = args.number('rounds');
  const sizes: Size[] = [
    { label: '64 KiB', bytes: 64 * KiB, count: args.number('small') },
    { label: '1 MiB', bytes: MiB, count: args.number('large') },
  ].map((s) => {
    const body = randomBytes(s.bytes);
    return { ...s, body, hex: createHash('sha256').update(body).digest('hex') };
  });
  let s3: S3Server | undefined;
  try {
    s3 = await startS3(2 * 1024 * MiB);
    log(`${s3.kind} at ${s3.endpoint}`);
    const admin = benchClient(s3);
    await admin.send(new CreateBucketCommand({ Bucket: BUCKET })).catch(() => {});
    const location: S3Location = { kind: 's3', endpoint: s3.endpoint, region: REGION, bucket: BUCKET, prefix: '', forcePathStyle: true, conditionalPut: true };
    // As S3BlockStore makes them: svc's client (for its credentials and endpoint rules), 64 connections.
    const client = s3Client(location);
    const stores: Array<{ name: string; client: { destroy(): void }; puts: Puts }> = [{ name: 'BlockPuts (this build)', client, puts: new BlockPuts(client, location, 64, idleTimeoutOf(location)) }];
    if (args.values.before) stores.push({ name: `BlockPuts of ${args.values.before}`, ...(await blockPutsOf(args.values.before, location)) });
    for (const s of stores) if (!(await s.puts.available())) throw new Error(`${s.name}: BlockPuts cannot serve ${s3.endpoint}`);
    // One uncounted pass over every cell first: the code of every variant compiled and the sockets open.
    for (const size of sizes) for (const [i, store] of stores.entries()) await putAll(store.puts, size, `bench/warm/${i}-${size.bytes}-`, 200);
    await deletePrefix(admin, 'bench/warm/');
    const results = new Map<string, number[]>();
    const rates = new Map<string, number[]>();
    const system = new Map<string, number[]>();
    const cells = sizes.flatMap((size) => stores.map((store) => ({ size, store })));
    let cellNo = 0;
    for (let round = 0; round < rounds; round++) {
      // Rotated each round: no variant always follows the same one.
      const order = cells.map((_, i) => cells[(i + round * 3) % cells.length]!);
      for (const { size, store } of order) {
        const prefix = `bench/${cellNo++}/`;
        await putAll(store.puts, size, `${prefix}warm-`, WARMUP);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await putAll(store.puts, size, prefix, size.count);
        const seconds = (performance.now() - t0) / 1000;
        const cpu = process.cpuUsage(cpu0);
        const key = `${size.label}|${store.name}`;
        const perPut = (cpu.user + cpu.system) / size.count;
        (system.get(key) ?? system.set(key, []).get(key)!).push(cpu.system / size.count);
        (results.get(key) ?? results.set(key, []).get(key)!).push(perPut);
        (rates.get(key) ?? rates.set(key, []).get(key)!).push(size.count / seconds);
        log(`round ${round + 1}/${rounds} ${size.label} ${store.name}: ${fmt(perPut)} µs CPU per PUT (${fmt(cpu.system / size.count)} system), ${fmt(size.count / seconds)} PUT/s, load ${os.loadavg()[0]!.toFixed(2)}`);
        await deletePrefix(admin, prefix);
      }
      await s3.reclaim().catch((err: Error) => log(`reclaim: ${err.message}`));
    }
    const lines = [
      `## svc CPU per block PUT (BlockPuts, one thread, ${IN_FLIGHT} in flight, If-None-Match: *) to ${s3.kind}${s3.kind === 's3rver' ? ' -- FALLBACK, NOT radosgw: the server\'s CPU is counted too' : ''}`,
      `${new Date().toISOString()}, ${rounds} rounds, ${sizes.map((s) => `${s.count} × ${s.label}`).join(' and ')} per cell, ${os.cpus().length} CPUs, load average at the end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`,
      '',
      `| variant | ${sizes.map((s) => `${s.label}: µs CPU per PUT (median) | of it system | ${s.label}: rounds | ${s.label}: PUT/s`).join(' | ')} |`,
      `| --- | ${sizes.map(() => '---: | ---: | --- | ---:').join(' | ')} |`,
    ];
    for (const store of stores) {
      const row = sizes.map((s) => {
        const xs = results.get(`${s.label}|${store.name}`)!;
        return `${fmt(median(xs))} | ${fmt(median(system.get(`${s.label}|${store.name}`)!))} | ${xs.map((x) => fmt(x)).join(', ')} | ${fmt(median(rates.get(`${s.label}|${store.name}`)!))}`;
      });
      lines.push(`| ${store.name} | ${row.join(' | ')} |`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    for (const s of stores) {
      await s.puts.close?.();
      s.client.destroy();
    }
    admin.destroy();
  } finally {
    await s3?.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
