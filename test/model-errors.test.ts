// The model runtime's failures are SvcErrors of the one catalogue: a kind and a code, no HTTP
// status in the engine. Their statuses are server/failure-status.ts's, and must stay the ones
// MLeap answers (the bodies themselves are checked over HTTP in model-api, model-security and
// model-repositories).
import { describe, expect, it } from 'vitest';
import { SvcError, blobNotFound } from '../engine/base/errors.js';
import {
  MODEL_ERROR_CODES,
  bodyTooLarge,
  bundleError,
  forbiddenLocation,
  frameError,
  isModelError,
  modelNameError,
  modelNotFound,
  modelTimeout,
  queryError,
  transformError,
  uriError,
} from '../engine/models/errors.js';
import { statusOf } from '../server/failure-status.js';

describe('model runtime failures', () => {
  const cases: [SvcError, string, number][] = [
    [bundleError('b'), 'model_bundle_invalid', 400],
    [frameError('f'), 'model_frame_invalid', 400],
    [transformError('t'), 'model_transform_failed', 400],
    [queryError('q'), 'model_query_invalid', 400],
    [uriError('s3://x', 'no such object'), 'model_uri_invalid', 400],
    [modelNameError('n'), 'model_name_invalid', 400],
    [forbiddenLocation('l'), 'model_location_forbidden', 403],
    [modelNotFound('m', ['a']), 'model_not_found', 404],
    [modelNotFound('m', []), 'no_models_loaded', 404],
    [modelTimeout('slow'), 'model_timeout', 408],
    [bodyTooLarge('big'), 'model_body_too_large', 413],
  ];

  it.each(cases)('%o has its code and MLeap\'s status', (err, code, status) => {
    expect(err).toBeInstanceOf(SvcError);
    expect(err.code).toBe(code);
    expect(statusOf(err)).toBe(status);
    expect(isModelError(err)).toBe(true);
  });

  it('every code is built by one of the constructors', () => {
    expect(new Set(cases.map(([, code]) => code))).toEqual(new Set(MODEL_ERROR_CODES));
  });

  it('another area\'s SvcError is not a model failure (the model listener answers it 500)', () => {
    expect(isModelError(blobNotFound('x'))).toBe(false);
    expect(isModelError(new Error('model_timeout'))).toBe(false);
  });

  it('keeps MLeap\'s messages', () => {
    expect(uriError('s3://b/k', 'no such object').message).toBe("URI error for 's3://b/k': no such object");
    expect(modelNotFound('m', ['a', 'b']).message).toBe('m not found in [a,b]');
    expect(modelNotFound('m', []).message).toBe('No models loaded');
  });
});
