// `svc models example DIR`: the bundle it writes loads in the real model runtime and transforms
// the README's frame into the rents it documents.

import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { EXAMPLE_FRAME, EXAMPLE_RENTS } from '../dist/engine/models/example-bundle.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const SVC = fileURLToPath(new URL('../bin/svc.js', import.meta.url));
const run = promisify(execFile);

async function svc(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(SVC, args);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let server: TestServer;
const work = tempRoot('svc-model-example-');

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('svc models example', () => {
  test('writes a bundle the runtime registers and transforms into the documented rents', async () => {
    const dir = join(work, 'example-model');
    const made = await svc(['models', 'example', dir]);
    expect(made.code).toBe(0);
    const uri = pathToFileURL(dir).href;
    expect(made.stdout).toBe(`${uri}\n`);
    expect(made.stderr).toContain(`curl -s -X PUT --data '${uri}' localhost:8080/models/rent`);
    expect(readdirSync(dir).sort()).toEqual(['bundle.json', 'root']);

    const put = await fetch(`${server.modelUrl}/models/rent`, { method: 'PUT', body: uri });
    expect(put.status).toBe(201);
    expect(await put.json()).toEqual({ modelName: 'rent', uri });
    const res = await fetch(`${server.modelUrl}/models/rent/transform?select=rent`, { method: 'POST', body: JSON.stringify(EXAMPLE_FRAME) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      schema: { fields: [{ name: 'rent', type: { type: 'basic', base: 'double', isNullable: false } }] },
      rows: EXAMPLE_RENTS.map((rent) => [rent]),
    });
    // rent = 200 + 30·area + 50·rooms + 400·paris + 100·lyon
    expect(EXAMPLE_RENTS).toEqual([200 + 30 * 50 + 50 * 2 + 400, 200 + 30 * 35 + 50 + 100, 200 + 30 * 80 + 50 * 3]);
  });

  test("the README's model example sends this frame and shows this answer", () => {
    const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
    expect(readme).toContain('./bin/svc.js models example ./example-model\n');
    expect(readme).toContain(`curl -s -X PUT --data "file://$PWD/example-model" localhost:8080/models/rent\n`);
    expect(readme).toContain(`-d '${JSON.stringify(EXAMPLE_FRAME)}'\n`);
    expect(readme).toContain(`"rows":${JSON.stringify(EXAMPLE_RENTS.map((rent) => [rent]))}}\n`);
  });

  test('a non-empty directory is refused (exit 1) and left as it was; a missing operand is a usage error (exit 2)', async () => {
    const dir = join(work, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'keep.txt'), 'mine');
    const refused = await svc(['models', 'example', dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`svc: ${dir} is not empty: name a new or empty directory\n`);
    expect(readdirSync(dir)).toEqual(['keep.txt']);
    const usage = await svc(['models', 'example']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^svc: models example takes one directory\n/);
    const unknown = await svc(['models', 'train']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^svc: models: unknown subcommand "train"\n/);
  });
});
