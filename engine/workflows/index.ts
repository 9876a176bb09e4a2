// Workflows on the job queue: OCR, entities, redaction.
export { WorkflowService } from './workflows.js';
