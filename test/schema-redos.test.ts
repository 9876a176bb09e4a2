// Issue 25, defect 2: one metadata write must not hold the service. Schemas' patterns run on a
// linear-time engine (RE2); what it cannot run is refused at registration (422); uniqueItems and
// format "url" are linear or bounded; what is left of validation (and schema compilation) runs
// under a deadline. Each write here is answered within its bound while GET /api/health/live,
// polled all along, keeps answering. A real server; statuses and bodies checked exactly.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Api, expectError, expectRejected, hsToken, type Reply } from './helpers/docs-client.js';
import { startServer, type TestServer } from './helpers/server.js';

const SECRET = `redos-test-secret-${randomUUID()}`;
const ALL = 'doc.create doc.read meta.read meta.write:* meta.patch:* schema.write';

let server: TestServer;
let api: Api;

/** Deadlines far above anything here but the costly cases, so a busy machine decides nothing. */
const ROOMY = { SVC_SCHEMA_COMPILE_TIMEOUT: '60s', SVC_METADATA_VALIDATION_TIMEOUT: '30s' };
/** The deadline each timeout case is written for, on inputs that take far longer without it. */
const TIGHT_VALIDATION = { ...ROOMY, SVC_METADATA_VALIDATION_TIMEOUT: '2s' };
const TIGHT_COMPILE = { ...ROOMY, SVC_SCHEMA_COMPILE_TIMEOUT: '2s' };

async function useServer(env: Record<string, string>): Promise<void> {
  await server?.stop();
  server = await startServer({ SVC_DURABILITY: 'relaxed', SVC_DEV_SHARED_SECRET: SECRET, ...env });
  api = new Api(server.url, await hsToken(SECRET, { scope: ALL }));
}

beforeAll(() => useServer(ROOMY));

afterAll(async () => {
  await server?.stop();
});

let schemaCount = 0;
/** Registers `jsonSchema` for a fresh namespace: the registration's reply and the names to use. */
async function register(jsonSchema: Record<string, unknown>) {
  const n = ++schemaCount;
  const namespaceUrn = `urn:svc:redos-${n}`;
  const schemaUrn = `urn:svc:schema:redos-${n}@1.0.0`;
  const r = await api.post('/v1/schemas', { schemaUrn, namespaceUrn, lifecycle: 'published', jsonSchema });
  return { r, namespaceUrn, schemaUrn };
}

async function registered(jsonSchema: Record<string, unknown>) {
  const s = await register(jsonSchema);
  expect(s.r.status, s.r.text).toBe(201);
  return s;
}

/**
 * `work` while GET /api/health/live is polled, one request after another, until `work` has ended
 * (at least one poll starts after it began): its answer, how long it took, and each poll's status
 * and time.
 */
async function whileHealthPolled(work: () => Promise<Reply>) {
  const polls: { status: number; ms: number }[] = [];
  const started = Date.now();
  let done = false;
  const answered = work().finally(() => (done = true));
  const polling = (async () => {
    do {
      const t = Date.now();
      const res = await fetch(`${server.url}/api/health/live`, { signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      polls.push({ status: res.status, ms: Date.now() - t });
    } while (!done);
  })();
  const r = await answered;
  const elapsedMs = Date.now() - started;
  await polling;
  return { r, elapsedMs, polls };
}

function expectHealthAnswered(polls: { status: number; ms: number }[], withinMs: number): void {
  expect(polls.length).toBeGreaterThan(0);
  for (const p of polls) expect(p.status).toBe(200);
  expect(Math.max(...polls.map((p) => p.ms))).toBeLessThan(withinMs);
}

async function newDoc(): Promise<string> {
  return (await api.newDocument(Buffer.from(`redos ${randomUUID()}`))).documentId;
}

describe('patterns run in linear time', () => {
  test('^(a+)+$ registers; 34 a and a ! are rejected within a second while health answers; a match is accepted', async () => {
    const { namespaceUrn, schemaUrn } = await registered({ type: 'object', properties: { a: { type: 'string', pattern: '^(a+)+$' } } });
    const documentId = await newDoc();
    for (const value of [`${'a'.repeat(34)}!`, `${'a'.repeat(200_000)}!`]) {
      const { r, elapsedMs, polls } = await whileHealthPolled(() => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { a: value } } }));
      expectRejected(r, 422, 'VALIDATION_FAILED');
      expect(r.json.error).toEqual({
        code: 'VALIDATION_FAILED',
        message: 'The metadata does not validate (1 issue)',
        errors: [{ path: `/namespaces/${namespaceUrn}/data/a`, code: 'pattern', message: 'must match pattern "^(a+)+$"' }],
      });
      // The case within a second; 200,000 characters take their linear time on a busy machine.
      const withinMs = value.length < 100 ? 1000 : 3000;
      expect(elapsedMs).toBeLessThan(withinMs);
      expectHealthAnswered(polls, withinMs);
    }
    const ok = await api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { a: 'a'.repeat(34) } } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json.status).toBe('accepted');
  });

  test('patternProperties and propertyNames patterns run on the same engine', async () => {
    const { namespaceUrn, schemaUrn } = await registered({
      type: 'object',
      propertyNames: { pattern: '^(x+x+)+y$|^k' },
      patternProperties: { '^(x+x+)+y$': { type: 'integer' } },
    });
    const documentId = await newDoc();
    const name = `${'x'.repeat(40)}z`;
    const { r, elapsedMs } = await whileHealthPolled(() => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { [name]: 'not checked', xxy: 'a string' } } }));
    expectRejected(r, 422, 'VALIDATION_FAILED');
    expect(r.json.error.errors).toEqual([
      { path: `/namespaces/${namespaceUrn}/data`, code: 'pattern', message: 'must match pattern "^(x+x+)+y$|^k"' },
      { path: `/namespaces/${namespaceUrn}/data`, code: 'propertyNames', message: 'property name must be valid' },
      { path: `/namespaces/${namespaceUrn}/data/xxy`, code: 'type', message: 'must be integer' },
    ]);
    expect(elapsedMs).toBeLessThan(3000);
  });

  test('an ordinary pattern validates as ECMAScript does (\\s and . included)', async () => {
    const { namespaceUrn, schemaUrn } = await registered({
      type: 'object',
      properties: {
        caseNumber: { type: 'string', pattern: '^[A-Z]{2}-[0-9]{4}$' },
        word: { type: 'string', pattern: '^\\S+$' },
        line: { type: 'string', pattern: '^.+$' },
        letters: { type: 'string', pattern: '^\\p{L}+$' },
      },
    });
    const documentId = await newDoc();
    const write = (data: Record<string, unknown>) => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data } });
    const good = await write({ caseNumber: 'OS-2026', word: 'ab', line: 'a b', letters: 'Ærøskøbing' });
    expect(good.status, good.text).toBe(201);
    // U+00A0 is white space to ECMAScript (not to RE2's \s); U+2028 ends a line for . (not for RE2's).
    const bad = await write({ caseNumber: 'os-2026', word: 'a\u00a0b', line: 'a\u2028b', letters: 'abc1' });
    expectRejected(bad, 422, 'VALIDATION_FAILED');
    expect(bad.json.error.errors).toEqual(
      [
        ['caseNumber', '^[A-Z]{2}-[0-9]{4}$'],
        ['word', '^\\S+$'],
        ['line', '^.+$'],
        ['letters', '^\\p{L}+$'],
      ].map(([p, pattern]) => ({ path: `/namespaces/${namespaceUrn}/data/${p}`, code: 'pattern', message: `must match pattern "${pattern}"` })),
    );
  });
});

describe('registration refuses what the linear-time engine cannot run', () => {
  const refusal = (pointer: string, pattern: string, what: string) =>
    `jsonSchema cannot be used: the pattern at ${pointer}, ${JSON.stringify(pattern)} cannot run on the linear-time engine (RE2): ${what}; backreferences, lookahead and lookbehind are refused`;

  test.each([
    ['a backreference', { properties: { a: { type: 'string', pattern: '^(a)\\1$' } } }, '/properties/a/pattern', '^(a)\\1$', 'a backreference ("\\\\1" at offset 4)'],
    ['a named backreference', { properties: { a: { pattern: '(?<x>a)\\k<x>' } } }, '/properties/a/pattern', '(?<x>a)\\k<x>', 'a backreference ("\\\\k<x>" at offset 7)'],
    ['a lookahead', { properties: { a: { items: { pattern: '^(?=.*\\d)\\w+$' } } } }, '/properties/a/items/pattern', '^(?=.*\\d)\\w+$', 'a lookahead ("(?=.*\\\\d)" at offset 1)'],
    ['a lookbehind in a patternProperties key', { patternProperties: { '(?<!x)y/z': {} } }, '/patternProperties/(?<!x)y~1z', '(?<!x)y/z', 'a lookbehind ("(?<!x)" at offset 0)'],
    ['a negative lookahead under $defs and anyOf', { $defs: { d: { anyOf: [{}, { pattern: 'a(?!b)' }] } } }, '/$defs/d/anyOf/1/pattern', 'a(?!b)', 'a lookahead ("(?!b)" at offset 1)'],
  ])('%s: 422 schema_unsupported naming the pattern and its place; nothing registered', async (_, schema, pointer, pattern, what) => {
    const { r, schemaUrn } = await register({ type: 'object', ...schema });
    expectError(r, 422, 'schema_unsupported');
    expect(r.json.message).toBe(refusal(pointer, pattern, what));
    expectError(await api.get(`/v1/schemas/${schemaUrn}`), 404, 'schema_not_found');
  });

  test('a repeat count RE2 does not take: 422 with its reason', async () => {
    const { r } = await register({ type: 'object', properties: { a: { pattern: '^(?:a{100}){100}$' } } });
    expectError(r, 422, 'schema_unsupported');
    expect(r.json.message).toBe('jsonSchema cannot be used: the pattern at /properties/a/pattern, "^(?:a{100}){100}$" cannot run on the linear-time engine (RE2): invalid repeat count: `{100}`');
  });

  test('a pattern that is not ECMAScript: 400 invalid_request naming its place', async () => {
    const { r } = await register({ type: 'object', properties: { a: { pattern: '(a' } } });
    expectError(r, 400, 'invalid_request');
    expect(r.json.message).toBe('jsonSchema does not compile: the pattern at /properties/a/pattern, "(a" is not an ECMAScript regular expression: Unterminated group');
  });
});

describe('the rest of validation is linear or bounded', () => {
  test('uniqueItems over 150,000 distinct items is linear; a duplicate (key order aside) is named', async () => {
    const { namespaceUrn, schemaUrn } = await registered({ type: 'object', properties: { ids: { type: 'array', uniqueItems: true } } });
    const documentId = await newDoc();
    const ids: unknown[] = Array.from({ length: 150_000 }, (_, i) => i);
    const { r, elapsedMs, polls } = await whileHealthPolled(() => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { ids } } }));
    expect(r.status, r.text).toBe(201);
    expect(elapsedMs).toBeLessThan(3000);
    expectHealthAnswered(polls, 3000);
    const dup = await api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { ids: [{ a: 1, b: [2] }, 'x', { b: [2], a: 1 }] } } });
    expectRejected(dup, 422, 'VALIDATION_FAILED');
    expect(dup.json.error.errors).toEqual([{ path: `/namespaces/${namespaceUrn}/data/ids`, code: 'uniqueItems', message: 'must NOT have duplicate items (items ## 0 and 2 are identical)' }]);
  });

  test('format "url" (a quadratic regular expression) takes at most 8000 characters', async () => {
    const { namespaceUrn, schemaUrn } = await registered({ type: 'object', properties: { u: { type: 'string', format: 'url' } } });
    const documentId = await newDoc();
    const write = (u: string) => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { u } } });
    const { r, elapsedMs } = await whileHealthPolled(() => write(`ftp://172.30.3.56${'4.1.6.7:155'.repeat(90_000)}`));
    expectRejected(r, 422, 'VALIDATION_FAILED');
    expect(r.json.error.errors).toEqual([{ path: `/namespaces/${namespaceUrn}/data/u`, code: 'format', message: 'must match format "url"' }]);
    expect(elapsedMs).toBeLessThan(3000);
    expect((await write(`https://example.com/${'a'.repeat(7000)}`)).status).toBe(201);
    expectRejected(await write(`https://example.com/${'a'.repeat(8000)}`), 422, 'VALIDATION_FAILED');
  });

});

describe('what is left runs under a deadline', () => {
  test('a schema too costly for its data: the write is rejected with a timeout issue after the deadline (2 s)', async () => {
    await useServer(TIGHT_VALIDATION);
    // No pattern is slow here: 3000 references to one definition, each applied to 60,000 strings
    // (minutes without the deadline). The deadline leaves room for the small writes below.
    const { namespaceUrn, schemaUrn } = await registered({
      type: 'object',
      properties: { a: { type: 'array', items: { allOf: Array.from({ length: 3000 }, () => ({ $ref: '#/$defs/p' })) } } },
      $defs: { p: { type: 'string', pattern: '^a+$' } },
    });
    const documentId = await newDoc();
    const { r, elapsedMs, polls } = await whileHealthPolled(() => api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { a: Array.from({ length: 60_000 }, () => 'aaaaaaa') } } }));
    expectRejected(r, 422, 'VALIDATION_FAILED');
    expect(r.json.error.errors).toEqual([
      { path: `/namespaces/${namespaceUrn}/data`, code: 'timeout', message: 'validation took longer than 2000 ms: the schema is too costly for data this large' },
    ]);
    expect(elapsedMs).toBeGreaterThanOrEqual(2000);
    // Stopped at the deadline, not after the minutes it would take; the margin is a busy machine's.
    expect(elapsedMs).toBeLessThan(30_000);
    expectHealthAnswered(polls, 30_000);
    // The same schema still validates small data (its validator, stopped, is compiled anew).
    const small = await api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { a: ['aa', 'b'] } } });
    expectRejected(small, 422, 'VALIDATION_FAILED');
    expect(small.json.error.errors).toHaveLength(3000);
    expect(small.json.error.errors[0]).toEqual({ path: `/namespaces/${namespaceUrn}/data/a/1`, code: 'pattern', message: 'must match pattern "^a+$"' });
    expect((await api.writeCanonical(documentId, { [namespaceUrn]: { schema: schemaUrn, data: { a: ['aa'] } } })).status).toBe(201);
  });

  test('a schema whose compilation takes over 2 s: 422 schema_unsupported, health answering meanwhile', async () => {
    await useServer(TIGHT_COMPILE);
    const properties = Object.fromEntries(Array.from({ length: 22_000 }, (_, i) => [`p${i}`, { type: 'string', maxLength: 5 }]));
    const { r, elapsedMs, polls } = await whileHealthPolled(async () => (await register({ type: 'object', properties })).r);
    expectError(r, 422, 'schema_unsupported');
    expect(r.json.message).toBe('jsonSchema cannot be used: compiling it took longer than 2000 ms');
    // Stopped at the deadline (the compilation alone takes over 10 s); the margin is a busy machine's.
    expect(elapsedMs).toBeLessThan(30_000);
    expectHealthAnswered(polls, 30_000);
  });
});
