// The model runtime listener (HTTP_PORT): the reference runtime's operations over ModelService.
// With security on, the router's guard checks each route's capability (model.read, model.write,
// observability.read); /health and /docs stay public.

import { parseExecutionMode, type ExecutionMode } from '../engine/base/config.js';
import { SvcError } from '../engine/base/errors.js';
import type { Logger } from '../engine/base/log.js';
import { bodyTooLarge, isModelError, modelNameError, queryError, type ModelErrorCode } from '../engine/models/index.js';
import { decodeFrame } from '../engine/models/index.js';
import { encodeRow, encodeSchema, encodeFieldType } from '../engine/models/index.js';
import { renderGraphSvg } from '../engine/models/index.js';
import { sampleFrame } from '../engine/models/index.js';
import { timeoutOr, type LoadedModel } from '../engine/models/index.js';
import { finishRank, parseSelection, selectColumns, transformBody, type Missing } from '../engine/models/index.js';
import type { LeapFrame } from '../engine/models/index.js';
import type { ModelMetrics } from './model-metrics.js';
import { mountModelDescription } from './api-docs.js';
import { sharedBody } from './body-readers.js';
import { JSON_UTF8 } from './exchange.js';
import type { BodyReader, Call, Method, Router } from './router.js';
import type { ServerContext } from './server-context.js';
import type { Surface } from './surface.js';
import { MODEL_URI_MAX_BYTES } from '../engine/base/limits.js';
import { headersOf, statusOf } from './failure-status.js';
import { routeHint } from './route-hint.js';

const MAX_MODEL_NAME = 256;
const MAX_URI_BYTES = MODEL_URI_MAX_BYTES;

const READ = 'model.read';
const WRITE = 'model.write';

/** The name MLeap's runtime gives each failure of the model runtime (the body's `error`). */
const MLEAP_NAMES: Record<ModelErrorCode, string> = {
  model_bundle_invalid: 'BundleException',
  model_frame_invalid: 'FrameException',
  model_transform_failed: 'TransformException',
  model_query_invalid: 'QueryException',
  model_uri_invalid: 'URIError',
  model_name_invalid: 'DecodeFailure',
  model_body_too_large: 'PayloadTooLarge',
  model_location_forbidden: 'ForbiddenLocation',
  model_not_found: 'ModelNotFound',
  no_models_loaded: 'NoModelsLoaded',
  model_timeout: 'ModelTimeout',
};

/** The guard's refusals (401, 403) in the runtime's envelope, under the runtime's kind of name. */
const GUARD_ERRORS: Record<string, string> = { unauthenticated: 'Unauthenticated', forbidden: 'Forbidden' };

/** The runtime's name of a failure it answers; undefined for any other error (a 500 InternalError). */
function runtimeName(err: unknown): string | undefined {
  if (isModelError(err)) return MLEAP_NAMES[err.code];
  return err instanceof SvcError ? GUARD_ERRORS[err.code] : undefined;
}

/** A model failure or a guard's refusal as `{ error, message, code }`, `code` the status the kind maps to. */
function knownAnswer(err: unknown) {
  const error = runtimeName(err);
  if (error === undefined) return undefined;
  const failure = err as SvcError;
  const status = statusOf(failure);
  return { status, body: { error, message: failure.message, code: status }, headers: headersOf(failure), errorName: error };
}

/** The model runtime's surface: errors as `{ error, message, code }`, its operations measured with the reference's metric names. */
export function modelSurface(metrics: ModelMetrics, log: Logger, lingerBytes: number): Surface {
  return {
    log,
    lingerBytes,
    known: knownAnswer,
    internal: (requestId) => ({ status: 500, body: { error: 'InternalError', message: `Internal service error (request ${requestId})`, code: 500 }, errorName: 'unchecked' }),
    begin() {},
    observe: (route, _method, status, seconds, errorName) => metrics.observe(route, status, seconds * 1000, errorName),
  };
}

const frameTooLarge = (max: number) => bodyTooLarge(`request body is larger than ${max} bytes (MODEL_MAX_FRAME_BYTES)`);
const uriTooLarge = (max: number) => bodyTooLarge(`request body is larger than ${max} bytes (a bundle URI)`);

export function mountModelApi(router: Router, ctx: ServerContext): void {
  const { engine, modelMetrics: metrics } = ctx;
  const service = engine.models;
  const config = service.config;
  const frameReader = sharedBody(config.maxFrameBytes, frameTooLarge);
  /** An operation, measured under `name`, that needs `capability` with security on. */
  const route = <B>(method: Method, pattern: string, name: string, capability: string, handler: (call: Call<B>) => Promise<void>, body?: BodyReader<B>) => {
    router.on(method, pattern, handler, { name, capability, body });
  };
  /** Runs `work` under MODEL_REQUEST_TIMEOUT; past it the answer is 408 ModelTimeout. */
  const timed = <T>(loaded: LoadedModel, what: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    // A timer cleared on completion (AbortSignal.timeout would keep one per request pending for the whole limit).
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), config.requestTimeoutMs);
    return work(controller.signal)
      .catch((err: unknown) => {
        throw timeoutOr(err, controller.signal, `Timeout error within ${config.requestTimeoutMs}ms for model [${loaded.registration.modelName}]: ${what} timed out`);
      })
      .finally(() => clearTimeout(timer));
  };
  /** Parameters transform and rank share. */
  const runOptions = (q: URLSearchParams) => ({
    desc: booleanParam(q, 'desc', true),
    k: optionalCount(q, 'k'),
    mode: execParam(q, config.executionStrategy),
    missing: missingParam(q),
  });

  route('PUT', '/models/:model', 'load', WRITE, async ({ ex, params, body }) => {
    const name = modelName(params[0]!);
    const { bytes, length } = await body;
    const uri = Buffer.from(bytes, 0, length).toString('utf8');
    const { created, registration } = await service.register(name, uri);
    ex.json(created ? 201 : 200, { modelName: registration.modelName, uri: registration.uri });
  }, sharedBody(MAX_URI_BYTES, uriTooLarge));

  route('DELETE', '/models/:model', 'unload', WRITE, async ({ ex, params }) => {
    const gone = await service.unregister(modelName(params[0]!));
    // A registration whose bundle no longer loads is removed too, answered without bundleMeta.
    ex.json(200, 'registration' in gone ? describe(gone) : { model: { modelName: gone.modelName, uri: gone.uri } });
  });

  route('GET', '/models/:model', 'describe', READ, async ({ ex, params }) => {
    ex.json(200, describe(await service.get(modelName(params[0]!))));
  });

  route('GET', '/models', 'list', READ, async ({ ex }) => {
    ex.json(200, service.registered().map((r) => ({ modelName: r.modelName, uri: r.uri })));
  });

  route('POST', '/models/:model/transform', 'transform', READ, async ({ ex, params, query: q, body }) => {
    const { mode, ...common } = runOptions(q);
    const query = { select: parseSelection(q.getAll('select')), rank: parseSelection(q.getAll('rank')), ...common };
    const loaded = await service.get(modelName(params[0]!));
    const frameBody = await body;
    const parts = await timed(loaded, 'transform', (signal) => service.transform(loaded, frameBody, query, mode, signal));
    await ex.sendPieces(JSON_UTF8, [`{"schema":${parts[0]!.schema},"rows":[`, ...transformBody(parts, query), ']}']);
  }, frameReader);

  route('POST', '/models/:model/rank', 'rank', READ, async ({ ex, params, query: q, body }) => {
    const id = q.get('id');
    if (!id) throw queryError('query parameter "id" is required');
    const rank = parseSelection(q.getAll('rank'));
    if (rank.length === 0) throw queryError('query parameter "rank" is required');
    const group = q.get('group') ?? undefined;
    const { mode, ...common } = runOptions(q);
    const query = { id, rank, group: group === '' ? undefined : group, avg: booleanParam(q, 'avg', false), ...common };
    const loaded = await service.get(modelName(params[0]!));
    const frameBody = await body;
    const parts = await timed(loaded, 'rank', (signal) => service.rank(loaded, frameBody, query, mode, signal));
    ex.json(200, { results: finishRank(parts, query) });
  }, frameReader);

  route('GET', '/models/:model/sample', 'sample', READ, async ({ ex, params, query: q }) => {
    const nrow = integerParam(q, 'nrow', 1);
    if (nrow > config.maxFrameRows) throw queryError(`nrow is larger than ${config.maxFrameRows} (MODEL_MAX_FRAME_ROWS)`);
    const contexts = q.getAll('context').flatMap((c) => c.split(',')).map((c) => c.trim()).filter(Boolean);
    const select = parseSelection(q.getAll('select'));
    const loaded = await service.get(modelName(params[0]!));
    const frame = sampleFrame(loaded.model.inputSchema, loaded.model.inputDomains, nrow, contexts);
    if (select.length === 0) return ex.json(200, frame);
    const selected = selectColumns(decodeFrame(frame, { maxRows: config.maxFrameRows }), select);
    ex.json(200, { schema: encodeSchema(selected.fields), rows: selected.rows.map(encodeRow) });
  });

  route('GET', '/models/:model/graph', 'graph', READ, async ({ ex, params, query: q }) => {
    const options = {
      elideParentSchema: booleanParam(q, 'elide-parent-schema', true),
      uniqueSchemas: booleanParam(q, 'unique-schemas', true),
      density: integerParam(q, 'density', 50),
      verticalSpacing: numberParam(q, 'vertical-spacing', 0.5),
    };
    const loaded = await service.get(modelName(params[0]!));
    ex.send(200, { 'Content-Type': 'application/xml; charset=utf-8' }, renderGraphSvg(loaded.model.graph, options));
  });

  route('GET', '/models/:model/health', 'model-health', READ, async ({ ex, params, query: q }) => {
    const n = integerParam(q, 'n', 1);
    const nrow = integerParam(q, 'nrow', 1);
    if (n * nrow > config.maxFrameRows) throw queryError(`n × nrow is larger than ${config.maxFrameRows} (MODEL_MAX_FRAME_ROWS)`);
    await service.warm(await service.get(modelName(params[0]!)), n, nrow);
    ex.send(200, {});
  });

  router.on('GET', '/health', ({ ex }) => {
    ex.send(200, {});
  }, { name: 'service-health' });

  router.on('GET', '/metrics', async ({ ex }) => {
    ex.send(200, { 'Content-Type': metrics.registry.contentType }, await metrics.render());
  }, { name: 'metrics', capability: 'observability.read' });

  // GET /openapi.json, /docs (Swagger UI) and the document's reference names under /docs.
  mountModelDescription(router, ctx);

  mountModelNotFound(router);
}

/** A request no route took: 404 naming the closest route of the listener, if one is close. */
function mountModelNotFound(router: Router): void {
  router.fallback('/*', ({ ex, req }) => {
    const path = req.getUrl();
    ex.json(404, { error: 'NotFound', message: `No route for ${ex.method.toUpperCase()} ${path}${routeHint(router.routes, ex.method, path)}`, code: 404 });
  }, { name: 'not-found' });
}

function describe(loaded: LoadedModel): unknown {
  const m = loaded.model;
  const schema = (fields: LeapFrame['fields']) => ({ fields: fields.map((f) => ({ name: f.name, type: encodeFieldType(f.type) })) });
  return {
    model: { modelName: loaded.registration.modelName, uri: loaded.registration.uri },
    bundleMeta: { info: m.info, inputSchema: schema(m.inputSchema), outputSchema: schema(m.outputSchema) },
  };
}

function modelName(raw: string): string {
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    throw modelNameError(`model name "${raw}" is not valid percent-encoding`);
  }
  if (name === '' || name.length > MAX_MODEL_NAME || /[\u0000-\u001f/]/.test(name)) {
    throw modelNameError(`model name must be 1..${MAX_MODEL_NAME} characters without "/" or control characters`);
  }
  return name;
}

function booleanParam(q: URLSearchParams, name: string, fallback: boolean): boolean {
  const v = q.get(name);
  if (v === null) return fallback;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw queryError(`query parameter "${name}" must be true or false`);
}

function integerParam(q: URLSearchParams, name: string, fallback: number): number {
  const v = q.get(name);
  if (v === null) return fallback;
  if (!/^-?\d{1,9}$/.test(v)) throw queryError(`query parameter "${name}" must be an integer`);
  return Number(v);
}

function optionalCount(q: URLSearchParams, name: string): number | undefined {
  if (q.get(name) === null) return undefined;
  const n = integerParam(q, name, 0);
  if (n < 0) throw queryError(`query parameter "${name}" must not be negative`);
  return n;
}

function numberParam(q: URLSearchParams, name: string, fallback: number): number {
  const v = q.get(name);
  if (v === null) return fallback;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw queryError(`query parameter "${name}" must be a number`);
  return n;
}

function execParam(q: URLSearchParams, fallback: ExecutionMode): ExecutionMode {
  const v = q.get('exec');
  if (v === null) return fallback;
  const mode = parseExecutionMode(v);
  if (!mode) throw queryError("Must be one of ['par', 'seq', 'par-n'] (n >= 1)");
  return mode;
}

function missingParam(q: URLSearchParams): Missing {
  const v = q.get('missing') ?? 'impute';
  if (v !== 'impute' && v !== 'error') throw queryError('query parameter "missing" must be impute or error');
  return v;
}
