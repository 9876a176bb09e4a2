// JSON Schema 2020-12 validation with ajv, shared by the schema registry (main thread) and the
// document jobs (worker threads). No LMDB here.
//
// Metadata is validated on the main thread, inside the write's transaction, so no schema may hold
// it for long. Patterns run on RE2 (linear-regexp.ts); `uniqueItems` compares canonical JSON texts
// in a set rather than every pair of items (ajv's loop is quadratic); the one format whose regular
// expression is quadratic (`url`) is bounded in length. What is left is the product of the
// schema's size and the data's (an `allOf` of 3000 `$ref`s over 100,000 strings is minutes), so
// compiling and validating also run under a deadline: V8 stops the call when it is past.

import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import addFormatsModule from 'ajv-formats';
import vm from 'node:vm';
import { LRUCache } from 'lru-cache';
import { compileLinear, PatternError, type LinearRegExp } from './linear-regexp.js';
import { canonicalJson, isPlainObject } from './model.js';
import { safeUntimed, schemaFanout } from './validation-cost.js';
import { type ValidationDeadlines, validationDeadlines } from '../base/config.js';

export interface ValidationIssue {
  path: string;
  code: string;
  message: string;
}

/** A schema refused for one of its patterns: `pointer` is where the pattern is in the schema. */
export class SchemaPatternError extends Error {
  readonly kind: PatternError['kind'];

  constructor(
    readonly pointer: string,
    error: PatternError,
  ) {
    super(`the pattern at ${pointer || 'an unknown place'}, ${error.message}`);
    this.name = 'SchemaPatternError';
    this.kind = error.kind;
  }
}

/** The longest string `format: "url"` accepts (RFC 9110 recommends supporting 8000 octets): its regex is quadratic. */
export const URL_FORMAT_MAX_LENGTH = 8000;

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Compiled patterns by source: a schema's patterns are compiled when it is checked and again by ajv. */
const patterns = new LRUCache<string, LinearRegExp>({ max: 1000 });

function linearPattern(pattern: string): LinearRegExp {
  let compiled = patterns.get(pattern);
  if (!compiled) {
    compiled = compileLinear(pattern);
    patterns.set(pattern, compiled);
  }
  return compiled;
}

// ajv's code.regExp: `code` is only read by ajv's standalone code generation, which is not used.
const linearRegExpEngine: RegExpEngine = Object.assign((pattern: string) => linearPattern(pattern), {
  code: 'linearPattern',
});

let shared: Ajv2020 | undefined;

function ajv(): Ajv2020 {
  if (!shared) {
    shared = new Ajv2020({ allErrors: true, strict: false, validateFormats: true, code: { regExp: linearRegExpEngine } });
    addFormats(shared);
    const url = shared.formats.url as RegExp;
    shared.addFormat('url', { type: 'string', validate: (s: string) => s.length <= URL_FORMAT_MAX_LENGTH && url.test(s) });
    shared.removeKeyword('uniqueItems');
    shared.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', errors: true, validate: uniqueItems });
  }
  return shared;
}

/**
 * `uniqueItems` in time linear in the array's size: items are equal when their canonical JSON is
 * (JSON Schema's equality: key order does not count, 1 and 1.0 are one number). The error is ajv's.
 */
function uniqueItems(this: unknown, unique: boolean, data: unknown[]): boolean {
  if (!unique) return true;
  const seen = new Map<string, number>();
  for (let i = 0; i < data.length; i++) {
    const key = canonicalJson(data[i]);
    const j = seen.get(key);
    if (j !== undefined) {
      uniqueItems.errors = [{ keyword: 'uniqueItems', message: `must NOT have duplicate items (items ## ${j} and ${i} are identical)`, params: { i, j } }];
      return false;
    }
    seen.set(key, i);
  }
  return true;
}
uniqueItems.errors = [] as Partial<ErrorObject>[];

/**
 * How long compiling a schema at registration (ajv takes about 1 s for a 60 KiB schema of 1,600
 * properties) and validating one entry's data may take: SVC_SCHEMA_COMPILE_TIMEOUT and
 * SVC_METADATA_VALIDATION_TIMEOUT, read where they are first needed (the main thread and each
 * job worker alike).
 */
let deadlines: ValidationDeadlines | undefined;
const configured = (): ValidationDeadlines => (deadlines ??= validationDeadlines());

/** A schema refused because compiling it took longer than SVC_SCHEMA_COMPILE_TIMEOUT. */
export class SchemaTooCostly extends Error {
  constructor(ms: number) {
    super(`compiling it took longer than ${ms} ms`);
    this.name = 'SchemaTooCostly';
  }
}

const deadlineContext = vm.createContext({});
const deadlineScript = new vm.Script('run()');
const TIMED_OUT = Symbol('timed out');

/**
 * `run()`, stopped once it has run `ms` milliseconds: V8 terminates it as it does a vm script past
 * its timeout. Nothing in `run` (not even `finally`) runs after that, so the caller must drop what
 * `run` may have left half made.
 */
function withDeadline<T>(ms: number, run: () => T): T | typeof TIMED_OUT {
  deadlineContext.run = run;
  try {
    return deadlineScript.runInContext(deadlineContext, { timeout: ms }) as T;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return TIMED_OUT;
    throw err;
  } finally {
    deadlineContext.run = undefined;
  }
}

/** After a call was stopped: the ajv instance and the compiled patterns may hold half-made state. */
function dropSharedState(): void {
  shared = undefined;
  patterns.clear();
}

/**
 * Compiles a schema (its `$id` ignored: schemas are keyed by URN here). Throws SchemaPatternError
 * for a pattern that is not ECMAScript or cannot run in linear time, SchemaTooCostly (only with
 * `compileDeadline`: a registration), and ajv's error for any other schema that does not compile.
 * The validator answers within SVC_METADATA_VALIDATION_TIMEOUT, with a `timeout` issue when it had
 * to stop.
 */
export function compileSchema(jsonSchema: Record<string, unknown>, compileDeadline = true): (data: unknown) => ValidationIssue[] {
  const compile = (): ValidateFunction => {
    for (const { pointer, pattern } of schemaPatterns(jsonSchema, '')) {
      try {
        linearPattern(pattern);
      } catch (err) {
        if (err instanceof PatternError) throw new SchemaPatternError(pointer, err);
        throw err;
      }
    }
    try {
      return ajv().compile({ ...jsonSchema, $id: undefined });
    } catch (err) {
      // A pattern in a place schemaPatterns does not look: refused all the same, without its place.
      if (err instanceof PatternError) throw new SchemaPatternError('', err);
      throw err;
    }
  };
  const boundedCompile = (): ValidateFunction => {
    const { compileMs } = configured();
    const compiled = withDeadline(compileMs, compile);
    if (compiled !== TIMED_OUT) return compiled;
    dropSharedState();
    throw new SchemaTooCostly(compileMs);
  };
  // A registered schema passed the deadline once: compiling it again (after a restart, in a job
  // worker, on a busy machine) must not fail by chance, so only a registration is timed.
  const recompile = compileDeadline ? boundedCompile : compile;
  let validate: ValidateFunction | undefined = recompile();
  const fanout = schemaFanout(jsonSchema);
  return (data) => {
    // A validator stopped once is compiled anew: its patterns' matchers may have been stopped mid-update.
    validate ??= compile();
    const current = validate;
    const { validateMs } = configured();
    // The deadline only where the cost's bound could come near it (./validation-cost.ts): a timed call costs a watchdog thread.
    const valid = safeUntimed(fanout, data, validateMs) ? current(data) : withDeadline(validateMs, () => current(data));
    if (valid === TIMED_OUT) {
      validate = undefined;
      dropSharedState();
      return [{ path: '/', code: 'timeout', message: `validation took longer than ${validateMs} ms: the schema is too costly for data this large` }];
    }
    return valid ? [] : (current.errors ?? []).map(issue);
  };
}

/**
 * compileSchema for a schema already registered (no compile deadline). One that no longer compiles
 * (registered before its patterns were refused) rejects all data, saying why, rather than failing
 * the write.
 */
export function compileRegisteredSchema(jsonSchema: Record<string, unknown>): (data: unknown) => ValidationIssue[] {
  try {
    return compileSchema(jsonSchema, false);
  } catch (err) {
    const unusable: ValidationIssue = { path: '/', code: 'schema_unsupported', message: `the schema cannot be used: ${(err as Error).message}` };
    return () => [unusable];
  }
}

const escapePointer = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');
/** Keywords whose value is a subschema, an array of them, or an object of them (JSON Schema 2020-12 and ajv's older ones). */
const SUBSCHEMA = ['additionalProperties', 'propertyNames', 'items', 'additionalItems', 'contains', 'not', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties'];
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

/** The patterns of a schema (`pattern` values and `patternProperties` keys), each with its JSON pointer. */
function* schemaPatterns(schema: unknown, pointer: string): Generator<{ pointer: string; pattern: string }> {
  if (!isPlainObject(schema)) return;
  if (typeof schema.pattern === 'string') yield { pointer: `${pointer}/pattern`, pattern: schema.pattern };
  if (isPlainObject(schema.patternProperties)) {
    for (const key of Object.keys(schema.patternProperties)) yield { pointer: `${pointer}/patternProperties/${escapePointer(key)}`, pattern: key };
  }
  for (const keyword of SUBSCHEMA) {
    const value = schema[keyword];
    if (Array.isArray(value)) for (const [i, s] of value.entries()) yield* schemaPatterns(s, `${pointer}/${keyword}/${i}`);
    else yield* schemaPatterns(value, `${pointer}/${keyword}`);
  }
  for (const keyword of SUBSCHEMA_LISTS) {
    const value = schema[keyword];
    if (Array.isArray(value)) for (const [i, s] of value.entries()) yield* schemaPatterns(s, `${pointer}/${keyword}/${i}`);
  }
  for (const keyword of SUBSCHEMA_MAPS) {
    const value = schema[keyword];
    if (isPlainObject(value)) for (const [key, s] of Object.entries(value)) yield* schemaPatterns(s, `${pointer}/${keyword}/${escapePointer(key)}`);
  }
}

function issue(e: ErrorObject): ValidationIssue {
  const path = e.keyword === 'required' ? `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}` : e.instancePath;
  return { path: path || '/', code: e.keyword, message: e.message ?? 'is invalid' };
}
