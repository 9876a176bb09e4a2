// The model runtime's interactive API docs (`/docs`): an OpenAPI 3.0 document of every
// operation, served as `/docs/swagger.yaml` (the reference's name) and `/docs/swagger.json`,
// and a Swagger UI page built from the files of the `swagger-ui-dist` package.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

interface DocsAsset {
  body: Buffer | string;
  contentType: string;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

function query(name: string, description: string, schema: object, required = false): object {
  return { name, in: 'query', required, description, schema };
}

/** A parameter that may repeat; each value may also be a comma-separated list. */
function repeatable(name: string, description: string): object {
  return { ...query(name, description, { type: 'array', items: { type: 'string' } }), style: 'form', explode: true };
}

const modelParam = { name: 'model', in: 'path', required: true, description: 'Name the model was registered under.', schema: { type: 'string' } };
const execParam = query(
  'exec',
  'Execution mode: `seq` (one row after another), `par` (all pool threads), `par-N` (at most N rows at a time). Default: `MODEL_EXECUTION_STRATEGY` (`par`).',
  { type: 'string', pattern: '^(seq|par|par-[1-9][0-9]*)$' },
);
const missingParam = query(
  'missing',
  'A model input absent from the frame: `impute` adds it with a default value (0, "", false, empty list or tensor); `error` fails.',
  { type: 'string', enum: ['impute', 'error'], default: 'impute' },
);
const descParam = query('desc', 'Highest score first when true.', { type: 'boolean', default: true });
const kParam = query('k', 'Keep the first k results (transform: only when `rank` is given).', { type: 'integer', minimum: 0 });

const errors = {
  '400': { $ref: '#/components/responses/BadRequest' },
  '404': { $ref: '#/components/responses/NotFound' },
  '408': { $ref: '#/components/responses/Timeout' },
  '500': { $ref: '#/components/responses/ServerError' },
};
const frameBody = {
  required: true,
  description: 'A frame in any of the four shapes; it is flattened to one leap frame before the model runs.',
  content: {
    'application/json': {
      schema: ref('Frame'),
      example: { schema: { fields: [{ name: 'feature_a', type: 'double' }] }, rows: [[0.42], [0.81]] },
    },
  },
};
const empty200 = { '200': { description: 'OK (empty body).' } };

function paths(): object {
  return {
    '/models/{model}': {
      parameters: [modelParam],
      put: {
        tags: ['models'],
        operationId: 'load',
        summary: 'Register a model, then load and warm its bundle',
        description: 'The body is one URI (`file:///…`, `s3://bucket/key`, `gs://bucket/object`). The bundle is loaded and warmed before the answer; when it cannot load, the previous registration stays.',
        requestBody: { required: true, content: { 'text/plain': { schema: { type: 'string', example: 'file:///models/airbnb.model.lr.zip' } } } },
        responses: {
          '201': { description: 'Registered under a new name.', content: json(ref('Model')) },
          '200': { description: 'Replaced an earlier registration.', content: json(ref('Model')) },
          ...errors,
        },
      },
      delete: {
        tags: ['models'],
        operationId: 'unload',
        summary: 'Unregister a model',
        responses: { '200': { description: 'The model that was removed.', content: json(ref('ModelInfo')) }, ...errors },
      },
      get: {
        tags: ['models'],
        operationId: 'describe',
        summary: 'Describe a model: bundle info, input and output schemas',
        responses: { '200': { description: 'The model.', content: json(ref('ModelInfo')) }, ...errors },
      },
    },
    '/models': {
      get: {
        tags: ['models'],
        operationId: 'list',
        summary: 'Every registered model, loaded or not',
        responses: { '200': { description: 'Registrations.', content: json({ type: 'array', items: ref('Model') }) }, '500': errors['500'] },
      },
    },
    '/models/{model}/transform': {
      parameters: [modelParam],
      post: {
        tags: ['inference'],
        operationId: 'transform',
        summary: 'Run a frame through the model',
        parameters: [
          repeatable('select', 'Columns to return, in this order (`a*b` names both a and b). Default: all.'),
          query('rank', 'Sort rows by this column, or by the product of columns (`a*b`, `a,b`).', { type: 'string' }),
          descParam,
          kParam,
          execParam,
          missingParam,
        ],
        requestBody: frameBody,
        responses: {
          '200': { description: 'Model output columns, then the request columns the model does not use.', content: json(ref('LeapFrame')) },
          ...errors,
        },
      },
    },
    '/models/{model}/rank': {
      parameters: [modelParam],
      post: {
        tags: ['inference'],
        operationId: 'rank',
        summary: 'Ids of the best-scoring rows',
        parameters: [
          query('id', 'Id column (read as a string).', { type: 'string' }, true),
          query('rank', 'Score column, or product of columns (`a*b`, `a,b`).', { type: 'string' }, true),
          kParam,
          descParam,
          query('group', "Keep each group's best row (the column may be one the model does not use).", { type: 'string' }),
          query('avg', 'Average the scores of each id.', { type: 'boolean', default: false }),
          execParam,
          missingParam,
        ],
        requestBody: frameBody,
        responses: { '200': { description: 'Ids, best first.', content: json(ref('RankResults')) }, ...errors },
      },
    },
    '/models/{model}/sample': {
      parameters: [modelParam],
      get: {
        tags: ['inference'],
        operationId: 'sample',
        summary: 'A frame of random values fitting the model inputs',
        parameters: [
          query('nrow', 'Number of rows (of the last group when `context` is given).', { type: 'integer', default: 1 }),
          repeatable('context', 'Field name prefixes, one group each (`a|b` matches either); gives nested Cartesian frames.'),
          repeatable('select', 'Flatten the frame and keep these columns.'),
        ],
        responses: { '200': { description: 'A leap frame, or a Cartesian frame with `context`.', content: json(ref('Frame')) }, ...errors },
      },
    },
    '/models/{model}/graph': {
      parameters: [modelParam],
      get: {
        tags: ['models'],
        operationId: 'graph',
        summary: "The model's stages as an SVG drawing",
        parameters: [
          query('elide-parent-schema', "Hide a pipeline's own input fields.", { type: 'boolean', default: true }),
          query('unique-schemas', 'When false, link each column from the stage producing it to the stages reading it.', { type: 'boolean', default: true }),
          query('density', 'Pixels per inch of the drawing.', { type: 'integer', default: 50, minimum: 1 }),
          query('vertical-spacing', 'Gap between layers, in inches.', { type: 'number', default: 0.5, minimum: 0 }),
        ],
        responses: { '200': { description: 'An SVG document.', content: { 'application/xml': { schema: { type: 'string' } } } }, ...errors },
      },
    },
    '/models/{model}/health': {
      parameters: [modelParam],
      get: {
        tags: ['health'],
        operationId: 'modelHealth',
        summary: 'Run random frames through the model',
        parameters: [
          query('n', 'Number of random frames.', { type: 'integer', default: 1 }),
          query('nrow', 'Rows per frame.', { type: 'integer', default: 1 }),
        ],
        responses: { ...empty200, ...errors },
      },
    },
    '/health': {
      get: { tags: ['health'], operationId: 'serviceHealth', summary: 'The service is up', responses: empty200 },
    },
    '/docs': {
      get: {
        tags: ['docs'],
        operationId: 'docs',
        summary: 'This documentation (Swagger UI); the document itself is /docs/swagger.yaml',
        responses: { '200': { description: 'HTML page.', content: { 'text/html': { schema: { type: 'string' } } } } },
      },
    },
    '/metrics': {
      get: {
        tags: ['metrics'],
        operationId: 'metrics',
        summary: 'Prometheus metrics',
        responses: { '200': { description: 'Prometheus text format 0.0.4.', content: { 'text/plain; version=0.0.4': { schema: { type: 'string' } } } } },
      },
    },
  };
}

const BASIC_TYPES = ['boolean', 'byte', 'short', 'int', 'integer', 'long', 'float', 'double', 'string', 'byte_string'];

function schemas(): object {
  const anyValues = { type: 'array', items: {}, description: 'One JSON value per field, in field order.' };
  return {
    DataType: {
      description: 'A type name is a nullable scalar; the object form gives lists, tensors and non-nullable scalars.',
      oneOf: [
        { type: 'string', enum: BASIC_TYPES },
        {
          type: 'object',
          required: ['type', 'base'],
          properties: {
            type: { type: 'string', enum: ['basic', 'list', 'tensor'] },
            base: { type: 'string', enum: BASIC_TYPES },
            isNullable: { type: 'boolean' },
            dimensions: { type: 'array', items: { type: 'integer' } },
          },
        },
      ],
    },
    Field: { type: 'object', required: ['name', 'type'], properties: { name: { type: 'string' }, type: ref('DataType') } },
    Schema: { type: 'object', required: ['fields'], properties: { fields: { type: 'array', items: ref('Field') } } },
    LeapFrame: {
      type: 'object',
      required: ['schema', 'rows'],
      description: 'Tensor values: a plain array, `{dimensions, values}` (dense) or `{dimensions, indices, values}` (sparse).',
      properties: { schema: ref('Schema'), rows: { type: 'array', items: anyValues } },
    },
    CartesianFrame: {
      type: 'object',
      required: ['contextFrame', 'targetFrame'],
      description: 'Every target row joined to every context row.',
      properties: { contextFrame: ref('Frame'), targetFrame: ref('Frame') },
    },
    ContextFrame: {
      type: 'object',
      required: ['contextSchema', 'targetSchema', 'rows'],
      description: 'Each context row joined to each of its target rows.',
      properties: {
        contextSchema: ref('Schema'),
        targetSchema: ref('Schema'),
        rows: {
          type: 'array',
          items: {
            type: 'object',
            required: ['contextRow', 'targetRows'],
            properties: { contextRow: anyValues, targetRows: { type: 'array', items: anyValues } },
          },
        },
      },
    },
    PrefixedFrame: {
      type: 'object',
      required: ['frame', 'prefix'],
      description: 'The inner frame with `prefix` prepended to every field name.',
      properties: { frame: ref('Frame'), prefix: { type: 'string' } },
    },
    Frame: { oneOf: [ref('LeapFrame'), ref('CartesianFrame'), ref('ContextFrame'), ref('PrefixedFrame')] },
    Model: {
      type: 'object',
      required: ['modelName', 'uri'],
      properties: { modelName: { type: 'string' }, uri: { type: 'string' } },
    },
    BundleInfo: {
      type: 'object',
      properties: {
        uid: { type: 'string' },
        name: { type: 'string' },
        format: { type: 'string', enum: ['json', 'proto'] },
        version: { type: 'string' },
        timestamp: { type: 'string' },
        meta: { type: 'object' },
      },
    },
    ModelInfo: {
      type: 'object',
      required: ['model', 'bundleMeta'],
      properties: {
        model: ref('Model'),
        bundleMeta: {
          type: 'object',
          properties: {
            info: ref('BundleInfo'),
            inputSchema: ref('Schema'),
            outputSchema: { ...ref('Schema'), description: 'The inputs, then every column the stages produce, in stage order.' },
          },
        },
      },
    },
    RankResults: { type: 'object', required: ['results'], properties: { results: { type: 'array', items: { type: 'string' } } } },
    Error: {
      type: 'object',
      required: ['error', 'message', 'code'],
      properties: {
        error: { type: 'string', example: 'ModelNotFound' },
        message: { type: 'string', example: 'foo not found in [a,b]' },
        code: { type: 'integer', description: 'Equals the HTTP status.', enum: [400, 404, 408, 500] },
      },
    },
  };
}

function errorResponse(description: string): object {
  return { description, content: json(ref('Error')) };
}

export function modelOpenApi(version: string): object {
  return {
    openapi: '3.0.3',
    info: { title: 'svc model runtime', version, description: 'Serves MLeap bundles (json format).' },
    tags: [{ name: 'models' }, { name: 'inference' }, { name: 'health' }, { name: 'docs' }, { name: 'metrics' }],
    paths: paths(),
    components: {
      schemas: schemas(),
      responses: {
        BadRequest: errorResponse('Bad input: query, body, frame or bundle.'),
        NotFound: errorResponse('Unknown model, or no models registered.'),
        Timeout: errorResponse('The operation timed out.'),
        ServerError: errorResponse('Anything else.'),
      },
    },
  };
}

// ---- YAML for plain JSON data ----

/** Words YAML 1.1 readers take for booleans or null when unquoted. */
const YAML_WORDS = new Set(['y', 'n', 'yes', 'no', 'true', 'false', 'on', 'off', 'null']);
/** Plain (unquoted) scalars: no indicator first, no `: ` or ` #`, no trailing space. */
const PLAIN = /^[A-Za-z_](?:[A-Za-z0-9_ .,()/-]*[A-Za-z0-9_.)/-])?$/;

function yamlString(s: string): string {
  // A JSON string literal is a valid YAML double-quoted scalar.
  return PLAIN.test(s) && !YAML_WORDS.has(s.toLowerCase()) ? s : JSON.stringify(s);
}

function yamlNumber(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`YAML for JSON data: ${n} is not a JSON number`);
  const s = String(n);
  if (!s.includes('e')) return s;
  // YAML 1.1 floats need a dot in the mantissa and a signed exponent.
  const [mantissa, exponent] = s.split('e') as [string, string];
  return `${mantissa.includes('.') ? mantissa : `${mantissa}.0`}e${/^[+-]/.test(exponent) ? exponent : `+${exponent}`}`;
}

function isBlock(value: unknown): value is object {
  if (Array.isArray(value)) return value.length > 0;
  return typeof value === 'object' && value !== null && Object.values(value).some((v) => v !== undefined);
}

function yamlScalar(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return yamlString(value);
  if (typeof value === 'number') return yamlNumber(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return '[]';
  if (typeof value === 'object') return '{}';
  throw new Error(`YAML for JSON data: cannot write a ${typeof value}`);
}

/** Block-style YAML of JSON data (what `JSON.stringify` would keep), indented by `indent` spaces. */
export function toYaml(value: unknown, indent = 0): string {
  const pad = ' '.repeat(indent);
  if (!isBlock(value)) return `${pad}${yamlScalar(value)}\n`;
  if (Array.isArray(value)) {
    return value
      .map((item) => {
        const v = item === undefined ? null : item;
        // A nested block is written one level deeper, with its first indentation turned into "- ".
        return isBlock(v) ? `${pad}- ${toYaml(v, indent + 2).slice(indent + 2)}` : `${pad}- ${yamlScalar(v)}\n`;
      })
      .join('');
  }
  return Object.entries(value)
    .filter(([, v]) => v !== undefined)
    .map(([key, v]) => (isBlock(v) ? `${pad}${yamlString(key)}:\n${toYaml(v, indent + 2)}` : `${pad}${yamlString(key)}: ${yamlScalar(v)}\n`))
    .join('');
}

// ---- The /docs files ----

/** Files taken from swagger-ui-dist, by the name they are served under. */
const SWAGGER_UI_FILES: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-16x16.png': 'image/png',
  'favicon-32x32.png': 'image/png',
};

/** URLs are relative, so the page also works behind a path prefix; `base` leads from the page to /docs/. */
function indexHtml(base: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>svc model runtime API</title>
<link rel="stylesheet" href="${base}swagger-ui.css">
<link rel="icon" type="image/png" href="${base}favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="${base}favicon-16x16.png" sizes="16x16">
<style>body { margin: 0; }</style>
</head>
<body>
<div id="swagger-ui"></div>
<script src="${base}swagger-ui-bundle.js"></script>
<script src="${base}swagger-ui-standalone-preset.js"></script>
<script src="${base}swagger-initializer.js"></script>
</body>
</html>
`;
}

const INITIALIZER = `// The document sits beside this script: /docs/swagger.yaml.
const specUrl = new URL('swagger.yaml', document.currentScript.src).href;
window.addEventListener('load', () => {
  window.ui = SwaggerUIBundle({
    url: specUrl,
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'StandaloneLayout',
  });
});
`;

let spec: { version: string; yaml: string; json: string } | undefined;

function specFor(version: string) {
  if (spec?.version !== version) {
    const doc = modelOpenApi(version);
    spec = { version, yaml: toYaml(doc), json: JSON.stringify(doc, null, 2) };
  }
  return spec;
}

const require = createRequire(import.meta.url);
let swaggerUiDir: string | null | undefined;
const swaggerUiCache = new Map<string, Buffer>();

/** swagger-ui-dist's folder, or null when the package is not installed. */
export function swaggerUiDistPath(): string | null {
  if (swaggerUiDir === undefined) {
    try {
      const getAbsoluteFSPath = require('swagger-ui-dist/absolute-path.js') as () => string;
      swaggerUiDir = getAbsoluteFSPath();
    } catch {
      swaggerUiDir = null;
    }
  }
  return swaggerUiDir;
}

function swaggerUiFile(name: string): Buffer | null {
  const cached = swaggerUiCache.get(name);
  if (cached) return cached;
  const dir = swaggerUiDistPath();
  if (dir === null) return null;
  try {
    const body = readFileSync(join(dir, name));
    swaggerUiCache.set(name, body);
    return body;
  } catch {
    return null;
  }
}

/**
 * The file for a request path under /docs, or null (404). Only fixed names are answered: the
 * page, its initializer, the document, and the allow-listed swagger-ui-dist files.
 */
export function docsAsset(path: string, version: string): DocsAsset | null {
  const name = path.split(/[?#]/, 1)[0]!;
  switch (name) {
    case '/docs':
      return { body: indexHtml('docs/'), contentType: 'text/html; charset=utf-8' };
    case '/docs/':
    case '/docs/index.html':
      return { body: indexHtml(''), contentType: 'text/html; charset=utf-8' };
    case '/docs/swagger-initializer.js':
      return { body: INITIALIZER, contentType: 'text/javascript; charset=utf-8' };
    case '/docs/swagger.yaml':
      return { body: specFor(version).yaml, contentType: 'application/yaml; charset=utf-8' };
    case '/docs/swagger.json':
      return { body: specFor(version).json, contentType: 'application/json; charset=utf-8' };
  }
  const file = name.startsWith('/docs/') ? name.slice('/docs/'.length) : '';
  const contentType = Object.hasOwn(SWAGGER_UI_FILES, file) ? SWAGGER_UI_FILES[file]! : undefined;
  if (!contentType) return null;
  const body = swaggerUiFile(file);
  return body ? { body, contentType } : null;
}
