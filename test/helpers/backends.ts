// The blob backend the HTTP suites run against: SVC_TEST_BACKEND, `fs` (the default: block files
// and LMDB in the server's data directory), `pg-s3` (a PostgreSQL cluster of the test's own and
// s3rver on loopback ports, started once per test file; each data directory gets a database and
// a bucket of its own, so a server restarted on the same directory finds its blobs again) or
// `s3` (s3rver alone, a bucket per data directory).
// vitest.config.ts runs the blob suites once per backend.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll } from 'vitest';
import { type PgServer, requirePostgres } from './postgres.js';

export const TEST_BACKEND = (process.env.SVC_TEST_BACKEND ?? 'fs') as 'fs' | 'pg-s3' | 's3';

/** s3rver's fixed credentials, given to the server through the AWS SDK's standard variables. */
const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface S3rverProcess {
  port: number;
  close(): Promise<void>;
}

/**
 * s3rver in a child process (test/helpers/s3rver-child.mjs), files under `directory`. With
 * OpenSSL's legacy provider: s3rver makes its continuation tokens with DES, which OpenSSL 3 has
 * only there, and without it every truncated listing (more keys than MaxKeys) fails with 500.
 */
export function startS3rverProcess(directory: string): Promise<S3rverProcess> {
  const child = spawn(process.execPath, ['--openssl-legacy-provider', fileURLToPath(new URL('./s3rver-child.mjs', import.meta.url)), directory], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (!out.includes('\n')) return;
      const { port } = JSON.parse(out) as { port: number };
      resolve({
        port,
        close: async () => {
          child.stdin!.end();
          await exited;
        },
      });
    });
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
  });
}

interface SharedServers {
  pg?: PgServer;
  s3: S3rverProcess;
  /** s3rver's files (every object the file's servers stored): removed with it. */
  s3Dir: string;
  endpoint: string;
  client: S3Client;
}

let shared: Promise<SharedServers> | undefined;
const byRoot = new Map<string, Promise<Record<string, string>>>();
let made = 0;

async function startShared(): Promise<SharedServers> {
  const pg = TEST_BACKEND === 'pg-s3' ? await requirePostgres() : undefined;
  const s3Dir = mkdtempSync(join(os.tmpdir(), 'svc-test-s3-'));
  const s3 = await startS3rverProcess(join(s3Dir, 's3'));
  const endpoint = `http://127.0.0.1:${s3.port}`;
  const client = new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_CREDENTIALS });
  return { pg, s3, s3Dir, endpoint, client };
}

// After the test file's own afterAll hooks (they stop its svc servers; hooks run in reverse
// order of registration): the file's PostgreSQL cluster and s3rver go too. A vitest worker is
// ended with a signal, so a process exit hook would not run and the cluster would be orphaned.
afterAll(async () => {
  if (!shared) return;
  const { pg, s3, s3Dir, client } = await shared;
  shared = undefined;
  byRoot.clear();
  client.destroy();
  await s3.close();
  rmSync(s3Dir, { recursive: true, force: true });
  await pg?.stop();
});

/** The server variables of the backend under test for the data directory `root` (none for fs). */
export function backendEnv(root: string): Promise<Record<string, string>> {
  if (TEST_BACKEND === 'fs') return Promise.resolve({});
  let env = byRoot.get(root);
  if (!env) {
    env = (async (): Promise<Record<string, string>> => {
      shared ??= startShared();
      const { pg, endpoint, client } = await shared;
      const name = `svc_${process.pid}_${++made}`;
      const bucket = name.replace(/_/g, '-');
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
      const s3: Record<string, string> = {
        SVC_S3_ENDPOINT: endpoint,
        SVC_S3_BUCKET: bucket,
        AWS_ACCESS_KEY_ID: S3_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: S3_CREDENTIALS.secretAccessKey,
      };
      if (!pg) return { SVC_BLOB_BACKEND: 's3', ...s3 };
      const url = await pg.createDatabase(name);
      return {
        SVC_BLOB_BACKEND: 'pg-s3',
        SVC_PG_URL: url,
        SVC_PG_POOL: '4',
        ...s3,
      };
    })();
    byRoot.set(root, env);
  }
  return env;
}

/** The names readiness checks for the backend under test (besides diskSpace). */
export const BACKEND_DEPENDENCIES = TEST_BACKEND === 'fs' ? ['blockStore', 'catalog'] : TEST_BACKEND === 's3' ? ['s3'] : ['postgres', 's3'];

/** Blocks the backend holds for the server on `root`: block files (fs) or block objects (pg-s3, s3). */
export async function countStoredBlocks(root: string): Promise<number> {
  if (TEST_BACKEND === 'fs') return countFiles(join(root, 'blocks'));
  const env = await backendEnv(root);
  const { client } = await shared!;
  let count = 0;
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: env.SVC_S3_BUCKET, Prefix: 'blocks/', ContinuationToken }));
    count += page.KeyCount ?? 0;
    ContinuationToken = page.NextContinuationToken;
  } while (ContinuationToken);
  return count;
}

/** Files below `dir`, not counting dot directories (writes in progress, quarantine, staging). */
function countFiles(dir: string): number {
  return readdirSync(dir, { withFileTypes: true }).reduce((n, e) => n + (e.isDirectory() ? (e.name.startsWith('.') ? 0 : countFiles(join(dir, e.name))) : 1), 0);
}

/**
 * `<hex>-<size>` of every block the backend holds for the server on `root`, live or in GC's
 * quarantine: files under blocks/ (dot directories skipped) or blocks/.quarantine (fs), objects
 * under blocks/ or quarantine/ of the server's bucket (pg-s3).
 */
export async function storedBlockNames(root: string, area: 'live' | 'quarantine'): Promise<Set<string>> {
  const out = new Set<string>();
  if (TEST_BACKEND === 'fs') {
    const dir = area === 'live' ? join(root, 'blocks') : join(root, 'blocks', '.quarantine');
    if (!existsSync(dir)) return out;
    for (const part of readdirSync(dir)) {
      if (part.startsWith('.')) continue;
      for (const name of readdirSync(join(dir, part))) out.add(name);
    }
    return out;
  }
  const env = await backendEnv(root);
  const { client } = await shared!;
  let ContinuationToken: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: env.SVC_S3_BUCKET, Prefix: area === 'live' ? 'blocks/' : 'quarantine/', ContinuationToken }));
    for (const o of page.Contents ?? []) out.add(o.Key!.slice(o.Key!.lastIndexOf('/') + 1));
    ContinuationToken = page.NextContinuationToken;
  } while (ContinuationToken);
  return out;
}

/**
 * The staged tails of session `id` on the server on `root`: files in the data directory's
 * staging area (fs) or objects under staging/ of the server's bucket (pg-s3, s3: sessions are shared).
 */
export async function stagedTails(root: string, id: string): Promise<string[]> {
  if (TEST_BACKEND === 'fs') {
    const dir = join(root, 'blocks', '.staging', id);
    return existsSync(dir) ? readdirSync(dir) : [];
  }
  const env = await backendEnv(root);
  const { client } = await shared!;
  const page = await client.send(new ListObjectsV2Command({ Bucket: env.SVC_S3_BUCKET, Prefix: `staging/${id}/` }));
  return (page.Contents ?? []).map((o) => o.Key!.slice(`staging/${id}/`.length));
}
