/**
 * tus clients into svc and into the tus reference server, same run: one file uploaded by
 * tus-js-client (Node, a file stream with its size, 64 MiB chunks: the client holds one chunk)
 * to svc's /files/ and to `@tus/server` (bench/tus-server.ts), alternating svc, tus, tus, svc, ...
 * Every round uploads a fresh deterministic random file (svc stores every block as new, as tus
 * writes every byte).
 * - default: svc on fs against `@tus/file-store`; target svc ≥ 1.5x tus's throughput;
 * - `--pg-s3`: svc on pg-s3 (its own PostgreSQL, Ceph radosgw) against `@tus/s3-store` on the
 *   same radosgw (buckets apart); recorded, no target.
 *
 *   npm run bench:tus -- [--quick] [--pg-s3] [--size=MiB] [--rounds=N]
 *
 * Prints a table; the figures go to docs/performance.md by hand.
 */
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import * as tus from 'tus-js-client';
import { benchArgs } from './args.js';
import { CpuWindow } from './cpu.js';
import { writeRandomFile } from './large.js';
import { f, median } from './report.js';
import { TusProcess } from './resumable.js';
import { ServerProcess } from './server-process.js';
import { tmpParentFor } from './host.js';

const MiB = 1024 * 1024;
const TARGET = 1.5;
const args = benchArgs({
  usage: 'usage: node dist/bench/tus-clients.js [--quick] [--pg-s3] [--size=MiB] [--rounds=N]',
  options: {
    quick: { type: 'boolean', help: '256 MiB, 2 rounds (default: 1,024 MiB, 3 rounds)' },
    'pg-s3': { type: 'boolean', help: 'svc on pg-s3 (its own PostgreSQL, Ceph radosgw) against @tus/s3-store on the same radosgw' },
    size: { type: 'string', value: 'MiB', help: 'the file uploaded, MiB (default 1,024; 256 with --quick)' },
    rounds: { type: 'string', value: 'N', help: 'rounds (default 3; 2 with --quick)' },
  },
});
const { quick, 'pg-s3': pgS3 } = args.values;
const sizeMiB = args.number('size') ?? (quick ? 256 : 1024);
const rounds = args.number('rounds') ?? (quick ? 2 : 3);
const repo = path.resolve(import.meta.dirname, '..', '..');

interface Run { server: 'svc' | 'tus'; round: number; seconds: number; mbs: number; serverCpu: number; clientCpu: number; blobId?: string }

function upload(endpoint: string, file: string, size: number): Promise<{ seconds: number; blobId?: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let blobId: string | undefined;
    const u = new tus.Upload(createReadStream(file, { highWaterMark: 4 * MiB }), {
      endpoint,
      uploadSize: size,
      chunkSize: 64 * MiB,
      retryDelays: [],
      metadata: { filename: path.basename(file), filetype: 'application/octet-stream' },
      onAfterResponse: (_req, res) => {
        blobId = res.getHeader('X-Svc-Blob-Id') ?? blobId;
      },
      onSuccess: () => resolve({ seconds: (performance.now() - started) / 1000, blobId }),
      onError: reject,
    });
    u.start();
  });
}

/** PostgreSQL and radosgw for --pg-s3, with what svc and the tus server need to use them. */
async function objectStore(bytes: number): Promise<{ svcEnv: NodeJS.ProcessEnv; tusEnv: NodeJS.ProcessEnv; stop: () => Promise<void> }> {
  const { BUCKET, REGION, client, startS3 } = await import('./pg-s3.js');
  const { requirePostgres } = await import('./postgres-server.js');
  const { CreateBucketCommand } = await import('@aws-sdk/client-s3');
  // Memstore holds every round's bytes of both sides (nothing is deleted between rounds), with room to spare.
  const [pg, s3] = await Promise.all([requirePostgres(), startS3(Math.ceil(bytes * 1.25))]);
  const c = client(s3);
  await c.send(new CreateBucketCommand({ Bucket: BUCKET }));
  const credentials = { AWS_ACCESS_KEY_ID: s3.accessKeyId, AWS_SECRET_ACCESS_KEY: s3.secretAccessKey, AWS_REGION: REGION };
  return {
    svcEnv: {
      SVC_BLOB_BACKEND: 'pg-s3', SVC_PG_URL: await pg.createDatabase('bench_tus'), SVC_S3_ENDPOINT: s3.endpoint, SVC_S3_BUCKET: BUCKET, SVC_S3_PREFIX: 'svc/',
      SVC_S3_REGION: REGION, SVC_S3_FORCE_PATH_STYLE: 'true', ...credentials,
    },
    // @tus/s3-store writes at the bucket's root: its own bucket keeps it apart from svc's prefix.
    tusEnv: { TUS_S3_ENDPOINT: s3.endpoint, TUS_S3_BUCKET: `${BUCKET}-tus`, ...credentials },
    stop: async () => {
      await s3.stop();
      await pg.stop();
    },
  };
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(path.join(tmpParentFor(repo), 'svc-bench-tus-'));
  const size = sizeMiB * MiB;
  const store = pgS3 ? await objectStore(2 * size * rounds) : undefined;
  if (store) {
    const { BUCKET } = await import('./pg-s3.js');
    const { CreateBucketCommand, S3Client } = await import('@aws-sdk/client-s3');
    const e = store.tusEnv;
    await new S3Client({ endpoint: e.TUS_S3_ENDPOINT, region: e.AWS_REGION, forcePathStyle: true, credentials: { accessKeyId: e.AWS_ACCESS_KEY_ID!, secretAccessKey: e.AWS_SECRET_ACCESS_KEY! } })
      .send(new CreateBucketCommand({ Bucket: `${BUCKET}-tus` }));
  }
  const svc = await ServerProcess.start({ entry: path.join(repo, 'dist', 'server', 'main.js'), fsRoot: path.join(tmp, 'svc'), durability: 'relaxed', env: store?.svcEnv, startTimeoutMs: 60_000 });
  mkdirSync(path.join(tmp, 'tus'));
  const reference = await TusProcess.start(path.join(repo, 'dist', 'bench', 'tus-server.js'), path.join(tmp, 'tus'), store?.tusEnv);
  const runs: Run[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      const file = path.join(tmp, `round-${round}.bin`);
      writeRandomFile(file, size, `tus-clients-${round}`);
      const order: Array<'svc' | 'tus'> = round % 2 === 1 ? ['svc', 'tus'] : ['tus', 'svc'];
      for (const server of order) {
        execFileSync('sync');
        const pid = server === 'svc' ? svc.pid : reference.pid;
        const cpu = new CpuWindow(pid);
        const endpoint = server === 'svc' ? `http://127.0.0.1:${svc.port}/files/` : `http://127.0.0.1:${reference.port}/files`;
        const { seconds, blobId } = await upload(endpoint, file, size);
        const used = cpu.end();
        runs.push({ server, round, seconds, mbs: size / 1e6 / seconds, serverCpu: used.serverPercent ?? NaN, clientCpu: used.benchPercent, blobId });
        console.error(`[tus-clients] round ${round} ${server}: ${f(size / 1e6 / seconds)} MB/s in ${f(seconds, 2)} s, server CPU ${f(used.serverPercent)}%, client CPU ${f(used.benchPercent)}%`);
      }
      rmSync(file);
    }
  } finally {
    await svc.stop();
    await reference.stop();
    await store?.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
  const svcMbs = median(runs.filter((r) => r.server === 'svc').map((r) => r.mbs));
  const tusMbs = median(runs.filter((r) => r.server === 'tus').map((r) => r.mbs));
  const ratio = svcMbs / tusMbs;
  const verdict = pgS3 ? 'recorded' : `target ≥ ${TARGET}x: ${ratio >= TARGET ? 'met' : 'NOT met'}`;
  console.log(`| tus-js-client, ${sizeMiB} MiB in 64 MiB chunks, ${rounds} rounds | svc (${pgS3 ? 'pg-s3' : 'fs'}) ${f(svcMbs)} MB/s | @tus/server + ${pgS3 ? 's3-store' : 'file-store'} ${f(tusMbs)} MB/s | ${f(ratio, 2)}x (${verdict}) |`);
  console.log(`rounds: ${runs.map((r) => `${r.round}:${r.server} ${f(r.mbs)} MB/s (server CPU ${f(r.serverCpu)}%, client ${f(r.clientCpu)}%)`).join(', ')}`);
}

await main();
