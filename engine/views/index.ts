// Views of document content: what they are (view-spec), their materialization and cache (views).
export { type ViewOp, checkApplicable, viewOfQuery } from './view-spec.js';
export { ViewService } from './views.js';
