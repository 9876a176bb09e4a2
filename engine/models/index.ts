// The model runtime: the service (registrations, loading, frames run in parts) and what the
// HTTP surface needs to parse queries and write answers. workers/model.ts imports its task
// files directly.
export { bodyTooLarge, isModelError, type ModelErrorCode, modelNameError, queryError } from './errors.js';
export { decodeFrame } from './frame.js';
export { encodeFieldType, encodeRow, encodeSchema } from './frame-json.js';
export { renderGraphSvg } from './graph-svg.js';
export { BundleRoots } from './roots.js';
export { sampleFrame } from './sample.js';
export { type FrameBody, type LoadedModel, ModelService, timeoutOr } from './service.js';
export { finishRank, type Missing, parseSelection, selectColumns, transformBody } from './transform.js';
export type { LeapFrame } from './types.js';
