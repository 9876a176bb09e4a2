// The model runtime over HTTP: a real server, real bundles (fixtures and bundles built here). Every
// answer is checked against server/openapi/model-runtime.json (helpers/openapi.ts, `modelFetch`).

import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { attr, pipelineBundle, scoringPipeline, writeBundleDir } from './helpers/bundles.js';
import { FIXTURES, HAVE_FIXTURES } from './helpers/models.js';
import { modelFetch } from './helpers/openapi.js';
import { startServer, tempRoot, type TestServer } from './helpers/server.js';

const haveFixtures = HAVE_FIXTURES;
const AIRBNB = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/models/airbnb.model.lr.zip');
const AIRBNB_FRAME = join(FIXTURES, 'combust-mleap/mleap-benchmark/src/main/resources/leap_frame/frame.airbnb.json');
const DEMO = join(FIXTURES, 'combust-mleap/mleap-spring-boot/src/test/resources/demo.zip');
if (!haveFixtures) console.warn(`model fixtures not found at ${FIXTURES}: fixture tests are skipped`);

/** price = 2·x + 3·y + 1, with a string column indexed into the features. */
function scoringBundle(dir: string): string {
  const doc = scoringPipeline();
  return writeBundleDir(doc, dir);
}

const leap = (fields: [string, unknown][], rows: unknown[][]) => ({
  schema: { fields: fields.map(([name, type]) => ({ name, type })) },
  rows,
});

let server: TestServer;
let base: string;
let scoringUri: string;
const work = tempRoot('svc-model-test-');

async function call(method: string, path: string, body?: unknown) {
  const res = await modelFetch(base + path, {
    method,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json: json as any, type: res.headers.get('content-type') };
}

beforeAll(async () => {
  server = await startServer({ MODEL_WARMUP_ROWS: '20' });
  base = server.modelUrl;
  scoringUri = pathToFileURL(scoringBundle(join(work, 'scoring'))).href;
});

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('registry', () => {
  test('no models yet: NoModelsLoaded 404; /health 200 empty', async () => {
    const r = await call('GET', '/models/nothing');
    expect(r.status).toBe(404);
    expect(r.json).toEqual({ error: 'NoModelsLoaded', message: 'No models loaded', code: 404 });
    const h = await call('GET', '/health');
    expect(h.status).toBe(200);
    expect(h.text).toBe('');
  });

  test('PUT registers (201), PUT again replaces (200), GET /models lists, unknown is ModelNotFound', async () => {
    const first = await call('PUT', '/models/scoring', scoringUri);
    expect(first.status).toBe(201);
    expect(first.json).toEqual({ modelName: 'scoring', uri: scoringUri });
    const again = await call('PUT', '/models/scoring', scoringUri);
    expect(again.status).toBe(200);
    const list = await call('GET', '/models');
    expect(list.json).toContainEqual({ modelName: 'scoring', uri: scoringUri });
    const missing = await call('GET', '/models/other');
    expect(missing.status).toBe(404);
    expect(missing.json.error).toBe('ModelNotFound');
    expect(missing.json.message).toMatch(/^other not found in \[.*scoring.*\]$/);
  });

  test('a bundle that cannot load is refused and the previous registration stays', async () => {
    const bad = await call('PUT', '/models/scoring', 'file:///does/not/exist.zip');
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe(400);
    expect((await call('GET', '/models/scoring')).json.model.uri).toBe(scoringUri);
    const scheme = await call('PUT', '/models/x', 'ftp://host/model.zip');
    expect(scheme.status).toBe(400);
    expect(scheme.json.error).toBe('URIError');
    const garbage = await call('PUT', '/models/x', 'not a uri');
    expect(garbage.status).toBe(400);
  });

  test('an unsupported op is refused with a 400 naming it', async () => {
    const doc = pipelineBundle([{ name: 'weird', op: 'no_such_op', attributes: {}, inputs: [['input', 'a']], outputs: [['output', 'b']] }]);
    const uri = pathToFileURL(writeBundleDir(doc, join(work, 'weird'))).href;
    const r = await call('PUT', '/models/weird', uri);
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('BundleException');
    expect(r.json.message).toContain('no_such_op');
  });

  test('describe: bundle info, input schema and output schema', async () => {
    const r = await call('GET', '/models/scoring');
    expect(r.status).toBe(200);
    expect(r.json.model).toEqual({ modelName: 'scoring', uri: scoringUri });
    expect(r.json.bundleMeta.info).toMatchObject({ format: 'json', name: 'test_pipeline' });
    expect(r.json.bundleMeta.inputSchema.fields.map((f: any) => f.name)).toEqual(['color', 'x', 'y']);
    expect(r.json.bundleMeta.outputSchema.fields.map((f: any) => f.name)).toEqual(['color', 'x', 'y', 'color_index', 'features', 'price']);
  });
});

describe('transform', () => {
  const frame = leap([['x', 'double'], ['y', 'double'], ['color', 'string'], ['id', 'string']], [
    [1, 1, 'red', 'a'],
    [2, 0, 'blue', 'b'],
    [0, 5, 'green', 'c'],
  ]);
  // price = 2x + 3y + 10·index + 1 → a: 6, b: 25, c: 26
  test('outputs: model columns then extra request columns; hand-computed predictions', async () => {
    const r = await call('POST', '/models/scoring/transform', frame);
    expect(r.status).toBe(200);
    expect(r.json.schema.fields.map((f: any) => f.name)).toEqual(['color', 'x', 'y', 'color_index', 'features', 'price', 'id']);
    const price = r.json.schema.fields.findIndex((f: any) => f.name === 'price');
    expect(r.json.rows.map((row: any[]) => row[price])).toEqual([6, 25, 26]);
    expect(r.json.rows.map((row: any[]) => row[6])).toEqual(['a', 'b', 'c']);
  });

  test('select keeps exactly the named columns in order; rank/k/desc', async () => {
    const sel = await call('POST', '/models/scoring/transform?select=id,price', frame);
    expect(sel.json.schema.fields.map((f: any) => f.name)).toEqual(['id', 'price']);
    expect(sel.json.rows).toEqual([['a', 6], ['b', 25], ['c', 26]]);
    const top = await call('POST', '/models/scoring/transform?select=id&rank=price&k=2', frame);
    expect(top.json.rows).toEqual([['c'], ['b']]);
    const low = await call('POST', '/models/scoring/transform?select=id,price&rank=price&k=2&desc=false', frame);
    expect(low.json.rows).toEqual([['a', 6], ['b', 25]]);
    const kOnly = await call('POST', '/models/scoring/transform?select=id&k=1', frame);
    expect(kOnly.json.rows).toHaveLength(3);
    const unknown = await call('POST', '/models/scoring/transform?select=nope', frame);
    expect(unknown.status).toBe(400);
  });

  test('missing inputs: impute by default, error when asked', async () => {
    const partial = leap([['x', 'double'], ['color', 'string']], [[1, 'red']]);
    const imputed = await call('POST', '/models/scoring/transform?select=y,price', partial);
    expect(imputed.status).toBe(200);
    expect(imputed.json.rows).toEqual([[0, 3]]);
    const refused = await call('POST', '/models/scoring/transform?missing=error', partial);
    expect(refused.status).toBe(400);
    expect(refused.json.message).toBe('Missing required fields: [y]');
  });

  test('casts request types to the model types (int → double)', async () => {
    const r = await call('POST', '/models/scoring/transform?select=price', leap([['x', 'int'], ['y', 'long'], ['color', 'string']], [[1, 1, 'green']]));
    expect(r.json.rows).toEqual([[16]]);
  });

  test('seq, par and par-N give identical outputs in input order; bad exec is 400', async () => {
    const rows = Array.from({ length: 500 }, (_, i) => [i, i % 7, ['red', 'green', 'blue'][i % 3], `id${i}`]);
    const big = leap([['x', 'double'], ['y', 'double'], ['color', 'string'], ['id', 'string']], rows);
    const outs = await Promise.all(['seq', 'par', 'par-1', 'par-3', 'par-64'].map((m) => call('POST', `/models/scoring/transform?exec=${m}`, big)));
    for (const o of outs) expect(o.json).toEqual(outs[0]!.json);
    expect(outs[0]!.json.rows[499][6]).toBe('id499');
    for (const bad of ['foo', 'par-0', 'par-x']) {
      const r = await call('POST', `/models/scoring/transform?exec=${bad}`, big);
      expect(r.status).toBe(400);
      expect(r.json.message).toContain("Must be one of ['par', 'seq', 'par-n']");
    }
  });

  test('a frame split over several tasks ranks and reports errors as one frame', async () => {
    // price = 2x + 1 for red rows: row i scores 2·((i · 7919) mod 2000) + 1, a permutation.
    const rows = Array.from({ length: 2000 }, (_, i) => [(i * 7919) % 2000, 0, 'red', `id${i}`, `g${i % 10}`]);
    const fields: [string, unknown][] = [['x', 'double'], ['y', 'double'], ['color', 'string'], ['id', 'string'], ['g', 'string']];
    const big = leap(fields, rows);
    const expected = rows
      .map((r, i) => ({ id: `id${i}`, price: 2 * (r[0] as number) + 1, g: r[4] as string }))
      .sort((a, b) => b.price - a.price);
    for (const mode of ['seq', 'par', 'par-2']) {
      const top = await call('POST', `/models/scoring/transform?exec=${mode}&select=id,price&rank=price&k=5`, big);
      expect(top.json.rows, mode).toEqual(expected.slice(0, 5).map((e) => [e.id, e.price]));
      const ranked = await call('POST', `/models/scoring/rank?exec=${mode}&id=id&rank=price&k=3`, big);
      expect(ranked.json.results, mode).toEqual(expected.slice(0, 3).map((e) => e.id));
      const grouped = await call('POST', `/models/scoring/rank?exec=${mode}&id=id&rank=price&group=g&desc=false`, big);
      const bestOfGroup = [...new Map([...expected].reverse().map((e) => [e.g, e])).values()].sort((a, b) => b.price - a.price);
      expect(grouped.json.results, mode).toEqual(bestOfGroup.map((e) => e.id).reverse());
      const bad = rows.map((r) => [...r]);
      bad[1700]![0] = 'late';
      bad[300]![0] = 'early';
      const refused = await call('POST', `/models/scoring/transform?exec=${mode}`, leap(fields, bad));
      expect(refused.status, mode).toBe(400);
      expect(refused.json.message, mode).toBe('row 300: field x expects double, got "early"');
    }
  });

  test('handle_invalid=skip leaves the row out of transform and rank, in every mode', async () => {
    const skipping = pipelineBundle([
      {
        name: 'color_indexer', op: 'string_indexer',
        attributes: { labels: attr.strings(['red', 'green']), handle_invalid: attr.string('skip') },
        inputs: [['input', 'color']], outputs: [['output', 'color_index']],
      },
    ]);
    const uri = pathToFileURL(writeBundleDir(skipping, join(work, 'skipping'))).href;
    expect((await call('PUT', '/models/skipping', uri)).status).toBe(201);
    const rows = Array.from({ length: 600 }, (_, i) => [['red', 'green', 'purple'][i % 3], `id${i}`]);
    const frame = leap([['color', 'string'], ['id', 'string']], rows);
    const kept = rows.filter((r) => r[0] !== 'purple');
    for (const mode of ['seq', 'par']) {
      const r = await call('POST', `/models/skipping/transform?exec=${mode}&select=id,color_index`, frame);
      expect(r.status, mode).toBe(200);
      expect(r.json.rows, mode).toEqual(kept.map((k) => [k[1], k[0] === 'red' ? 0 : 1]));
      const ranked = await call('POST', `/models/skipping/rank?exec=${mode}&id=id&rank=color_index&k=2`, frame);
      expect(ranked.json.results, mode).toEqual(['id1', 'id4']);
    }
    expect((await call('DELETE', '/models/skipping')).status).toBe(200);
  });

  test('frame shapes: Cartesian, Context, Prefixed', async () => {
    const cart = await call('POST', '/models/scoring/transform?select=id,price', {
      contextFrame: leap([['color', 'string']], [['blue']]),
      targetFrame: leap([['x', 'double'], ['y', 'double'], ['id', 'string']], [[0, 0, 't1'], [1, 0, 't2'], [0, 1, 't3']]),
    });
    expect(cart.json.rows).toEqual([['t1', 21], ['t2', 23], ['t3', 24]]);
    const ctx = await call('POST', '/models/scoring/transform?select=id,price', {
      contextSchema: { fields: [{ name: 'color', type: 'string' }] },
      targetSchema: { fields: [{ name: 'x', type: 'double' }, { name: 'y', type: 'double' }, { name: 'id', type: 'string' }] },
      rows: [
        { contextRow: ['red'], targetRows: [[0, 0, 'a'], [1, 0, 'b']] },
        { contextRow: ['green'], targetRows: [[0, 0, 'c'], [1, 0, 'd']] },
      ],
    });
    expect(ctx.json.rows).toEqual([['a', 1], ['b', 3], ['c', 11], ['d', 13]]);
    const pre = await call('POST', '/models/scoring/transform?select=color,price', { frame: leap([['lor', 'string']], [['green']]), prefix: 'co' });
    expect(pre.json.rows).toEqual([['green', 11]]);
  });

  test('bad bodies and values are 400 with the envelope', async () => {
    for (const body of ['{not json', '[]', '{"schema":{"fields":[]}}', JSON.stringify(leap([['x', 'double']], [['text']])), JSON.stringify(leap([['x', 'double'], ['x', 'double']], []))]) {
      const r = await call('POST', '/models/scoring/transform', body);
      expect(r.status, body).toBe(400);
      expect(r.json).toMatchObject({ code: 400 });
      expect(typeof r.json.error).toBe('string');
      expect(typeof r.json.message).toBe('string');
    }
    const unseen = await call('POST', '/models/scoring/transform', leap([['color', 'string']], [['purple']]));
    expect(unseen.status).toBe(400);
  });

  test('a body over its limit is 413 PayloadTooLarge in the envelope: a bundle URI over 64 KiB, a frame over MODEL_MAX_FRAME_BYTES', async () => {
    const longUri = await call('PUT', '/models/long', `file:///${'a'.repeat(64 * 1024)}.zip`);
    expect([longUri.status, longUri.json.error, longUri.json.code]).toEqual([413, 'PayloadTooLarge', 413]);
    expect(longUri.json.message).toBe('request body is larger than 65536 bytes (a bundle URI)');
    const small = await startServer({ MODEL_MAX_FRAME_BYTES: '1KiB', MODEL_WARMUP_ROWS: '5' });
    try {
      expect((await modelFetch(`${small.modelUrl}/models/scoring`, { method: 'PUT', body: scoringUri })).status).toBe(201);
      const rows = Array.from({ length: 100 }, (_, i) => [i, i, 'red', `id${i}`]);
      const fields: [string, unknown][] = [['x', 'double'], ['y', 'double'], ['color', 'string'], ['id', 'string']];
      for (const op of ['transform', 'rank?id=id&rank=price']) {
        const big = await modelFetch(`${small.modelUrl}/models/scoring/${op}`, { method: 'POST', body: JSON.stringify(leap(fields, rows)) });
        expect([op, big.status, await big.json()]).toEqual([op, 413, { error: 'PayloadTooLarge', message: 'request body is larger than 1024 bytes (MODEL_MAX_FRAME_BYTES)', code: 413 }]);
        const fits = await modelFetch(`${small.modelUrl}/models/scoring/${op}`, { method: 'POST', body: JSON.stringify(leap(fields, rows.slice(0, 2))) });
        expect([op, fits.status]).toEqual([op, 200]);
        await fits.arrayBuffer();
      }
    } finally {
      await small.stop();
    }
  });
});

describe('rank, sample, graph, health, metrics', () => {
  const candidates = leap([['x', 'double'], ['y', 'double'], ['color', 'string'], ['item', 'string'], ['parent', 'string']], [
    [1, 0, 'red', 'i1', 'p1'], // 3
    [5, 0, 'red', 'i2', 'p1'], // 11
    [0, 2, 'red', 'i3', 'p2'], // 7
    [0, 0, 'blue', 'i4', 'p2'], // 21
    [0, 0, 'green', 'i1', 'p3'], // 11
  ]);

  test('rank: highest first, k, desc=false, group keeps each group’s best, avg by id', async () => {
    expect((await call('POST', '/models/scoring/rank?id=item&rank=price', candidates)).json).toEqual({ results: ['i4', 'i2', 'i1', 'i3', 'i1'] });
    expect((await call('POST', '/models/scoring/rank?id=item&rank=price&k=2', candidates)).json).toEqual({ results: ['i4', 'i2'] });
    expect((await call('POST', '/models/scoring/rank?id=item&rank=price&desc=false&k=2', candidates)).json).toEqual({ results: ['i1', 'i3'] });
    expect((await call('POST', '/models/scoring/rank?id=item&rank=price&group=parent', candidates)).json).toEqual({ results: ['i4', 'i2', 'i1'] });
    // i1: (3 + 11) / 2 = 7, i3: 7 → ties keep first appearance
    expect((await call('POST', '/models/scoring/rank?id=item&rank=price&avg=true', candidates)).json).toEqual({ results: ['i4', 'i2', 'i1', 'i3'] });
    const noId = await call('POST', '/models/scoring/rank?rank=price', candidates);
    expect(noId.status).toBe(400);
  });

  test('sample: nrow rows, fields sorted by name, values the model accepts; context gives a Cartesian frame', async () => {
    const s = await call('GET', '/models/scoring/sample?nrow=5');
    expect(s.status).toBe(200);
    expect(s.json.schema.fields.map((f: any) => f.name)).toEqual(['color', 'x', 'y']);
    expect(s.json.rows).toHaveLength(5);
    for (const row of s.json.rows) expect(['red', 'green', 'blue']).toContain(row[0]);
    const c = await call('GET', '/models/scoring/sample?nrow=5&context=col');
    expect(c.json.contextFrame.schema.fields.map((f: any) => f.name)).toEqual(['color']);
    expect(c.json.contextFrame.rows).toHaveLength(1);
    expect(c.json.targetFrame.rows).toHaveLength(5);
    const t = await call('POST', '/models/scoring/transform', c.json);
    expect(t.status).toBe(200);
    expect(t.json.rows).toHaveLength(5);
  });

  test('graph is SVG naming every stage; health runs samples', async () => {
    const g = await call('GET', '/models/scoring/graph');
    expect(g.status).toBe(200);
    expect(g.type).toContain('xml');
    expect(g.text).toContain('<svg');
    for (const name of ['color_indexer', 'assembler', 'lr']) expect(g.text).toContain(name);
    const h = await call('GET', '/models/scoring/health?n=3&nrow=10');
    expect(h.status).toBe(200);
    expect(h.text).toBe('');
  });

  test('docs: the Swagger UI page, its assets and the OpenAPI document', async () => {
    const page = await call('GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.type).toContain('text/html');
    expect(page.text).toContain('swagger-ui-bundle.js');
    const bundle = await call('GET', '/docs/swagger-ui-bundle.js');
    expect(bundle.status).toBe(200);
    const spec = await call('GET', '/docs/swagger.yaml');
    expect(spec.status).toBe(200);
    expect(spec.text).toContain('/models/{model}/transform');
    expect((await call('GET', '/docs/../package.json')).status).toBe(404);
  });

  test('timeouts: a load or a request past its limit is 408 ModelTimeout', async () => {
    const slow = await startServer({ MODEL_LOAD_TIMEOUT: '1ms', MODEL_REQUEST_TIMEOUT: '1ms' });
    try {
      const put = await modelFetch(`${slow.modelUrl}/models/scoring`, { method: 'PUT', body: scoringUri });
      expect(put.status).toBe(408);
      expect(await put.json()).toMatchObject({ error: 'ModelTimeout', code: 408 });
    } finally {
      await slow.stop();
    }
  });

  test('metrics carry the reference names', async () => {
    const m = await call('GET', '/metrics');
    expect(m.status).toBe(200);
    for (const name of ['http_requests_duration_millis_bucket', 'total_reponse_count', 'workers_count{pool="blocking"}', 'pool_tasks_enqueued{pool="blocking"}']) {
      expect(m.text).toContain(name);
    }
  });

  test('DELETE answers the model info and forgets it; registrations survive a restart', async () => {
    await call('PUT', '/models/keep', scoringUri);
    const del = await call('DELETE', '/models/scoring');
    expect(del.status).toBe(200);
    expect(del.json.model.modelName).toBe('scoring');
    expect((await call('GET', '/models/scoring')).status).toBe(404);
    const root = tempRoot();
    const first = await startServer({}, root);
    await modelFetch(`${first.modelUrl}/models/keep`, { method: 'PUT', body: scoringUri });
    await first.stop();
    const second = await startServer({}, root);
    try {
      const list = await (await modelFetch(`${second.modelUrl}/models`)).json();
      expect(list).toEqual([{ modelName: 'keep', uri: scoringUri }]);
      const t = await modelFetch(`${second.modelUrl}/models/keep/transform?select=price`, { method: 'POST', body: JSON.stringify(leap([['x', 'double'], ['color', 'string']], [[1, 'red']])) });
      expect(await t.json()).toMatchObject({ rows: [[3]] });
    } finally {
      await second.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!haveFixtures)('published fixture predictions', () => {
  test('airbnb.model.lr.zip with frame.airbnb.json → price_prediction 232.62463916840318', async () => {
    expect((await call('PUT', '/models/airbnb', pathToFileURL(AIRBNB).href)).status).toBe(201);
    const frame = readFileSync(AIRBNB_FRAME, 'utf8');
    for (const exec of ['seq', 'par', 'par-2']) {
      const r = await call('POST', `/models/airbnb/transform?select=price_prediction&exec=${exec}`, frame);
      expect(r.status).toBe(200);
      expect(Math.abs(r.json.rows[0][0] - 232.62463916840318)).toBeLessThan(1e-9);
    }
  });

  test('sample, health and graph on every fixture bundle', async () => {
    const bundles = { fx_airbnb: AIRBNB, fx_demo: DEMO, fx_minmax: join(FIXTURES, 'combust-mleap/mleap-runtime/src/test/resources/min_max_scaler_tf.zip'), fx_onehot: join(FIXTURES, 'combust-mleap/mleap-runtime/src/test/resources/one_hot_encoder_pipeline.zip') };
    for (const [name, path] of Object.entries(bundles)) {
      expect((await call('PUT', `/models/${name}`, pathToFileURL(path).href)).status, name).toBe(201);
      const sample = await call('GET', `/models/${name}/sample?nrow=4`);
      expect(sample.json.rows, name).toHaveLength(4);
      const t = await call('POST', `/models/${name}/transform`, sample.json);
      expect(t.status, `${name}: ${t.text}`).toBe(200);
      expect((await call('GET', `/models/${name}/health?n=2&nrow=50`)).status, name).toBe(200);
      const graph = await call('GET', `/models/${name}/graph`);
      expect(graph.text.startsWith('<?xml'), name).toBe(true);
    }
  });

  test('a bundle over MODEL_MAX_BUNDLE_BYTES is refused without being expanded', async () => {
    const small = await startServer({ MODEL_MAX_BUNDLE_BYTES: '4KiB' });
    try {
      const r = await modelFetch(`${small.modelUrl}/models/airbnb`, { method: 'PUT', body: pathToFileURL(AIRBNB).href });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { message: string }).message).toMatch(/bundle expands to more than 4096 bytes/);
    } finally {
      await small.stop();
    }
  });

  test('demo.zip → demo:prediction -67.78953193834998', async () => {
    expect((await call('PUT', '/models/demo', pathToFileURL(DEMO).href)).status).toBe(201);
    const frame = leap([['demo:a', 'double'], ['demo:c', 'double'], ['demo:d', 'double']], [[44.5, 22.1, 98.2]]);
    const r = await call('POST', '/models/demo/transform?select=demo:prediction', frame);
    expect(r.status).toBe(200);
    expect(Math.abs(r.json.rows[0][0] - -67.78953193834998)).toBeLessThan(1e-9);
  });
});
