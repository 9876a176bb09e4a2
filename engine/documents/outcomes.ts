// What the creating requests of the document platform return: the edge answers from them, and
// an Idempotency-Key's answer is made from them inside the creation's unit (engine/idempotency).
import type { ContentRef } from './model.js';
import type { DeprecatedSchema } from './schema-lifecycle.js';

/** POST /v1/documents's outcome. */
export interface Created {
  documentId: string;
  uploadId: string;
  created: boolean;
  deprecated: DeprecatedSchema[];
}
/** POST /v1/uploads/{id}/finalize's outcome. */
export interface Finalized {
  documentId: string;
  versionId: string;
  contentRef: ContentRef;
  created: boolean;
}
/** A request answered by a job (migrations). */
export interface JobAnswer {
  jobId: string;
  deprecated: DeprecatedSchema[];
}
