// The rules of the house that a reading of the sources checks (decisions §5 "The engine owns the
// rules"): no source file over 600 lines and no function over 120 in engine/, server/, cli/ and
// workers/; no tenant rule applied by server/ (the engine's tenant gate applies them); no engine
// operation taking a raw request body (the edge parses it into a typed command). Each check also
// catches a deliberate breach.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_FILE_LINES, MAX_FUNCTION_LINES, sizeBreaches, sourceFiles } from './helpers/source-sizes.js';

/** A tenant rule applied outside the engine: the gate's, the budgets' or the policies' calls (a SIGHUP reload aside). */
const TENANT_RULE = /\b(gate|budgets|policies)\.(?!reload\b)[A-Za-z]+\(|\bassertRoom\b|\bblobLimits\b|\btenantLimits\b/;
/** A parameter that takes a request body as it came. */
const RAW_BODY = /[(,]\s*body\??: unknown\s*[,)=]/;

/** Each line of the files under `root` that matches `pattern`, as `file:line: text`. */
function lines(repo: string, root: string, pattern: RegExp): string[] {
  return sourceFiles(repo, [root]).flatMap((file) =>
    fs.readFileSync(path.join(repo, file), 'utf8').split('\n').flatMap((text, i) => (pattern.test(text) && !/^\s*(\/\/|\*)/.test(text) ? [`${file}:${i + 1}: ${text.trim()}`] : [])),
  );
}

const REPO = fileURLToPath(new URL('..', import.meta.url));
const ROOTS = ['engine', 'server', 'cli', 'workers'];

describe('the house', () => {
  it(`no source file over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES}`, () => {
    const files = sourceFiles(REPO, ROOTS);
    expect(files.length).toBeGreaterThan(100);
    expect(files.flatMap((file) => sizeBreaches(REPO, file))).toEqual([]);
  });

  it('no tenant rule applied in server/, no engine operation taking a raw body', () => {
    expect(lines(REPO, 'server', TENANT_RULE)).toEqual([]);
    expect(lines(REPO, 'engine', RAW_BODY)).toEqual([]);
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
      'server/route.ts': '// gate.room(tenant) in a comment is fine\nexport const r = (engine: any) => engine.gate.room("t");\nexport const s = (engine: any) => engine.policies.reload();\n',
      'engine/op.ts': 'export function op(body?: unknown) {\n  return body;\n}\n',
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
    expect(lines(tree, 'server', TENANT_RULE)).toEqual(['server/route.ts:2: export const r = (engine: any) => engine.gate.room("t");']);
    expect(lines(tree, 'engine', RAW_BODY)).toEqual(['engine/op.ts:1: export function op(body?: unknown) {']);
  });
});
