// The model runtime's failures: SvcErrors of the one catalogue (engine/base/errors.ts), each a kind and
// a code of the runtime's own. The model listener answers them in MLeap's body under MLeap's
// names (`{ error: "BundleException", message, code: 400 }`, server/model-api.ts), its status from
// the kind as for every failure (server/failure-status.ts).

import { type FailureKind, SvcError } from '../base/errors.js';

/** The codes of the model runtime's failures (the listener names each as MLeap does). */
export const MODEL_ERROR_CODES = [
  'model_bundle_invalid',
  'model_frame_invalid',
  'model_transform_failed',
  'model_query_invalid',
  'model_uri_invalid',
  'model_name_invalid',
  'model_body_too_large',
  'model_location_forbidden',
  'model_not_found',
  'no_models_loaded',
  'model_timeout',
] as const;

export type ModelErrorCode = (typeof MODEL_ERROR_CODES)[number];

/** A failure of the model runtime: an SvcError with one of its codes. */
export type ModelFailure = SvcError & { readonly code: ModelErrorCode };

const CODES: ReadonlySet<string> = new Set(MODEL_ERROR_CODES);

/** Whether `err` is a failure of the model runtime (not another area's SvcError, nor an internal error). */
export const isModelError = (err: unknown): err is ModelFailure => err instanceof SvcError && CODES.has(err.code);

/** A model failure of `kind` and `code`; also one that crossed from a worker thread as data (protocol.ts TaskResult). */
export const modelError = (kind: FailureKind, code: ModelErrorCode, message: string): ModelFailure => new SvcError(kind, code, message) as ModelFailure;

/** A bundle that cannot be read or compiled (bad files, unsupported op, bad attribute). */
export const bundleError = (message: string) => modelError('invalid', 'model_bundle_invalid', message);

/** A request frame that cannot be decoded or does not fit the model. */
export const frameError = (message: string) => modelError('invalid', 'model_frame_invalid', message);

/** A row value the model cannot transform (unseen label with handle_invalid=error, ...). */
export const transformError = (message: string) => modelError('invalid', 'model_transform_failed', message);

/** A query parameter the operation cannot take (bad value, unknown select field). */
export const queryError = (message: string) => modelError('invalid', 'model_query_invalid', message);

/** A bundle URI this runtime does not read (or a store that would not give its object). */
export const uriError = (uri: string, reason: string) => modelError('invalid', 'model_uri_invalid', `URI error for '${uri}': ${reason}`);

/** A model name in a path that is not one (bad percent-encoding, empty, too long, "/" or control characters). */
export const modelNameError = (message: string) => modelError('invalid', 'model_name_invalid', message);

/** A request body past its limit (a frame past MODEL_MAX_FRAME_BYTES, a bundle URI past its bound). */
export const bodyTooLarge = (message: string) => modelError('too_large', 'model_body_too_large', message);

/** A bundle outside the places bundles may be read from (SVC_MODEL_ROOTS). */
export const forbiddenLocation = (message: string) => modelError('forbidden', 'model_location_forbidden', message);

/** No model is registered under `name` (`names`: those that are). */
export function modelNotFound(name: string, names: readonly string[]): ModelFailure {
  if (names.length === 0) return modelError('not_found', 'no_models_loaded', 'No models loaded');
  return modelError('not_found', 'model_not_found', `${name} not found in [${names.join(',')}]`);
}

/** A load, warm-up or request past its limit (MODEL_LOAD_TIMEOUT, MODEL_REQUEST_TIMEOUT). */
export const modelTimeout = (message: string) => modelError('timed_out', 'model_timeout', message);

/** Thrown by a stage whose `handle_invalid=skip` filters the row out: the row is left out of the answer. */
export class SkippedRow extends Error {}
