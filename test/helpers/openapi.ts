// The HTTP tests' one check of answers against the API descriptions (server/openapi/*.json): the
// operation the request reached, the answer's status among its responses, its media type among
// the response's, the JSON body against the response's schema (ajv, JSON Schema 2020-12, the
// dialect of OpenAPI 3.1) and the response's headers (X-Request-Id on every answer). The shared
// clients call it on every answer (docs-client.ts `Api`, http.ts `checkedFetch`, and `modelFetch`
// below, the same check bound to the model listener's model-runtime.json), so a test that uses
// them fails, naming the path and ajv's error, when an answer and the document disagree.

import fs from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type Json = Record<string, any>;

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const readDocument = (file: string): Json => JSON.parse(fs.readFileSync(new URL(`../../server/openapi/${file}`, import.meta.url), 'utf8'));

/** What an answer is checked on: a fetch Response's parts, or a Reply of docs-client.ts. */
export interface Answer {
  status: number;
  headers: Headers;
  /** The body as text; undefined when it was not read (not JSON, or HEAD). */
  text?: string;
}

interface Template {
  path: string;
  pattern: RegExp;
  /** Literal segments: a concrete path matches its most literal template first (/v1/documents/search before /v1/documents/{documentId}). */
  literals: number;
}

const OPERATIONS = ['get', 'head', 'post', 'put', 'patch', 'delete'];

/** One OpenAPI 3.1 document and the validators of its schemas, compiled on first use. */
export class ApiConformance {
  readonly doc: Json;
  private readonly ajv: Ajv2020;
  private readonly templates: Template[];
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly id: string;

  constructor(
    /** The document's file name under server/openapi/. */
    readonly file: string,
    /** The schema (a JSON pointer into the document) of an answer no documented operation gave: 404 and 405. */
    private readonly fallbackError: string,
  ) {
    this.doc = readDocument(file);
    this.id = `https://svc.invalid/openapi/${file}`;
    // strict off: OpenAPI's own keywords (discriminator, xml, externalDocs) beside the schemas'.
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(this.ajv);
    this.ajv.addSchema({ ...this.doc, $id: this.id });
    this.templates = Object.keys(this.doc.paths)
      .map((path) => ({ path, pattern: templatePattern(path), literals: path.split('/').filter((s) => s && !s.startsWith('{')).length }))
      .sort((a, b) => b.literals - a.literals);
  }

  /** The documented operation a request reaches: its path template and operation object. */
  operation(method: string, pathname: string): { path: string; op: Json | undefined } | undefined {
    const m = method.toLowerCase();
    const matching = this.templates.filter((t) => t.pattern.test(pathname));
    if (matching.length === 0) return undefined;
    const withMethod = matching.find((t) => this.doc.paths[t.path][m] !== undefined);
    const path = (withMethod ?? matching[0]!).path;
    return { path, op: withMethod ? this.doc.paths[path][m] : undefined };
  }

  /** Every way the answer disagrees with the document (none: it conforms). */
  problems(answer: Answer, method: string, url: string): string[] {
    const m = method.toUpperCase();
    if (m === 'OPTIONS') return [];
    const { pathname } = new URL(url, 'http://host');
    const found = this.operation(m, pathname);
    const where = `${m} ${pathname} → ${answer.status}`;
    if (!found?.op) {
      // A path no operation has: the listener's not-found (or, where the path exists, 405) envelope.
      if (answer.status !== 404 && answer.status !== 405) {
        return [`${where}: ${found ? `${found.path} documents no ${m}` : 'no path of the document matches'}, yet the answer is not 404 or 405`];
      }
      return this.bodyProblems(answer, m, where, { [JSON_TYPE]: { schema: {} } }, () => `#${this.fallbackError}`);
    }
    const base = `#/paths/${pointerEscape(found.path)}/${m.toLowerCase()}/responses`;
    let response = found.op.responses[String(answer.status)] as Json | undefined;
    let pointer = `${base}/${answer.status}`;
    if (!response && answer.status >= 400) {
      response = found.op.responses.default;
      pointer = `${base}/default`;
    }
    if (!response) return [`${where}: status ${answer.status} is not documented for ${m} ${found.path} (it documents ${Object.keys(found.op.responses).join(', ')})`];
    while (typeof response.$ref === 'string') {
      pointer = response.$ref;
      response = this.resolve(response.$ref);
    }
    return [...this.headerProblems(answer, where, response), ...this.bodyProblems(answer, m, where, response.content, (key) => `${pointer}/content/${pointerEscape(key)}/schema`)];
  }

  private headerProblems(answer: Answer, where: string, response: Json): string[] {
    const out: string[] = [];
    for (const [name, declared] of Object.entries((response.headers ?? {}) as Json)) {
      const header = (typeof declared.$ref === 'string' ? this.resolve(declared.$ref) : declared) as Json;
      const value = answer.headers.get(name);
      if (value === null) {
        if (header.required) out.push(`${where}: the header ${name} is required and missing`);
        continue;
      }
      if (!header.schema) continue;
      const validate = this.inline(header.schema);
      if (!validate(value)) out.push(`${where}: the header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(validate.errors)}`);
    }
    return out;
  }

  /** `schemaAt`: the pointer of the schema of a content key. */
  private bodyProblems(answer: Answer, method: string, where: string, content: Json | undefined, schemaAt: (key: string) => string): string[] {
    const type = answer.headers.get('content-type');
    const hasBody = method !== 'HEAD' && answer.text !== undefined ? answer.text.length > 0 : method !== 'HEAD' && type !== null && answer.headers.get('content-length') !== '0';
    if (!hasBody) return [];
    if (!content) return [`${where}: the answer has a body (${type ?? 'no Content-Type'}) where the document has none`];
    if (type === null) return [`${where}: a body without Content-Type`];
    const key = mediaKey(Object.keys(content), type);
    if (key === undefined) return [`${where}: Content-Type ${type} is not one of ${Object.keys(content).join(', ')}`];
    const schema = content[key].schema;
    if (!schema || !isJson(type) || answer.text === undefined) return [];
    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      return [`${where}: ${type} that is not JSON: ${answer.text.slice(0, 200)}`];
    }
    const pointer = schemaAt(key);
    const validate = this.at(pointer);
    if (validate(body)) return [];
    return [`${where}: the body does not match ${pointer}: ${this.ajv.errorsText(validate.errors, { dataVar: 'body' })}\n  body: ${answer.text.slice(0, 500)}`];
  }

  /** The validator of the schema at `pointer` (`#/...`) in the document. */
  private at(pointer: string): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (!validate) this.validators.set(pointer, (validate = this.ajv.compile({ $ref: `${this.id}${pointer}` })));
    return validate;
  }

  /** The validator of a schema without references (a header's). */
  private inline(schema: Json): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.validators.get(key);
    if (!validate) this.validators.set(key, (validate = this.ajv.compile(schema)));
    return validate;
  }

  /** A local reference (`#/components/...`) in the document. */
  resolve(ref: string): Json {
    if (!ref.startsWith('#/')) throw new Error(`Not a local reference: ${ref}`);
    return ref
      .slice(2)
      .split('/')
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((node: Json | undefined, key) => node?.[key], this.doc) as Json;
  }
}

const JSON_TYPE = 'application/json';

const isJson = (type: string) => /^application\/(?:[\w.+-]+\+)?json\b/i.test(type.trim());

/** `{name}` is one segment; a trailing `{path}` is the rest of the path (the router's `*`). */
function templatePattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment, i, all) => {
      if (segment === '{path}' && i === all.length - 1) return '.*';
      return segment.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
    })
    .join('/');
  return new RegExp(`^${source}$`);
}

const pointerEscape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/** The content key a media type answers: the same type and parameters, the same type, `type/*`, then `*\/*`. */
function mediaKey(keys: string[], type: string): string | undefined {
  const norm = (t: string) => t.toLowerCase().replace(/\s+/g, '');
  const bare = (t: string) => norm(t).split(';')[0]!;
  const params = (t: string) => norm(t).split(';').slice(1).filter((p) => !p.startsWith('charset=')).sort().join(';');
  return (
    keys.find((k) => bare(k) === bare(type) && params(k) === params(type)) ??
    keys.find((k) => bare(k) === bare(type) && params(k) === '') ??
    keys.find((k) => k.endsWith('/*') && bare(type).startsWith(k.slice(0, -1))) ??
    keys.find((k) => k === '*/*')
  );
}

let service: ApiConformance | undefined;
let model: ApiConformance | undefined;

/** Listener 1's document (svc-api.json). */
export function serviceApi(): ApiConformance {
  return (service ??= new ApiConformance('svc-api.json', '/components/schemas/Error'));
}

/** The model listener's document (model-runtime.json). */
export function modelApi(): ApiConformance {
  return (model ??= new ApiConformance('model-runtime.json', '/components/schemas/Error'));
}

/** Fails (naming the request, the schema and ajv's error) unless the answer conforms to `api`'s document (listener 1's by default). */
export function expectConforms(answer: Answer, method: string, url: string, api: ApiConformance = serviceApi()): void {
  const problems = api.problems(answer, method, url);
  if (problems.length > 0) throw new Error(`The answer does not conform to server/openapi/${api.file}:\n${problems.join('\n')}`);
}

/** A `fetch` whose every answer is checked against one document (a JSON body is read from a clone). */
export type CheckedFetch = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** `fetch`, then the answer checked against `api()`'s document. */
export function checkedFetchFor(api: () => ApiConformance): CheckedFetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    const method = init?.method ?? 'GET';
    const type = res.headers.get('content-type');
    const text = method.toUpperCase() !== 'HEAD' && type !== null && isJson(type) ? await res.clone().text() : undefined;
    expectConforms({ status: res.status, headers: res.headers, text }, method, String(input), api());
    return res;
  };
}

/** `fetch`, then the answer checked against listener 1's document (svc-api.json). */
export const checkedFetch: CheckedFetch = checkedFetchFor(serviceApi);

/** `fetch`, then the answer checked against the model listener's document (model-runtime.json): the model suites' fetch. */
export const modelFetch: CheckedFetch = checkedFetchFor(modelApi);
