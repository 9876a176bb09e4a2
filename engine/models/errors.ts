// Errors of the model runtime. The HTTP layer answers { error, message, code } with status = code.

type ModelErrorCode = 400 | 403 | 404 | 408 | 413 | 500;

export class ModelError extends Error {
  constructor(
    readonly error: string,
    message: string,
    readonly code: ModelErrorCode,
  ) {
    super(message);
  }
}

/** A bundle that cannot be read or compiled (bad files, unsupported op, bad attribute). */
export const bundleError = (message: string): ModelError => new ModelError('BundleException', message, 400);

/** A request frame that cannot be decoded or does not fit the model. */
export const frameError = (message: string): ModelError => new ModelError('FrameException', message, 400);

/** A row value the model cannot transform (unseen label with handle_invalid=error, ...). */
export const transformError = (message: string): ModelError => new ModelError('TransformException', message, 400);

export const queryError = (message: string): ModelError => new ModelError('QueryException', message, 400);

/** Thrown by a stage whose `handle_invalid=skip` filters the row out: the row is left out of the answer. */
export class SkippedRow extends Error {}
