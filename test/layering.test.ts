// The layering rules (.dependency-cruiser.cjs, docs/architecture.md "Layers and rules") hold over
// the sources, and each rule fails on a deliberate violation in a small tree of its own.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type IConfiguration, type ICruiseResult } from 'dependency-cruiser';
import { afterAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('..', import.meta.url));

interface LayeringConfig {
  layering(repo: string): IConfiguration;
  SOURCE_ROOTS: string[];
}
const { layering, SOURCE_ROOTS } = createRequire(import.meta.url)('../.dependency-cruiser.cjs') as LayeringConfig;

/** Each violation of the rules over the tree at `repo`, as `rule: from -> to` (a circle: its path). */
async function violations(repo: string): Promise<string[]> {
  const { forbidden, options } = layering(repo);
  const roots = SOURCE_ROOTS.filter((root) => fs.existsSync(path.join(repo, root)));
  const result = await cruise(roots, { ...options, baseDir: repo, validate: true, ruleSet: { forbidden } });
  const output = result.output as ICruiseResult;
  return output.summary.violations.map((v) => {
    const cycle = v.cycle ? ` (${[v.from, ...v.cycle.map((step) => step.name)].join(' > ')})` : '';
    return `${v.rule.name}: ${v.from} -> ${v.to}${cycle}`;
  });
}

describe('layering', () => {
  it('holds over the sources', async () => {
    expect(await violations(REPO)).toEqual([]);
  });

  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-layering-'));
  afterAll(() => fs.rmSync(tree, { recursive: true, force: true }));

  it('fails each rule on a deliberate violation, exactly there', async () => {
    const files: Record<string, string> = {
      'package.json': JSON.stringify({ scripts: {} }),
      // server/main.ts is an entry point: everything below is reachable from it except engine/dead.ts.
      'server/main.ts': "import { x } from '../engine/x.js';\nimport { a } from '../engine/a.js';\nexport const main = [x, a];\n",
      'server/y.ts': 'export const y = 1;\n',
      'engine/x.ts': "import { y } from '../server/y.js';\nimport { b } from './base/b.js';\nexport const x = y + b;\n",
      'engine/base/b.ts': "import { other } from '../other.js';\nexport const b = other;\n",
      'engine/other.ts': 'export const other = 2;\n',
      // A circle through a type-only import is a circle too (reported once, at its first module).
      'engine/a.ts': "import type { C } from './c.js';\nexport const a: C = 3;\n",
      'engine/c.ts': "import { a } from './a.js';\nexport type C = number;\nexport const c = a;\n",
      'engine/dead.ts': 'export const dead = 4;\n',
    };
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(tree, name)), { recursive: true });
      fs.writeFileSync(path.join(tree, name), text);
    }
    expect((await violations(tree)).sort()).toEqual([
      'engine-not-above: engine/x.ts -> server/y.ts',
      'foundation-imports-foundation: engine/base/b.ts -> engine/other.ts',
      'no-circular: engine/a.ts -> engine/c.ts (engine/a.ts > engine/c.ts > engine/a.ts)',
      'no-orphans: engine/dead.ts -> engine/dead.ts',
    ]);
  });
});
