// Views of document content: what they are (view-spec), their materialization and cache (views).
export { OCR_TEXT_VIEW, type ViewOp, checkApplicable, viewMediaType, viewOfQuery } from './view-spec.js';
export { type ViewRecord, ViewService } from './views.js';
