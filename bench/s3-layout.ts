/**
 * S3 object layout for the pg-s3 backend (issue 19): how fast 1 GiB goes into and out of a real
 * S3 server as one object per block, as 64 MiB pack objects, or as one multipart upload by
 * @aws-sdk/lib-storage (the peer), and how fast 4 KiB objects go in. Against Ceph radosgw on a
 * single-node cluster (scripts/ceph/start.sh; bytes in the memstore OSD's memory) and, for
 * reference, s3rver (a child process; bytes as files under /dev/shm). Scenarios alternate within
 * each round (the order rotates per round); medians over the rounds.
 *
 *   npm run build && node dist/bench/s3-layout.js            1 GiB, 2 rounds
 *   node dist/bench/s3-layout.js --quick                     256 MiB, 1 round, no warm-up
 *   node dist/bench/s3-layout.js --radosgw-only | --s3rver-only
 */
import { spawn } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { type S3Endpoint, s3ClientFor, startRadosgw, startS3rver } from '../test/helpers/s3-servers.js';
import { benchArgs } from './args.js';
import { f, median } from './report.js';

const MiB = 1024 * 1024;
const args = benchArgs({
  usage: 'usage: node dist/bench/s3-layout.js [--quick] [--radosgw-only | --s3rver-only]',
  options: {
    quick: { type: 'boolean', help: '256 MiB, 1 round, no warm-up (default: 1 GiB, 2 rounds)' },
    'radosgw-only': { type: 'boolean', help: 'only radosgw' },
    's3rver-only': { type: 'boolean', help: 'only s3rver' },
    's3rver-child': { type: 'string', value: 'DIR', help: 'internal: serve s3rver from DIR (the bench starts itself so)' },
  },
});
const quick = args.values.quick;
if (args.values['radosgw-only'] && args.values['s3rver-only']) args.fail('--radosgw-only and --s3rver-only exclude each other');
const TOTAL_BYTES = (quick ? 256 : 1024) * MiB;
// No uncounted round: preparing the read objects (2x the bytes) warms both servers up first.
const COUNTED_ROUNDS = quick ? 1 : 2;
const WARMUP_ROUNDS = 0;
const SMALL_OBJECTS = quick ? 1024 : 4096;
const SMALL_BYTES = 4096;
const BUCKET = 'svc-layout';
const SCRATCH = process.env.SVC_BENCH_DIR ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());

interface Sample {
  bytes: number;
  objects: number;
  seconds: number;
}

type Group = 'write' | 'read' | 'small';

interface Scenario {
  name: string;
  group: Group;
  /** The scenario its group's ratios are taken against. */
  peer?: boolean;
  run(client: S3Client, data: Buffer): Promise<Sample>;
}

// ---- S3 operations ----

/** Runs `task(i)` for i in [0, count) with at most `concurrency` at a time. */
async function pool(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

async function timed(bytes: number, objects: number, work: () => Promise<void>): Promise<Sample> {
  const start = process.hrtime.bigint();
  await work();
  return { bytes, objects, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
}

const put = (client: S3Client, key: string, body: Buffer) => client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body }));

/** Reads a GET's body to the end and counts its bytes (nothing is kept). */
async function drain(client: S3Client, key: string, range?: string): Promise<number> {
  const answer = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key, Range: range }));
  let bytes = 0;
  for await (const chunk of answer.Body as AsyncIterable<Uint8Array>) bytes += chunk.length;
  return bytes;
}

/**
 * Deletes `keys` (16 DeleteObject at a time; not timed). By known keys, not by listing: s3rver
 * 3.7.1 answers 500 to a ListObjectsV2 over more than 1,000 keys. Its failed deletes are ignored:
 * it removes a key's emptied directories after the files, and two concurrent deletes under one
 * directory race there (500 InternalError, the key gone).
 */
async function deleteKeys(client: S3Client, keys: string[]): Promise<void> {
  await pool(keys.length, 16, async (i) => {
    await client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: keys[i] })).catch(() => undefined);
  });
}

const keysOf = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}/${i}`);

/** `data` cut into objects of `objectBytes`, `concurrency` PutObjects at a time. */
function putSlices(prefix: string, objectBytes: number, concurrency: number) {
  return async (client: S3Client, data: Buffer): Promise<Sample> => {
    const count = Math.ceil(data.length / objectBytes);
    const sample = await timed(data.length, count, () =>
      pool(count, concurrency, async (i) => {
        await put(client, `${prefix}/${i}`, data.subarray(i * objectBytes, (i + 1) * objectBytes));
      }),
    );
    await deleteKeys(client, keysOf(prefix, count));
    return sample;
  };
}

function multipartUpload(key: string, partSize: number, queueSize: number) {
  return async (client: S3Client, data: Buffer): Promise<Sample> => {
    const sample = await timed(data.length, 1, async () => {
      await new Upload({ client, params: { Bucket: BUCKET, Key: key, Body: data }, partSize, queueSize }).done();
    });
    await deleteKeys(client, [key]);
    return sample;
  };
}

const BIG_OBJECT = 'read/whole';
const BLOCK_OBJECTS = 'read/blocks';

function rangedGets(rangeBytes: number, concurrency: number) {
  return async (client: S3Client, data: Buffer): Promise<Sample> => {
    const count = Math.ceil(data.length / rangeBytes);
    let bytes = 0;
    const sample = await timed(data.length, count, () =>
      pool(count, concurrency, async (i) => {
        const end = Math.min(data.length, (i + 1) * rangeBytes) - 1;
        const read = await drain(client, BIG_OBJECT, `bytes=${i * rangeBytes}-${end}`);
        bytes += read;
      }),
    );
    if (bytes !== data.length) throw new Error(`ranged GETs read ${bytes} bytes of ${data.length}`);
    return sample;
  };
}

async function wholeGet(client: S3Client, data: Buffer): Promise<Sample> {
  let bytes = 0;
  const sample = await timed(data.length, 1, async () => {
    bytes = await drain(client, BIG_OBJECT);
  });
  if (bytes !== data.length) throw new Error(`whole GET read ${bytes} bytes of ${data.length}`);
  return sample;
}

function blockGets(blockBytes: number, concurrency: number) {
  return async (client: S3Client, data: Buffer): Promise<Sample> => {
    const count = Math.ceil(data.length / blockBytes);
    return timed(data.length, count, () =>
      pool(count, concurrency, async (i) => {
        await drain(client, `${BLOCK_OBJECTS}/${i}`);
      }),
    );
  };
}

async function smallPuts(client: S3Client, data: Buffer): Promise<Sample> {
  const sample = await timed(SMALL_OBJECTS * SMALL_BYTES, SMALL_OBJECTS, () =>
    pool(SMALL_OBJECTS, 16, async (i) => {
      await put(client, `small/${i}`, data.subarray(i * SMALL_BYTES, (i + 1) * SMALL_BYTES));
    }),
  );
  await deleteKeys(client, keysOf('small', SMALL_OBJECTS));
  return sample;
}

const SCENARIOS: Scenario[] = [
  ...[1, 4].flatMap((blockMiB) =>
    [4, 8, 16].map((k) => ({ name: `object per block, ${blockMiB} MiB, K=${k}`, group: 'write' as const, run: putSlices(`blocks${blockMiB}k${k}`, blockMiB * MiB, k) })),
  ),
  ...[2, 4].map((k) => ({ name: `64 MiB packs, K=${k}`, group: 'write' as const, run: putSlices(`packs${k}`, 64 * MiB, k) })),
  { name: 'lib-storage Upload, 5 MiB parts x 4 (default)', group: 'write', run: multipartUpload('upload/default', 5 * MiB, 4) },
  { name: 'lib-storage Upload, 16 MiB parts x 8', group: 'write', peer: true, run: multipartUpload('upload/tuned', 16 * MiB, 8) },
  ...[4, 8, 16].map((k) => ({ name: `ranged GETs of 1 MiB, K=${k}`, group: 'read' as const, run: rangedGets(MiB, k) })),
  { name: 'whole-object GET', group: 'read', peer: true, run: wholeGet },
  { name: 'GET object per block, 1 MiB, K=16', group: 'read', run: blockGets(MiB, 16) },
  { name: `4 KiB PutObject, K=16 (${SMALL_OBJECTS} objects)`, group: 'small', run: smallPuts },
];

// ---- servers ----

/** s3rver in a child process, so that it does not share this process's one thread. */
async function startS3rverChild(): Promise<S3Endpoint> {
  const directory = mkdtempSync(path.join(SCRATCH, 'svc-s3rver-'));
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--s3rver-child', directory], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('exit', (code) => reject(new Error(`s3rver child exited (${code}) before it served`)));
  });
  const endpoint = JSON.parse(line) as Omit<S3Endpoint, 'stop'>;
  return {
    ...endpoint,
    storage: `files under ${directory} (${SCRATCH === '/dev/shm' ? 'tmpfs' : 'the scratch directory'}), s3rver in child pid ${child.pid}`,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function serveS3rverChild(directory: string): Promise<void> {
  const server = await startS3rver({ directory });
  const { stop, ...endpoint } = server;
  process.stdout.write(JSON.stringify(endpoint) + '\n');
  // close() waits for the client's keep-alive sockets; the files go with the directory anyway.
  process.once('SIGTERM', () => {
    setTimeout(() => process.exit(0), 2000).unref();
    void stop().then(() => process.exit(0));
  });
}

// ---- the run ----

interface ServerRun {
  server: S3Endpoint;
  client: S3Client;
  samples: Map<string, Sample[]>;
  /** A scenario's failures by round: the run goes on and the table says what failed. */
  failures: Map<string, string[]>;
}

async function prepare(server: S3Endpoint, data: Buffer): Promise<ServerRun> {
  const client = s3ClientFor(server);
  await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  // What the read scenarios read: one object of all the bytes, and the same bytes as 1 MiB objects.
  await new Upload({ client, params: { Bucket: BUCKET, Key: BIG_OBJECT, Body: data }, partSize: 16 * MiB, queueSize: 8 }).done();
  await pool(Math.ceil(data.length / MiB), 16, async (i) => {
    await put(client, `${BLOCK_OBJECTS}/${i}`, data.subarray(i * MiB, (i + 1) * MiB));
  });
  return { server, client, samples: new Map(), failures: new Map() };
}

async function runRound(run: ServerRun, data: Buffer, round: number, counted: boolean): Promise<void> {
  const order = SCENARIOS.map((_, i) => SCENARIOS[(i + round) % SCENARIOS.length]!);
  for (const scenario of order) {
    let sample: Sample;
    try {
      sample = await scenario.run(run.client, data);
    } catch (error) {
      const message = `${(error as Error).name}: ${(error as Error).message}`;
      run.failures.set(scenario.name, [...(run.failures.get(scenario.name) ?? []), message]);
      console.error(`  ${run.server.kind} round ${round}: ${scenario.name}: FAILED ${message}`);
      continue;
    }
    if (counted) run.samples.set(scenario.name, [...(run.samples.get(scenario.name) ?? []), sample]);
    const mbs = sample.bytes / 1e6 / sample.seconds;
    console.error(`  ${run.server.kind} round ${round}${counted ? '' : ' (warm-up)'}: ${scenario.name}: ${f(mbs)} MB/s, ${f(sample.objects / sample.seconds)} objects/s`);
  }
}

function renderTable(run: ServerRun): string[] {
  const rate = (samples: Sample[], of: (s: Sample) => number) => samples.map((s) => of(s) / s.seconds);
  const mbs = (s: Sample) => s.bytes / 1e6;
  const peerRate = (group: Group) => {
    const peer = SCENARIOS.find((s) => s.group === group && s.peer);
    return peer ? median(rate(run.samples.get(peer.name) ?? [], mbs)) : undefined;
  };
  const lines = [
    `**${run.server.kind}** (${run.server.storage})`,
    '',
    '| Scenario | MB/s median [min-max] | objects/s | ratio to peer |',
    '|---|---|---|---|',
  ];
  for (const scenario of SCENARIOS) {
    const samples = run.samples.get(scenario.name) ?? [];
    const failures = run.failures.get(scenario.name) ?? [];
    if (failures.length > 0) {
      lines.push(`| ${scenario.name} | failed in ${failures.length} of ${failures.length + samples.length} rounds: ${failures[0]} | | |`);
      continue;
    }
    const rates = rate(samples, mbs);
    const peer = peerRate(scenario.group);
    const ratio = peer ? `${f(median(rates) / peer, 2)}x${scenario.peer ? ' (peer)' : ''}` : '-';
    lines.push(
      `| ${scenario.name} | ${f(median(rates))} [${f(Math.min(...rates))}-${f(Math.max(...rates))}] | ${f(median(rate(samples, (s) => s.objects)))} | ${ratio} |`,
    );
  }
  return lines;
}

async function main(): Promise<void> {
  const wanted = (kind: S3Endpoint['kind']) => !args.values[kind === 'radosgw' ? 's3rver-only' : 'radosgw-only'];
  const data = Buffer.allocUnsafe(TOTAL_BYTES);
  for (let at = 0; at < data.length; at += 64 * MiB) randomFillSync(data, at, Math.min(64 * MiB, data.length - at));
  const servers: S3Endpoint[] = [];
  const startedAt = new Date().toISOString();
  // Ctrl-C or a kill still stops the Ceph daemons (they are not this process's children).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void Promise.allSettled(servers.map((server) => server.stop())).then(() => process.exit(130)));
  }
  try {
    if (wanted('radosgw')) {
      // Capacity only: memstore holds what is stored (about 2 GiB of read objects plus what rgw's
      // garbage collector has not reclaimed yet).
      const radosgw = await startRadosgw({ memstoreBytes: 12 * 1024 ** 3 });
      if ('skip' in radosgw) console.error(`radosgw skipped: ${radosgw.skip}`);
      else servers.push(radosgw);
    }
    if (wanted('s3rver')) servers.push(await startS3rverChild());
    const runs: ServerRun[] = [];
    for (const server of servers) runs.push(await prepare(server, data));
    for (let round = 0; round < WARMUP_ROUNDS + COUNTED_ROUNDS; round++) {
      for (const run of runs) await runRound(run, data, round, round >= WARMUP_ROUNDS);
    }
    const cpu = os.cpus();
    console.log(`### S3 object layout: ${TOTAL_BYTES / MiB} MiB, ${COUNTED_ROUNDS} counted rounds (${startedAt})`);
    console.log('');
    console.log(`${cpu.length} x ${cpu[0]?.model ?? 'cpu'}, ${f(os.totalmem() / 1024 ** 3)} GiB, Node ${process.version}; client @aws-sdk/client-s3 defaults (signed payload, CRC32), one process.`);
    console.log('Ratios: writes against the lib-storage Upload of 16 MiB parts x 8, reads against the whole-object GET.');
    for (const run of runs) console.log(['', ...renderTable(run)].join('\n'));
    for (const run of runs) run.client.destroy();
  } finally {
    for (const server of servers) await server.stop();
  }
}

const childDirectory = args.values['s3rver-child'];
if (childDirectory !== undefined) await serveS3rverChild(childDirectory);
else await main();
