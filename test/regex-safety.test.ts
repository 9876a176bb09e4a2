// No regular expression or parser that request input (or a document's text) meets takes
// super-linear time (issue 25, defect 2).
//
// Static: recheck, a ReDoS analyser (automata theory, then fuzzing), checks every regular
// expression literal of the built service (dist/engine, server, cli, workers) and the regexes of
// ajv-formats that metadata meets. Each RegExp built at run time is listed in REVIEWED_DYNAMIC; a
// new one fails the test until it is reviewed and run below.
// Dynamic: each exported parser and finder runs on ~50,000-character pathological strings within
// a generous bound: an exponential blow-up takes minutes, so the bound guards correctness, it is
// not a performance target.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { parse } from 'acorn';
import { check } from 'recheck';
import { describe, expect, test } from 'vitest';
import { parseContentId } from '../dist/engine/base/content-id.js';
import { parseSize } from '../dist/engine/base/config.js';
import { compileLinear } from '../dist/engine/documents/linear-regexp.js';
import { parsePatch as checkPatchBody } from '../dist/server/commands/metadata.js';
import { isNamespaceUrn, isSchemaUrn } from '../dist/engine/documents/model.js';
import { compileSchema } from '../dist/engine/documents/validator.js';
import { parseDescriptor } from '../dist/engine/legacy/descriptor.js';
import { ORG_BY_SUFFIX } from '../dist/engine/views/engines/entities.js';
import { findDates, findEmails, findPhones } from '../dist/engine/views/engines/patterns.js';
import { redact } from '../dist/engine/views/engines/redaction.js';
import { parseArgsMessage } from '../dist/cli/args.js';
import { evaluate, parseRange } from '../dist/server/conditional.js';
import { parseContentType } from '../dist/server/request-parsing.js';

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const AREAS = ['engine', 'server', 'cli', 'workers'];

/** Files of dist that build a RegExp at run time, how many times, and why each is safe. */
const REVIEWED_DYNAMIC: Record<string, { count: number; why: string }> = {
  'engine/legacy/descriptor.js': { count: 1, why: 'MEDIA_TYPE of tokens: recheck finds it linear; run below through parseDescriptor' },
  'engine/models/stages/features/text.js': { count: 1, why: "a model bundle's regex_tokenizer pattern (Java-regex parity): it runs on the worker pool, stopped at MODEL_REQUEST_TIMEOUT" },
  'engine/views/engines/entities.js': { count: 1, why: 'ORG_BY_SUFFIX: a run of at most four capitalized words before a fixed suffix list, started only where a word starts; run below on adversarial strings (starting inside Ab-’Ab-’… at every capital was quadratic)' },
  'engine/views/engines/patterns.js': { count: 2, why: 'a copy of a checked pattern with the g flag; WRITTEN_DATE: run below through findDates' },
  'engine/views/engines/redaction.js': { count: 2, why: 'ID_LABEL_PATTERN and STREET_ADDRESS: run below through redact' },
  'server/request-parsing.js': { count: 1, why: 'MEDIA_TYPE (was exponential): run below through parseContentType' },
};

interface Literal {
  where: string;
  source: string;
  flags: string;
}

function* jsFiles(dir: string): Generator<string> {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* jsFiles(p);
    else if (entry.name.endsWith('.js')) yield p;
  }
}

type AnyNode = { type: string; [key: string]: unknown };
function walk(node: AnyNode, visit: (n: AnyNode) => void): void {
  visit(node);
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) {
      if (child && typeof child === 'object' && typeof (child as AnyNode).type === 'string') walk(child as AnyNode, visit);
    }
  }
}

/** The regex literals of the built service, and per file the RegExp constructions whose pattern is not a literal. */
function scanDist(): { literals: Literal[]; dynamic: Record<string, number> } {
  const literals: Literal[] = [];
  const dynamic: Record<string, number> = {};
  for (const area of AREAS) {
    for (const file of jsFiles(path.join(DIST, area))) {
      const rel = path.relative(DIST, file);
      const ast = parse(fs.readFileSync(file, 'utf8'), { ecmaVersion: 'latest', sourceType: 'module', locations: true }) as unknown as AnyNode;
      walk(ast, (n) => {
        const regex = n.regex as { pattern: string; flags: string } | undefined;
        if (n.type === 'Literal' && regex) literals.push({ where: `${rel}:${(n.loc as { start: { line: number } }).start.line}`, source: regex.pattern, flags: regex.flags });
        const callee = n.callee as AnyNode | undefined;
        if ((n.type === 'NewExpression' || n.type === 'CallExpression') && callee?.type === 'Identifier' && callee.name === 'RegExp') {
          const first = (n.arguments as AnyNode[])[0];
          if (first?.type === 'Literal' && typeof first.value === 'string') literals.push({ where: rel, source: first.value, flags: '' });
          else dynamic[rel] = (dynamic[rel] ?? 0) + 1;
        }
      });
    }
  }
  return { literals, dynamic };
}

/** recheck's verdict: 'safe', or what is wrong with an attack string. */
async function verdict(source: string, flags: string, limitMs: number | null = null): Promise<string> {
  // Without a time limit recheck's verdict never depends on how busy the machine is (a timeout is
  // "unknown"); its fuzzing is seeded, so the same pattern always gets the same verdict.
  const timeouts = { timeout: limitMs, attackTimeout: null, incubationTimeout: null, recallTimeout: null, seedingTimeout: null };
  const r = await check(source, flags, { ...timeouts, randomSeed: 25 });
  if (r.status === 'safe') return 'safe';
  if (r.status === 'vulnerable') return `vulnerable (${r.complexity.type}): ${r.attack.pattern}`;
  return `unknown: ${r.error.kind}`;
}

describe('static: recheck over every regular expression', () => {
  test('every regex literal of dist/engine, server, cli and workers is safe; RegExps built at run time are the reviewed ones', async () => {
    const { literals, dynamic } = scanDist();
    expect(literals.length).toBeGreaterThan(80);
    expect(dynamic).toEqual(Object.fromEntries(Object.entries(REVIEWED_DYNAMIC).map(([file, { count }]) => [file, count])));
    const unsafe: string[] = [];
    for (const { where, source, flags } of literals) {
      const v = await verdict(source, flags);
      if (v !== 'safe') unsafe.push(`${where} /${source}/${flags}: ${v}`);
    }
    expect(unsafe).toEqual([]);
  });

  test("ajv-formats' regexes are safe, but for url (quadratic: validator.ts bounds its length)", async () => {
    const require = createRequire(import.meta.url);
    const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: Record<string, unknown> };
    const verdicts: Record<string, string> = {};
    for (const [name, format] of Object.entries(fullFormats)) {
      // Some of these take recheck minutes: bounded, and a verdict it could not reach is no finding
      // (the dynamic test below runs every format on adversarial strings all the same).
      if (format instanceof RegExp) verdicts[name] = (await verdict(format.source, format.flags, 10_000)).replace(/:.*/s, '');
    }
    expect(Object.keys(verdicts).length).toBeGreaterThan(10);
    expect(Object.entries(verdicts).filter(([name, v]) => v.startsWith('vulnerable') && name !== 'url')).toEqual([]);
  });
});

/** `run()`, its error (if any) ignored: only the time counts. */
function attempt(run: () => unknown): void {
  try {
    run();
  } catch {
    // refused or not: only the time counts here
  }
}

/** `run()` takes less than `ms` (generous: a blow-up is orders of magnitude slower). */
function finishesWithin<T>(ms: number, run: () => T): T {
  const started = performance.now();
  const result = run();
  expect(performance.now() - started).toBeLessThan(ms);
  return result;
}

const N = 50_000;
/** Pathological strings: long runs of what the patterns repeat, ending in what makes them fail. */
const ADVERSARIAL = [
  'a'.repeat(N) + '!',
  '1'.repeat(N) + 'x',
  ' '.repeat(N) + '\u0000',
  ' \t'.repeat(N / 2) + '\u0000',
  '; '.repeat(N / 2) + '!',
  'a.'.repeat(N / 2) + '-',
  '1-'.repeat(N / 2) + '/',
  '/'.repeat(N) + 'x',
  '~1'.repeat(N / 2),
  'a@'.repeat(N / 2),
  '+1 '.repeat(N / 3),
  '0 '.repeat(N / 2) + 'x',
  'SSN ' + ' \t'.repeat(N / 2) + '\u0000',
  'SSN 1' + '1'.repeat(N) + 'x',
  'SSN A1' + ' 1'.repeat(N / 2) + 'a',
  '12 Main ' + 'Street '.repeat(N / 7),
  'March ' + '1 '.repeat(N / 2),
];

describe('dynamic: parsers and finders on pathological input finish', () => {
  test('Content-Type (the regex was exponential on `a/b; ; ; …!`): refused quickly, valid ones unchanged', () => {
    for (const s of ADVERSARIAL) finishesWithin(1000, () => attempt(() => parseContentType(`a/b${s}`)));
    finishesWithin(1000, () => expect(() => parseContentType(`a/b${'; '.repeat(N)}!`)).toThrow(/is not a media type/));
    expect(parseContentType('text/plain; charset=utf-8')).toBe('text/plain; charset=utf-8');
    expect(parseContentType('text/plain ;  a=b ; ;c="x y" ')).toBe('text/plain ;  a=b ; ;c="x y"');
    expect(() => parseContentType('text/plain; a')).toThrow(/is not a media type/);
  });

  test('legacy metadata XML: media types, entity expansion and nesting are bounded', () => {
    const hash = 'a'.repeat(64);
    for (const s of ADVERSARIAL) {
      finishesWithin(1000, () => attempt(() => parseDescriptor(`<r><hash>${hash}</hash><mime>a/b${s}</mime></r>`, 'd')));
    }
    let laughs = '<!ENTITY l0 "lol">';
    for (let i = 1; i < 10; i++) laughs += `<!ENTITY l${i} "${`&l${i - 1};`.repeat(10)}">`;
    finishesWithin(1000, () => parseDescriptor(`<!DOCTYPE r [${laughs}]><r><hash>${hash}</hash><x>&l9;</x></r>`, 'd'));
    const blowup = `<!DOCTYPE r [<!ENTITY e "${'x'.repeat(9000)}">]><r><hash>${hash}</hash><x>${'&e;'.repeat(20_000)}</x></r>`;
    finishesWithin(2000, () => expect(() => parseDescriptor(blowup, 'd')).toThrow(/Expanded content length limit exceeded/));
    finishesWithin(2000, () => expect(() => parseDescriptor(`<r>${'<a>'.repeat(N)}${'</a>'.repeat(N)}</r>`, 'd')).toThrow(/Maximum nested tags exceeded/));
  });

  test('redaction and the entity patterns', () => {
    for (const s of ADVERSARIAL) {
      finishesWithin(2000, () => redact(s, 'public'));
      finishesWithin(1000, () => [findDates(s), findPhones(s), findEmails(s)]);
    }
    for (const s of [...ADVERSARIAL, 'Ab-’'.repeat(20_000) + ' ', "A'".repeat(40_000), 'Aa & '.repeat(20_000), 'Northwind '.repeat(10_000) + 'trader']) {
      finishesWithin(1000, () => ORG_BY_SUFFIX.test(s));
    }
    // The labelled value is still found whole after the rewrite of its pattern.
    expect(redact('SSN: AB 12 34 56 C and more', 'public')).toBe('SSN: [REDACTED:national-id] and more');
    expect(redact('passport no. X1234567', 'public')).toBe('passport no. [REDACTED:national-id]');
  });

  test('headers, ids, URNs, JSON Patch paths, sizes and CLI messages', () => {
    const rep = { etag: '"e"', lastModified: 0, size: 100 };
    for (const s of ADVERSARIAL) {
      finishesWithin(1000, () => {
        parseRange(`bytes=${s}`, 100);
        evaluate(rep, { ifNoneMatch: s, ifModifiedSince: s, range: `bytes=0-${s}`, ifRange: s });
        evaluate(rep, { ifMatch: s, ifUnmodifiedSince: `${s} GMT` });
        expect(() => parseContentId(`sha-256:${s}`)).toThrow();
        expect(isSchemaUrn(`urn:svc:schema:${s}`) || isNamespaceUrn(`urn:svc:${s}`)).toBe(false);
        expect(() => parseSize('SIZE', `1${s}`)).toThrow();
        parseArgsMessage(new Error(s));
        attempt(() => checkPatchBody({ mode: 'canonical', baseMetadataId: 'meta_01ARZ3NDEKTSV4RRFFQ69G5FAV', reason: 'r', patch: [{ op: 'replace', path: `/data/${s}`, value: 1 }] }, 100));
      });
    }
    expect(parseSize('SIZE', ' 1.5 MiB ')).toBe(1.5 * 1024 * 1024);
    expect(parseArgsMessage(new Error('one\n   two \n\nthree'))).toBe('one two three');
  });

  test('a pattern rewritten for RE2 matches what ECMAScript matches (differential, on random strings)', () => {
    const patterns = [
      '^\\s+$', '^\\S+$', '^.+$', '^[^]$', '^[]?$', '\\bab\\b', '\\Bb', '^\\d{2,3}$', '^\\w*$', '^\\W$', '^[\\s\\d]+$', '^[^\\s]+$',
      '^[^\\S\\n]+$', '^\\p{L}+$', '^\\P{Lu}$', '^\\p{Letter}\\p{Nd}$', '^\\p{Script=Greek}+$', '^[\\p{Lu}\\d]+$', '^\\p{ASCII}+$', '^[^\\p{ASCII}]$',
      'a|b$', '^(?:ab|a)(?:c|bc)$', '^a{2}b{1,}c{0,2}?$', '^a*?b+?$', '^(a+)+$', '^\\u00e9\\u{1F600}?$', '^[\\u0000-\\u001f]$', '^[a\\-z]$', '^\\x41\\cJ?$',
      '^\\.\\*\\/\\\\$', '^(?<n>a)b$', '^[\\]\\[]+$', 'é', '^$',
    ];
    const alphabet = ['a', 'b', 'c', 'A', 'Z', '1', '2', ' ', '\t', '\n', '\r', '\u000b', '\u00a0', '\u2028', '\u3000', 'é', 'α', 'Ω', '😀', '-', '.', '*', '/', '\\', '[', ']', '_', '\u0000'];
    let seed = 25;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const strings = Array.from({ length: 3000 }, () => Array.from({ length: Math.floor(random() * 6) }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
    const disagreements: string[] = [];
    for (const pattern of patterns) {
      const linear = compileLinear(pattern);
      const native = new RegExp(pattern, 'u');
      for (const s of strings) if (linear.test(s) !== native.test(s)) disagreements.push(`${pattern} on ${JSON.stringify(s)}`);
    }
    expect(disagreements).toEqual([]);
  });

  test('metadata patterns and formats: linear in the data', () => {
    for (const pattern of ['^(a+)+$', '(a|a)*b', '^(x+x+)+y$', '(.*a){20}', '^(\\d+\\s?)+$', '^(a|aa)+$']) {
      const re = compileLinear(pattern);
      for (const s of ADVERSARIAL) finishesWithin(1000, () => re.test(s));
    }
    const require = createRequire(import.meta.url);
    const { fullFormats } = require('ajv-formats/dist/formats') as { fullFormats: Record<string, unknown> };
    for (const format of Object.keys(fullFormats)) {
      const validate = compileSchema({ type: 'object', properties: { v: { type: 'string', format } } });
      for (const s of ADVERSARIAL) finishesWithin(1000, () => validate({ v: s }));
      finishesWithin(1000, () => validate({ v: `ftp://172.30.3.56${'4.1.6.7:155'.repeat(N / 10)}` }));
    }
  });
});
