// JSON Schema 2020-12 validation with ajv, shared by the schema registry (main thread) and the
// document jobs (worker threads). No LMDB here.

import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

export interface ValidationIssue {
  path: string;
  code: string;
  message: string;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
let shared: Ajv2020 | undefined;

function ajv(): Ajv2020 {
  if (!shared) {
    shared = new Ajv2020({ allErrors: true, strict: false, validateFormats: true });
    addFormats(shared);
  }
  return shared;
}

/** Compiles a schema (its `$id` ignored: schemas are keyed by URN here); throws when it does not compile. */
export function compileSchema(jsonSchema: Record<string, unknown>): (data: unknown) => ValidationIssue[] {
  const validate: ValidateFunction = ajv().compile({ ...jsonSchema, $id: undefined });
  return (data) => (validate(data) ? [] : (validate.errors ?? []).map(issue));
}

function issue(e: ErrorObject): ValidationIssue {
  const path = e.keyword === 'required' ? `${e.instancePath}/${(e.params as { missingProperty: string }).missingProperty}` : e.instancePath;
  return { path: path || '/', code: e.keyword, message: e.message ?? 'is invalid' };
}
