// The S3 listener driven by the command-line clients people use: Debian's aws-cli (/usr/bin/aws,
// not a pyenv shim) and rclone, security on with a keys file and two tenants. `aws s3 cp` up (a
// 20 MiB file: multipart) and down, `aws s3 sync` both ways, `aws s3 ls`, `aws s3 presign` read
// with fetch, `aws s3api head-object`; `rclone copy` both ways, `rclone check` (MD5s), `rclone
// lsjson`; the second tenant cannot read the first's bucket. Each tool's tests are skipped, with a
// message, when it is not installed (.ci/run installs both).

import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededBytes } from './helpers/http.js';
import { type TestServer, startServer, tempRoot } from './helpers/server.js';

const run = promisify(execFile);
const AWS = '/usr/bin/aws';
const RCLONE = '/usr/bin/rclone';
const haveAws = fs.existsSync(AWS);
const haveRclone = fs.existsSync(RCLONE);
if (!haveAws) console.warn(`${AWS} is not installed (apt-get install awscli): the aws-cli tests are skipped`);
if (!haveRclone) console.warn(`${RCLONE} is not installed (apt-get install rclone): the rclone tests are skipped`);

const MiB = 1024 * 1024;
const KEY_A = { accessKeyId: 'AKIACLITEAMA0001', secretAccessKey: 'cli-team-a-secret-0123456789abcdefghijk' };
const KEY_B = { accessKeyId: 'AKIACLITEAMB0001', secretAccessKey: 'cli-team-b-secret-0123456789abcdefghijk' };

let server: TestServer;
const dir = tempRoot('svc-s3-cli-');
const md5 = (file: string) => crypto.createHash('md5').update(fs.readFileSync(file)).digest('hex');

/** Runs `aws` as `key`; its stdout (a failure rejects with its stderr). */
async function aws(key: { accessKeyId: string; secretAccessKey: string }, ...args: string[]): Promise<string> {
  const config = path.join(dir, 'aws-config');
  fs.writeFileSync(config, '[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n');
  const { stdout } = await run(AWS, ['--endpoint-url', server.s3Url, ...args], {
    env: {
      PATH: process.env.PATH, HOME: dir, AWS_CONFIG_FILE: config, AWS_SHARED_CREDENTIALS_FILE: path.join(dir, 'none'), AWS_EC2_METADATA_DISABLED: 'true',
      AWS_ACCESS_KEY_ID: key.accessKeyId, AWS_SECRET_ACCESS_KEY: key.secretAccessKey, AWS_DEFAULT_REGION: 'us-east-1',
    },
    maxBuffer: 16 * MiB,
  });
  return stdout;
}

/** Runs `rclone` with a remote `svc:` as `key`. */
async function rclone(key: { accessKeyId: string; secretAccessKey: string }, ...args: string[]): Promise<string> {
  const { stdout } = await run(RCLONE, [...args, '--config', path.join(dir, 'rclone.conf')], {
    env: {
      PATH: process.env.PATH, HOME: dir,
      RCLONE_CONFIG_SVC_TYPE: 's3', RCLONE_CONFIG_SVC_PROVIDER: 'Other', RCLONE_CONFIG_SVC_ENDPOINT: server.s3Url, RCLONE_CONFIG_SVC_REGION: 'us-east-1',
      RCLONE_CONFIG_SVC_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_SVC_ACCESS_KEY_ID: key.accessKeyId, RCLONE_CONFIG_SVC_SECRET_ACCESS_KEY: key.secretAccessKey,
    },
    maxBuffer: 16 * MiB,
  });
  return stdout;
}

/** A tree of files: a 20 MiB one (multipart for aws-cli), small ones, a nested one. */
function makeTree(root: string): void {
  fs.mkdirSync(path.join(root, 'nested'), { recursive: true });
  fs.writeFileSync(path.join(root, 'big.bin'), seededBytes(20 * MiB + 17, 1));
  fs.writeFileSync(path.join(root, 'a.txt'), 'alpha\n');
  fs.writeFileSync(path.join(root, 'nested', 'b.json'), JSON.stringify({ b: 2 }));
  fs.writeFileSync(path.join(root, 'nested', 'c.bin'), seededBytes(300_000, 3));
}

function sameTree(left: string, right: string): void {
  for (const name of ['big.bin', 'a.txt', 'nested/b.json', 'nested/c.bin']) expect(md5(path.join(right, name)), name).toBe(md5(path.join(left, name)));
}

beforeAll(async () => {
  if (!haveAws && !haveRclone) return;
  const keysFile = path.join(dir, 'keys.json');
  fs.writeFileSync(keysFile, JSON.stringify({
    keys: [
      { ...KEY_A, tenant: 'cli-a', sub: 'cli-robot-a', scope: 'blob.read blob.write blob.delete' },
      { ...KEY_B, tenant: 'cli-b', sub: 'cli-robot-b', scope: 'blob.read blob.write blob.delete' },
    ],
  }));
  fs.writeFileSync(path.join(dir, 'rclone.conf'), '');
  makeTree(path.join(dir, 'tree'));
  server = await startServer({ SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: 's3-cli-test-secret-0123456789abcdef', SVC_S3_KEYS_FILE: keysFile });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!haveAws)('aws-cli', () => {
  it('mb, cp up (multipart) and down, ls, head-object', async () => {
    await aws(KEY_A, 's3', 'mb', 's3://cli-bucket');
    const big = path.join(dir, 'tree', 'big.bin');
    await aws(KEY_A, 's3', 'cp', big, 's3://cli-bucket/one/big.bin');
    const head = JSON.parse(await aws(KEY_A, 's3api', 'head-object', '--bucket', 'cli-bucket', '--key', 'one/big.bin'));
    expect(head.ContentLength).toBe(20 * MiB + 17);
    // aws-cli's 8 MiB parts: three.
    expect(head.ETag).toMatch(/^"[0-9a-f]{32}-3"$/);
    const down = path.join(dir, 'big.down');
    await aws(KEY_A, 's3', 'cp', 's3://cli-bucket/one/big.bin', down);
    expect(md5(down)).toBe(md5(big));
    const listed = await aws(KEY_A, 's3', 'ls', 's3://cli-bucket/one/');
    expect(listed).toMatch(/\s20971537 big\.bin/);
    expect(await aws(KEY_A, 's3', 'ls')).toContain('cli-bucket');
  }, 120_000);

  it('sync up and down', async () => {
    await aws(KEY_A, 's3', 'sync', path.join(dir, 'tree'), 's3://cli-bucket/tree');
    const back = path.join(dir, 'tree-back');
    await aws(KEY_A, 's3', 'sync', 's3://cli-bucket/tree', back);
    sameTree(path.join(dir, 'tree'), back);
    const listed = await aws(KEY_A, 's3', 'ls', '--recursive', 's3://cli-bucket/tree/');
    expect(listed.trim().split('\n').map((l) => l.trim().split(/\s+/).at(-1)).sort()).toEqual(['tree/a.txt', 'tree/big.bin', 'tree/nested/b.json', 'tree/nested/c.bin']);
  }, 120_000);

  it('presign: the URL reads the object without credentials', async () => {
    const url = (await aws(KEY_A, 's3', 'presign', 's3://cli-bucket/tree/a.txt', '--expires-in', '300')).trim();
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('alpha\n');
  });

  it('another tenant cannot list or read the bucket', async () => {
    await expect(aws(KEY_B, 's3', 'ls', 's3://cli-bucket/')).rejects.toThrow(/AccessDenied/);
    await expect(aws(KEY_B, 's3', 'cp', 's3://cli-bucket/tree/a.txt', path.join(dir, 'stolen'))).rejects.toThrow(/403|AccessDenied|Forbidden/);
  });
});

describe.skipIf(!haveRclone)('rclone', () => {
  it('copy both ways, check (MD5), lsjson', async () => {
    await rclone(KEY_A, 'mkdir', 'svc:rclone-bucket');
    await rclone(KEY_A, 'copy', path.join(dir, 'tree'), 'svc:rclone-bucket/tree');
    await rclone(KEY_A, 'check', path.join(dir, 'tree'), 'svc:rclone-bucket/tree');
    const back = path.join(dir, 'rclone-back');
    await rclone(KEY_A, 'copy', 'svc:rclone-bucket/tree', back);
    sameTree(path.join(dir, 'tree'), back);
    const listed = JSON.parse(await rclone(KEY_A, 'lsjson', '-R', '--files-only', 'svc:rclone-bucket/tree')) as Array<{ Path: string; Size: number }>;
    expect(listed.map((f) => [f.Path, f.Size]).sort()).toEqual([['a.txt', 6], ['big.bin', 20 * MiB + 17], ['nested/b.json', 7], ['nested/c.bin', 300_000]]);
    await expect(rclone(KEY_B, 'lsjson', 'svc:rclone-bucket/tree')).rejects.toThrow(/AccessDenied|403/);
  }, 120_000);
});
