// The model runtime's interactive API docs (`/docs`): the OpenAPI 3.0 document of every
// operation (checked in as server/openapi/model-runtime.json, validated by
// test/models-docs.test.ts), served as `/docs/swagger.yaml` (the reference's name) and
// `/docs/swagger.json`, and a Swagger UI page built from the files of the `swagger-ui-dist` package.

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

interface DocsAsset {
  body: Buffer | string;
  contentType: string;
}

/**
 * The checked-in document (server/openapi/model-runtime.json), read from the source tree both when
 * this module runs from source (tests) and from dist/server/ (the service runs from its checkout).
 */
const DOCUMENT_FILES = [new URL('./openapi/model-runtime.json', import.meta.url), new URL('../../server/openapi/model-runtime.json', import.meta.url)];

let documentText: string | undefined;

function documentJson(): string {
  if (documentText === undefined) {
    const file = DOCUMENT_FILES.find((url) => existsSync(url));
    if (!file) throw new Error('server/openapi/model-runtime.json is missing');
    documentText = readFileSync(file, 'utf8');
  }
  return documentText;
}

/** The OpenAPI document of the model runtime, with `version` as its info.version. */
export function modelOpenApi(version: string): object {
  const doc = JSON.parse(documentJson()) as { info: { version: string } };
  doc.info.version = version;
  return doc;
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
