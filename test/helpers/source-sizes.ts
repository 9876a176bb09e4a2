// Measures the house's size rules (shared/spec/decisions.md §5 "The engine owns the rules"):
// no source file over 600 lines, no function over 120. Functions are found by parsing with swc
// (the parser dependency-cruiser already uses), so a long arrow or method counts like a function.
import fs from 'node:fs';
import path from 'node:path';
import { parseSync } from '@swc/core';

export const MAX_FILE_LINES = 600;
export const MAX_FUNCTION_LINES = 120;

const FUNCTION_NODES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression', 'ClassMethod', 'PrivateMethod', 'Constructor']);

interface Node {
  type?: string;
  span?: { start: number; end: number };
  key?: { value?: string };
  identifier?: { value?: string };
  [field: string]: unknown;
}

/** Every `.ts` file under `roots` (relative to `repo`), sorted. */
export function sourceFiles(repo: string, roots: string[]): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(repo, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts')) out.push(rel);
    }
  };
  for (const root of roots) if (fs.existsSync(path.join(repo, root))) walk(root);
  return out.sort();
}

/** Each breach of the size rules in `file`, as `file: ...` lines. */
export function sizeBreaches(repo: string, file: string): string[] {
  const text = fs.readFileSync(path.join(repo, file), 'utf8');
  const breaches: string[] = [];
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_FILE_LINES) breaches.push(`${file}: ${lines} lines`);
  const ast = parseSync(text, { syntax: 'typescript', target: 'es2022' }) as unknown as Node;
  // swc's spans are byte offsets counted across every parse of the process: relative to the module's.
  const base = ast.span!.start;
  const bytes = Buffer.from(text);
  const newlines: number[] = [];
  for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) newlines.push(i);
  const lineAt = (offset: number) => {
    let lo = 0;
    let hi = newlines.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (newlines[mid]! < offset - base) lo = mid + 1;
      else hi = mid;
    }
    return lo + 1;
  };
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (!value || typeof value !== 'object') return;
    const node = value as Node;
    if (node.type && FUNCTION_NODES.has(node.type) && node.span) {
      const first = lineAt(node.span.start);
      const length = lineAt(node.span.end) - first + 1;
      const name = node.key?.value ?? node.identifier?.value ?? node.type;
      if (length > MAX_FUNCTION_LINES) breaches.push(`${file}:${first}: ${name} has ${length} lines`);
    }
    for (const [field, child] of Object.entries(node)) if (field !== 'span') visit(child);
  };
  visit(ast);
  return [...new Set(breaches)];
}
