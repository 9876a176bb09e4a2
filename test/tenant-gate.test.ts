// The tenant gate is the engine's own (engine/tenancy/tenant-gate.ts): a protocol that only calls
// the engine's operations that take bytes, with its caller, gets every tenant rule without
// calling one itself, as the S3 listener will. On the engine itself (real LMDB, real files,
// security on with a tenant policy): a blob-namespace body (Ingests.blob), a session's creation,
// part and commit (Uploads), and, with no caller, nothing applied, read or awaited.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../dist/engine/base/config.js';
import { Engine } from '../dist/engine/engine.js';
import { Logger } from '../dist/engine/base/log.js';
import { seededBytes } from './helpers/http.js';
import { tempRoot } from './helpers/server.js';

const POLICY = {
  tenants: {
    'gate-object': { maxObjectBytes: 100_000 },
    'gate-quota': { quotaBytes: 1_000_000 },
    'gate-bytes': { bytesPerMinute: 100_000 },
  },
};

let engine: Engine;
let root: string;

const caller = (tenant: string, subject = 'alice') => ({ tenant, subject });

/** The error an operation refused with: its code. */
async function refusal(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
  return 'not refused';
}

/** Pushes `bytes` into an admitted ingest. */
async function admitted<T extends { admit(then: () => void): void }>(ingest: T): Promise<T> {
  await new Promise<void>((resolve) => ingest.admit(resolve));
  return ingest;
}

beforeAll(async () => {
  root = tempRoot();
  const policyFile = path.join(root, 'policy.json');
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(policyFile, JSON.stringify(POLICY));
  engine = await Engine.open(loadConfig({
    SVC_FS_ROOT: root, SVC_DURABILITY: 'relaxed', SVC_WORKERS: '2', SVC_SECURITY_ENABLED: 'true',
    SVC_DEV_SHARED_SECRET: 'a development secret of at least thirty-two bytes', SVC_TENANT_POLICY_FILE: policyFile,
  }), new Logger('silent'));
});

afterAll(async () => {
  await engine?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('a body for the blob namespace (Ingests.blob: the blob API, S3 PutObject)', () => {
  test('a declared length past the object limit is refused before any byte; one within it is the tenant\'s blob', async () => {
    expect(await refusal(() => engine.ingests.blob(caller('gate-object'), { declaredLength: 100_001 }))).toBe('tenant_object_limit_exceeded');
    const bytes = seededBytes(50_000, 1);
    const ingest = await admitted(await engine.ingests.blob(caller('gate-object'), { declaredLength: bytes.length }));
    ingest.push(bytes);
    const result = await ingest.end();
    expect(result.blob.size).toBe(bytes.length);
    expect((await engine.tenantUsage.usage('gate-object')).objects).toBe(1);
  });

  test('a tenant with a quota: its room is read first (a promise), a declared length past it is 507', async () => {
    const started = engine.ingests.blob(caller('gate-quota'), { declaredLength: 1_000_001 });
    expect(started).toBeInstanceOf(Promise);
    expect(await refusal(() => started)).toBe('tenant_storage_quota_exceeded');
  });

  test('a body without a declared length is charged to the byte budget as it is pushed: 429 once spent', async () => {
    const ingest = await admitted(await engine.ingests.blob(caller('gate-bytes'), {}));
    ingest.push(seededBytes(64 * 1024, 2));
    expect(await refusal(() => ingest.push(seededBytes(64 * 1024, 3)))).toBe('rate_limited');
    ingest.abort();
  });

  test('without a caller (security off on the route) the ingest is started at once: nothing applied, nothing awaited', async () => {
    const started = engine.ingests.blob(undefined, { declaredLength: 200_000 });
    expect(started).not.toBeInstanceOf(Promise);
    (started as { abort(): void }).abort();
  });
});

describe('a session (Uploads: contract sessions, tus, S3 multipart)', () => {
  test('a declared length reserves its room: a second creation past what is left is 507, nothing created', async () => {
    const tenant = 'gate-quota';
    const first = randomUUID();
    await engine.uploads.create({ tenant, id: first, declaredLength: 800_000 }, caller(tenant));
    const second = randomUUID();
    expect(await refusal(() => engine.uploads.create({ tenant, id: second, declaredLength: 300_000 }, caller(tenant)))).toBe('tenant_storage_quota_exceeded');
    expect(await refusal(() => engine.uploads.status(tenant, second))).toBe('upload_not_found');
    // A deferred length is judged when it is declared, as at creation.
    const deferred = randomUUID();
    await engine.uploads.create({ tenant, id: deferred }, caller(tenant));
    expect(await refusal(() => engine.uploads.declareLength(tenant, deferred, 300_000, caller(tenant)))).toBe('tenant_storage_quota_exceeded');
    await engine.uploads.cancel(tenant, first);
    await engine.uploads.cancel(tenant, deferred);
  });

  test('a part is judged by its end against the object limit and charged its length, before it starts', async () => {
    const id = randomUUID();
    await engine.uploads.create({ tenant: 'gate-object', id }, caller('gate-object'));
    const part = { tenant: 'gate-object', id, partId: randomUUID(), offset: 0, length: 100_001 };
    expect(await refusal(() => engine.uploads.admitPart(part, caller('gate-object')))).toBe('tenant_object_limit_exceeded');
    const spend = { tenant: 'gate-bytes', id: randomUUID(), partId: randomUUID(), offset: 0, length: 150_000 };
    // Another principal than the blob test's, whose budget is whole.
    await engine.uploads.admitPart(spend, caller('gate-bytes', 'bob'));
    expect(await refusal(() => engine.uploads.admitPart({ ...spend, partId: randomUUID(), length: 10 }, caller('gate-bytes', 'bob')))).toBe('rate_limited');
    await engine.uploads.cancel('gate-object', id);
  });

  test('a part admitted, streamed and committed within the quota publishes the tenant\'s blob', async () => {
    const tenant = 'gate-quota';
    const id = randomUUID();
    const bytes = seededBytes(300_000, 4);
    await engine.uploads.create({ tenant, id, declaredLength: bytes.length }, caller(tenant));
    const started = await engine.uploads.beginPart(await engine.uploads.admitPart({ tenant, id, partId: randomUUID(), offset: 0, length: bytes.length }, caller(tenant)));
    if (!('part' in started)) throw new Error('unexpected replay');
    await started.part.ready;
    (await admitted(started.part.ingest)).push(bytes);
    const record = await engine.uploads.commitIfWhole(await started.part.finish(), caller(tenant));
    expect(record.state).toBe('Committed');
    expect((await engine.tenantUsage.usage(tenant)).retainedBytes).toBe(bytes.length);
  });

  test('without a caller a part is admitted as it is: no await, no allocation', () => {
    const part = { tenant: 'gate-object', id: randomUUID(), partId: randomUUID(), offset: 0, length: 500_000 };
    expect(engine.uploads.admitPart(part)).toBe(part);
  });
});
