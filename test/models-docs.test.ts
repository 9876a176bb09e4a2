import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MODEL_API, swaggerUiDistPath, toYaml } from '../dist/server/api-docs.js';
import { pythonHas } from './helpers/python.js';

type Json = Record<string, any>;
const doc = MODEL_API.document('1.2.3') as Json;
const docsAsset = (path: string, version: string) => MODEL_API.asset(path, version);

function resolve(ref: string): Json {
  expect(ref.startsWith('#/')).toBe(true);
  return ref
    .slice(2)
    .split('/')
    .reduce((node: Json | undefined, key) => node?.[key], doc) as Json;
}

function refsIn(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(refsIn);
  if (typeof node !== 'object' || node === null) return [];
  return Object.entries(node).flatMap(([k, v]) => (k === '$ref' ? [v as string] : refsIn(v)));
}

const operation = (path: string, method: string): Json => doc.paths[path][method];
const paramNames = (path: string, method: string) => (operation(path, method).parameters ?? []).map((p: Json) => p.name);

/** Parses YAML with PyYAML (an independent reader) and returns it as JSON. */
function pyYaml(text: string): unknown {
  const out = execFileSync('python3', ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))'], { input: text });
  return JSON.parse(out.toString('utf8'));
}

describe('the model runtime\'s document', () => {
  it('is an OpenAPI 3.1 document titled "svc model runtime" with the given version', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: 'svc model runtime', version: '1.2.3' });
  });

  it('documents every operation of the runtime, and only those', () => {
    const ops = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
      Object.keys(item).filter((k) => k !== 'parameters').map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(ops.sort()).toEqual(
      [
        'PUT /models/{model}',
        'DELETE /models/{model}',
        'GET /models/{model}',
        'GET /models',
        'POST /models/{model}/transform',
        'POST /models/{model}/rank',
        'GET /models/{model}/sample',
        'GET /models/{model}/graph',
        'GET /models/{model}/health',
        'GET /health',
        'GET /docs',
        'GET /docs/{path}',
        'GET /openapi.json',
        'GET /metrics',
      ].sort(),
    );
    const ids = ops.map((op) => {
      const [method, path] = op.split(' ') as [string, string];
      return operation(path, method.toLowerCase()).operationId;
    });
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('gives each operation its query parameters', () => {
    expect(paramNames('/models/{model}/transform', 'post')).toEqual(['select', 'rank', 'desc', 'k', 'exec', 'missing']);
    expect(paramNames('/models/{model}/rank', 'post')).toEqual(['id', 'rank', 'k', 'desc', 'group', 'avg', 'exec', 'missing']);
    expect(paramNames('/models/{model}/sample', 'get')).toEqual(['nrow', 'context', 'select']);
    expect(paramNames('/models/{model}/graph', 'get')).toEqual(['elide-parent-schema', 'unique-schemas', 'density', 'vertical-spacing']);
    expect(paramNames('/models/{model}/health', 'get')).toEqual(['n', 'nrow']);
    for (const path of Object.keys(doc.paths).filter((p) => p.includes('{model}'))) {
      expect(doc.paths[path].parameters).toEqual([expect.objectContaining({ name: 'model', in: 'path', required: true })]);
    }
  });

  it('states required parameters and the reference defaults', () => {
    const param = (path: string, method: string, name: string) => operation(path, method).parameters.find((p: Json) => p.name === name);
    expect(param('/models/{model}/rank', 'post', 'id').required).toBe(true);
    expect(param('/models/{model}/rank', 'post', 'rank').required).toBe(true);
    expect(param('/models/{model}/rank', 'post', 'k').required).toBe(false);
    expect(param('/models/{model}/transform', 'post', 'missing').schema).toMatchObject({ enum: ['impute', 'error'], default: 'impute' });
    expect(param('/models/{model}/transform', 'post', 'desc').schema.default).toBe(true);
    expect(param('/models/{model}/rank', 'post', 'avg').schema.default).toBe(false);
    expect(param('/models/{model}/graph', 'get', 'density').schema).toMatchObject({ type: 'integer', default: 50 });
    expect(param('/models/{model}/graph', 'get', 'vertical-spacing').schema).toMatchObject({ type: 'number', default: 0.5 });
    expect(param('/models/{model}/graph', 'get', 'elide-parent-schema').schema.default).toBe(true);
    expect(param('/models/{model}/graph', 'get', 'unique-schemas').schema.default).toBe(true);
    expect(param('/models/{model}/sample', 'get', 'nrow').schema.default).toBe(1);
    const exec = new RegExp(param('/models/{model}/transform', 'post', 'exec').schema.pattern);
    expect(['seq', 'par', 'par-12'].every((v) => exec.test(v))).toBe(true);
    expect(['par-0', 'par-', 'parallel', 'seq-2'].some((v) => exec.test(v))).toBe(false);
  });

  it('takes the four frame shapes as transform and rank bodies', () => {
    for (const path of ['/models/{model}/transform', '/models/{model}/rank']) {
      const body = operation(path, 'post').requestBody;
      expect(body.required).toBe(true);
      const frame = resolve(body.content['application/json'].schema.$ref);
      const shapes = frame.oneOf.map((s: Json) => resolve(s.$ref));
      expect(shapes.map((s: Json) => s.required)).toEqual([
        ['schema', 'rows'],
        ['contextFrame', 'targetFrame'],
        ['contextSchema', 'targetSchema', 'rows'],
        ['frame', 'prefix'],
      ]);
    }
    const leap = resolve('#/components/schemas/LeapFrame');
    const field = resolve(resolve(leap.properties.schema.$ref).properties.fields.items.$ref);
    expect(Object.keys(field.properties)).toEqual(['name', 'type']);
    const dataType = resolve(field.properties.type.$ref);
    expect(dataType.oneOf[0].enum).toEqual(expect.arrayContaining(['double', 'string', 'int', 'integer', 'byte_string']));
    expect(dataType.oneOf[1].properties.type.enum).toEqual(['basic', 'list', 'tensor']);
    expect(resolve('#/components/schemas/ContextFrame').properties.rows.items.required).toEqual(['contextRow', 'targetRows']);
  });

  it('describes responses: load 201/200 with {modelName, uri}, errors {error, message, code}', () => {
    const load = operation('/models/{model}', 'put');
    expect(load.requestBody.content['text/plain']).toBeDefined();
    for (const status of ['201', '200']) {
      expect(resolve(load.responses[status].content['application/json'].schema.$ref).required).toEqual(['modelName', 'uri']);
    }
    const error = resolve('#/components/schemas/Error');
    expect(error.required).toEqual(['error', 'message', 'code']);
    expect(error.properties.code.enum).toEqual([400, 401, 403, 404, 408, 413, 500]);
    for (const [path, method] of [
      ['/models/{model}', 'get'],
      ['/models/{model}/transform', 'post'],
      ['/models/{model}/rank', 'post'],
      ['/models/{model}/graph', 'get'],
    ] as const) {
      const responses = operation(path, method).responses;
      for (const status of ['400', '404', '408', '500']) {
        expect(resolve(resolve(responses[status].$ref).content['application/json'].schema.$ref)).toBe(error);
      }
    }
    // A body over its limit (a frame, a bundle URI) is 413; an unload of a registration whose bundle no longer loads answers it without bundleMeta.
    for (const [path, method] of [['/models/{model}', 'put'], ['/models/{model}/transform', 'post'], ['/models/{model}/rank', 'post']] as const) {
      expect(resolve(resolve(operation(path, method).responses['413'].$ref).content['application/json'].schema.$ref)).toBe(error);
    }
    expect(operation('/models/{model}', 'delete').responses['200'].content['application/json'].schema.oneOf.map((s: Json) => s.$ref)).toEqual(['#/components/schemas/ModelInfo', '#/components/schemas/RemovedRegistration']);
    expect(Object.keys(operation('/models/{model}/graph', 'get').responses['200'].content)).toEqual(['application/xml']);
    expect(resolve(operation('/models/{model}/rank', 'post').responses['200'].content['application/json'].schema.$ref).properties.results).toEqual({
      type: 'array',
      items: { type: 'string' },
    });
  });

  it('states each operation\'s capability under security, and that /health and /docs need none', () => {
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    const capabilities = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
      Object.entries(item as Json).filter(([k]) => k !== 'parameters').map(([method, op]) => [`${method.toUpperCase()} ${path}`, (op as Json)['x-svc-capability'] ?? null]),
    );
    expect(Object.fromEntries(capabilities)).toEqual({
      'PUT /models/{model}': 'model.write',
      'DELETE /models/{model}': 'model.write',
      'GET /models/{model}': 'model.read',
      'GET /models': 'model.read',
      'POST /models/{model}/transform': 'model.read',
      'POST /models/{model}/rank': 'model.read',
      'GET /models/{model}/sample': 'model.read',
      'GET /models/{model}/graph': 'model.read',
      'GET /models/{model}/health': 'model.read',
      'GET /metrics': 'observability.read',
      'GET /health': null,
      'GET /docs': null,
      'GET /docs/{path}': null,
      'GET /openapi.json': null,
    });
    for (const [op, capability] of capabilities) {
      const [method, path] = (op as string).split(' ') as [string, string];
      const operationDoc = operation(path, method.toLowerCase());
      if (capability === null) {
        expect([op, operationDoc.security]).toEqual([op, []]);
        continue;
      }
      // Optional (security off) or a bearer token; 401 and 403 described.
      expect([op, operationDoc.security]).toEqual([op, [{}, { bearer: [] }]]);
      expect(operationDoc.responses['401'].$ref).toBe('#/components/responses/Unauthenticated');
      expect(operationDoc.responses['403']).toBeDefined();
    }
  });

  it('has no dangling references', () => {
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) expect(resolve(ref), ref).toBeDefined();
  });
});

describe('toYaml', () => {
  const tricky = {
    openapi: '3.0.3',
    words: ['yes', 'No', 'on', 'OFF', 'null', 'true', 'y', '~', ''],
    numbers: [0, -1, 0.5, 1e21, 1.5e-7, -2e-9, 123456789012],
    strings: ['plain', 'a: b', '#hash', '- dash', 'x # y', 'line\nbreak', 'tab\there', 'quote "q" \'s\'', 'back\\slash', 'üñí €', '{}', '[1]', '*alias', '&anchor', '!tag', '%dir', '@at', '`tick`', ' lead', 'trail '],
    nested: [[1, [2, []]], [{ a: 1, b: [{ c: null }] }], {}],
    empty: { list: [], map: {}, skipped: undefined },
    '200': { $ref: '#/components/x' },
    'key with spaces': true,
  };

  it('writes block YAML by hand-checked rules', () => {
    expect(toYaml({ a: 1, b: 'yes', c: [true, null], d: {}, e: [], f: [{ g: 'h', i: [1, [2]] }] })).toBe(
      ['a: 1', 'b: "yes"', 'c:', '  - true', '  - null', 'd: {}', 'e: []', 'f:', '  - g: h', '    i:', '      - 1', '      - - 2', ''].join('\n'),
    );
    expect(toYaml('3.0.3')).toBe('"3.0.3"\n');
    expect(toYaml(1e21)).toBe('1.0e+21\n');
    expect(toYaml(1.5e-7)).toBe('1.5e-7\n');
    expect(() => toYaml(Number.NaN)).toThrow();
  });

  it.skipIf(!pythonHas('yaml'))('reads back as the same data with PyYAML (skipped when python3 with PyYAML is absent)', () => {
    expect(pyYaml(toYaml(tricky))).toEqual(JSON.parse(JSON.stringify(tricky)));
    expect(pyYaml(toYaml(doc))).toEqual(JSON.parse(JSON.stringify(doc)));
  });
});

describe('docsAsset', () => {
  const html = (path: string) => {
    const asset = docsAsset(path, '1.2.3')!;
    expect(asset.contentType).toBe('text/html; charset=utf-8');
    return String(asset.body);
  };
  const links = (page: string) => [...page.matchAll(/(?:href|src)="([^"]+)"/g)].map((m) => m[1]!);

  it('answers /docs and /docs/ with a Swagger UI page whose files all live under /docs/', () => {
    for (const [path, base] of [
      ['/docs', 'http://host/docs'],
      ['/docs/', 'http://host/docs/'],
      ['/docs/index.html', 'http://host/docs/index.html'],
    ] as const) {
      const page = html(path);
      expect(page).toMatch(/^<!DOCTYPE html>/);
      expect(page).toContain('<div id="swagger-ui"></div>');
      const resolved = links(page).map((l) => new URL(l, base).pathname);
      expect(resolved).toEqual(
        expect.arrayContaining([
          '/docs/swagger-ui.css',
          '/docs/swagger-ui-bundle.js',
          '/docs/swagger-ui-standalone-preset.js',
          '/docs/swagger-initializer.js',
        ]),
      );
      // Every file the page needs is one docsAsset serves (or will, once swagger-ui-dist is installed).
      for (const p of resolved) expect(p.startsWith('/docs/')).toBe(true);
      expect(page).not.toMatch(/https?:\/\//);
    }
  });

  it('serves an initializer that points Swagger UI at /openapi.json, above /docs/', () => {
    const init = docsAsset('/docs/swagger-initializer.js', '1.2.3')!;
    expect(init.contentType).toBe('text/javascript; charset=utf-8');
    expect(String(init.body)).toContain("new URL('../openapi.json', document.currentScript.src)");
    expect(String(init.body)).toContain('SwaggerUIBundle(');
    expect(String(init.body)).toContain('SwaggerUIStandalonePreset');
  });

  it('serves the document as /docs/swagger.yaml and /docs/swagger.json', () => {
    const yaml = docsAsset('/docs/swagger.yaml', '1.2.3')!;
    expect(yaml.contentType).toBe('application/yaml; charset=utf-8');
    expect(yaml.body).toBe(toYaml(doc));
    expect(String(yaml.body)).toContain('title: svc model runtime\n');
    const json = docsAsset('/docs/swagger.json?x=1', '1.2.3')!;
    expect(json.contentType).toBe('application/json; charset=utf-8');
    expect(JSON.parse(String(json.body))).toEqual(doc);
    expect(JSON.parse(String(docsAsset('/docs/swagger.json', '9.9.9')!.body)).info.version).toBe('9.9.9');
  });

  it('answers nothing outside its fixed names', () => {
    for (const path of [
      '/docs/../package.json',
      '/docs/%2e%2e/package.json',
      '/docs/..%2fpackage.json',
      '/docs//swagger-ui.css',
      '/docs/swagger-ui.css/',
      '/docs/./swagger-ui.css',
      '/docs/absolute-path.js',
      '/docs/index.js',
      '/docs/package.json',
      '/docs/constructor',
      '/docs/__proto__',
      '/docs/toString',
      '/docsx',
      '/docs/swagger.yml',
      '/swagger-ui.css',
      '',
    ]) {
      expect(docsAsset(path, '1'), path).toBeNull();
    }
  });

  const installed = swaggerUiDistPath() !== null;
  const files = {
    'swagger-ui.css': 'text/css; charset=utf-8',
    'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
    'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  };

  it('serves the swagger-ui-dist files', () => {
    expect(installed).toBe(true);
    const dir = swaggerUiDistPath()!;
    for (const [name, contentType] of Object.entries(files)) {
      const asset = docsAsset(`/docs/${name}`, '1')!;
      expect(asset.contentType).toBe(contentType);
      expect(Buffer.compare(Buffer.from(asset.body), readFileSync(join(dir, name)))).toBe(0);
    }
  });
});

describe('the checked-in OpenAPI document (server/openapi/model-runtime.json)', () => {
  it('is a valid OpenAPI 3.1 document (@apidevtools/swagger-parser)', async () => {
    const SwaggerParser = (await import('@apidevtools/swagger-parser')).default;
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeDefined();
  });
  // That it documents exactly the routes the model listener registers: test/openapi.test.ts.
});
