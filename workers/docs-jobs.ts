// Job tasks of the document platform (engine/jobs runs them on the pool): pure computations on
// what the job's input carries; their results are applied by engine/documents on the main thread.

import { JobError } from '../engine/jobs/errors.js';
import type { JobTaskPayload } from '../engine/jobs/task-runner.js';
import { transform } from '../engine/documents/migrations.js';
import { compileRegisteredSchema, type ValidationIssue } from '../engine/documents/validator.js';
import type { DerivedInput, MigrateInput } from '../engine/documents/doc-jobs.js';

/** Validates each derived entry against its schema: the issues per namespace (none: valid). */
export function validateDerived({ input }: JobTaskPayload<DerivedInput>): Record<string, ValidationIssue[]> {
  const out: Record<string, ValidationIssue[]> = {};
  for (const [ns, entry] of Object.entries(input.entries)) {
    const schema = input.schemas[entry.schema];
    out[ns] = schema ? compileRegisteredSchema(schema)(entry.data) : [{ path: '/', code: 'schema_not_found', message: `No schema ${entry.schema} is registered` }];
  }
  return out;
}

/** The entry's data migrated forward and validated against the target schema. */
export function migrate({ input }: JobTaskPayload<MigrateInput>): { data: Record<string, unknown> } {
  let data: unknown;
  try {
    data = transform(input.data, input.ops);
  } catch (err) {
    throw new JobError('migration_failed', `The forward transform does not apply to the current data: ${(err as Error).name}`, false);
  }
  const issues = compileRegisteredSchema(input.targetSchema)(data);
  if (issues.length) throw new JobError('VALIDATION_FAILED', `The migrated data does not validate against ${input.toSchemaUrn}: ${issues[0]!.path} ${issues[0]!.message}`, false);
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new JobError('VALIDATION_FAILED', 'The migrated data is not a JSON object', false);
  return { data: data as Record<string, unknown> };
}
