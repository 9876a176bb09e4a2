// The size rules of the house hold over engine/, server/, cli/ and workers/, and the measure
// itself catches a long file and a long function of a small tree of its own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_FILE_LINES, MAX_FUNCTION_LINES, sizeBreaches, sourceFiles } from './helpers/source-sizes.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const ROOTS = ['engine', 'server', 'cli', 'workers'];

describe('house size', () => {
  it(`no source file over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES}`, () => {
    const files = sourceFiles(REPO, ROOTS);
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((file) => sizeBreaches(REPO, file))).toEqual([]);
  });

  const tree = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-size-'));
  afterAll(() => fs.rmSync(tree, { recursive: true, force: true }));

  it('names a file one line too long and a function one line too long, and passes those at the limit', () => {
    const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const files: Record<string, string> = {
      'engine/long-file.ts': Array.from({ length: MAX_FILE_LINES + 1 }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n',
      'engine/at-limit.ts': `export function fits() {\n${body(MAX_FUNCTION_LINES)}\n}\n`,
      'server/long-method.ts': `export class A {\n  method() {\n${body(MAX_FUNCTION_LINES + 1)}\n  }\n}\n`,
      'cli/long-arrow.ts': `export const f = () => {\n${body(MAX_FUNCTION_LINES + 1)}\n};\n`,
    };
    for (const [file, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(tree, file)), { recursive: true });
      fs.writeFileSync(path.join(tree, file), text);
    }
    const breaches = sourceFiles(tree, ROOTS).flatMap((file) => sizeBreaches(tree, file));
    expect(breaches).toEqual([
      `cli/long-arrow.ts:1: ArrowFunctionExpression has ${MAX_FUNCTION_LINES + 1} lines`,
      `engine/long-file.ts: ${MAX_FILE_LINES + 1} lines`,
      `server/long-method.ts:2: method has ${MAX_FUNCTION_LINES + 1} lines`,
    ]);
  });
});
