// The document platform's job kinds: their inputs, and where their tasks run (workers/docs-jobs.ts).

import type { Operation } from 'fast-json-patch';
import { fileURLToPath } from 'node:url';
import type { Receipt } from './model.js';

export const DOC_JOBS_MODULE = fileURLToPath(new URL('../../workers/docs-jobs.js', import.meta.url));

export interface Provenance {
  producer: { name: string; version: string };
  producedAt: string;
  input: { kind: 'blob' | 'view'; key: string };
  confidence?: number;
}

export interface DerivedInput {
  documentId: string;
  actor: string;
  entries: Record<string, { schema: string; data: Record<string, unknown> }>;
  /** The schemas' JSON Schemas as they were when the write was accepted. */
  schemas: Record<string, Record<string, unknown>>;
  provenance: Provenance;
  /** The write's request (absent on jobs enqueued before envelope v1.1). */
  receipt?: Receipt;
}

export interface MigrateInput {
  documentId: string;
  namespaceUrn: string;
  /** The entry migrated: if another write replaced it meanwhile, the job fails. */
  baseMetadataId: string;
  data: Record<string, unknown>;
  fromSchemaUrn: string;
  toSchemaUrn: string;
  ops: Operation[];
  targetSchema: Record<string, unknown>;
  actor: string;
  reason: string;
  receipt?: Receipt;
}
