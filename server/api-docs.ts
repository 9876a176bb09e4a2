// The API descriptions of both listeners and their interactive docs: an OpenAPI 3.1 document
// checked in under server/openapi/ (svc-api.json for listener 1, model-runtime.json for the model
// listener; test/openapi.test.ts holds them to the routers and validates them), served as
// `/openapi.json`, and `/docs`, a Swagger UI page over it built from the files of the
// `swagger-ui-dist` package. The model listener also keeps the reference's names of its document,
// `/docs/swagger.yaml` and `/docs/swagger.json`.

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { RequestHead, Exchange } from './exchange.js';
import type { Router } from './router.js';
import type { ServerContext } from './server-context.js';
import { VERSION } from '../engine/base/version.js';

export interface DocsAsset {
  body: Buffer | string;
  contentType: string;
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

// ---- The documents and their /docs pages ----

const JSON_TYPE = 'application/json; charset=utf-8';
const HTML_TYPE = 'text/html; charset=utf-8';
const JS_TYPE = 'text/javascript; charset=utf-8';

/** Files taken from swagger-ui-dist, by the name they are served under. */
const SWAGGER_UI_FILES: Readonly<Record<string, string>> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-16x16.png': 'image/png',
  'favicon-32x32.png': 'image/png',
};

/** URLs are relative, so the page also works behind a path prefix; `base` leads from the page to /docs/. */
function indexHtml(title: string, base: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title}</title>
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

const INITIALIZER = `// The document is the listener's /openapi.json, one level above this script (/docs/).
const specUrl = new URL('../openapi.json', document.currentScript.src).href;
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

interface DescriptionOptions {
  /** The document's file name under server/openapi/. */
  file: string;
  /** The /docs page's title. */
  title: string;
  /** Also `/docs/swagger.yaml` and `/docs/swagger.json` (the model runtime reference's names). */
  swaggerNames?: boolean;
}

/** One listener's OpenAPI document and its /docs files. */
export class ApiDescription {
  private text: string | undefined;
  private served: { version: string; json: string; yaml?: string } | undefined;

  constructor(private readonly options: DescriptionOptions) {}

  /**
   * The checked-in document, read from the source tree both when this module runs from source
   * (tests) and from dist/server/ (the service runs from its checkout).
   */
  private documentText(): string {
    if (this.text === undefined) {
      const candidates = [new URL(`./openapi/${this.options.file}`, import.meta.url), new URL(`../../server/openapi/${this.options.file}`, import.meta.url)];
      const file = candidates.find((url) => existsSync(url));
      if (!file) throw new Error(`server/openapi/${this.options.file} is missing`);
      this.text = readFileSync(file, 'utf8');
    }
    return this.text;
  }

  /** The document, with `version` as its info.version. */
  document(version: string): Record<string, any> {
    const doc = JSON.parse(this.documentText()) as { info: { version: string } };
    doc.info.version = version;
    return doc;
  }

  private forVersion(version: string) {
    if (this.served?.version !== version) {
      const doc = this.document(version);
      this.served = { version, json: JSON.stringify(doc, null, 2), yaml: this.options.swaggerNames ? toYaml(doc) : undefined };
    }
    return this.served;
  }

  /**
   * The file for a request path (`/openapi.json`, or under /docs), or null (404). Only fixed
   * names are answered: the document, the page, its initializer and the allow-listed
   * swagger-ui-dist files.
   */
  asset(path: string, version: string): DocsAsset | null {
    const name = path.split(/[?#]/, 1)[0]!;
    switch (name) {
      case '/openapi.json':
        return { body: this.forVersion(version).json, contentType: JSON_TYPE };
      case '/docs':
        return { body: indexHtml(this.options.title, 'docs/'), contentType: HTML_TYPE };
      case '/docs/':
      case '/docs/index.html':
        return { body: indexHtml(this.options.title, ''), contentType: HTML_TYPE };
      case '/docs/swagger-initializer.js':
        return { body: INITIALIZER, contentType: JS_TYPE };
    }
    if (this.options.swaggerNames && name === '/docs/swagger.yaml') return { body: this.forVersion(version).yaml!, contentType: 'application/yaml; charset=utf-8' };
    if (this.options.swaggerNames && name === '/docs/swagger.json') return { body: this.forVersion(version).json, contentType: JSON_TYPE };
    const file = name.startsWith('/docs/') ? name.slice('/docs/'.length) : '';
    const contentType = Object.hasOwn(SWAGGER_UI_FILES, file) ? SWAGGER_UI_FILES[file]! : undefined;
    if (!contentType) return null;
    const body = swaggerUiFile(file);
    return body ? { body, contentType } : null;
  }
}

/** Listener 1's document: blob API, uploads, operations, documents, legacy repositories. */
export const SERVICE_API = new ApiDescription({ file: 'svc-api.json', title: 'svc API' });
/** The model listener's document. */
export const MODEL_API = new ApiDescription({ file: 'model-runtime.json', title: 'svc model runtime API', swaggerNames: true });

/** Listener 1's GET /openapi.json, /docs and /docs/* (public routes). */
export function mountServiceDescription(router: Router, _ctx: ServerContext): void {
  mountDescription(router, SERVICE_API, (ex, req) => ex.json(404, { error: 'not_found', message: `No route for ${ex.method} ${req.getUrl()}` }));
}

/** The model listener's GET /openapi.json, /docs and the document's reference names under /docs (public routes). */
export function mountModelDescription(router: Router, _ctx: ServerContext): void {
  mountDescription(router, MODEL_API, (ex, req) => ex.json(404, { error: 'NotFound', message: `No document ${req.getUrl()}`, code: 404 }));
}

/** `notFound` answers a name under /docs that is not served. */
function mountDescription(router: Router, description: ApiDescription, notFound: (ex: Exchange, req: RequestHead) => void): void {
  for (const pattern of ['/openapi.json', '/docs', '/docs/*']) {
    router.on('GET', pattern, ({ ex, req }) => {
      const asset = description.asset(req.getUrl(), VERSION);
      if (!asset) return notFound(ex, req);
      ex.send(200, { 'Content-Type': asset.contentType }, asset.body);
    }, { name: pattern === '/docs/*' ? '/docs' : pattern });
  }
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
