// The messages between the model service and its worker task module (workers/model.ts): the
// engine owns them, the worker imports them.
import type { FailureKind } from '../base/errors.js';
import type { ModelErrorCode } from './errors.js';
import type { FrameLimits, FramePart } from './frame.js';
import type { FrameSplit } from './frame-split.js';

export interface ModelTask {
  /** Identifies one load of one model; a reload gets a new key. */
  key: string;
  /** JSON file holding the model's BundleDoc. */
  docPath: string;
}

export interface FrameTask<Q> extends ModelTask {
  /** The request body (a frame as JSON), shared by every part's task. */
  body: SharedArrayBuffer;
  length: number;
  limits: FrameLimits;
  part: FramePart;
  /** This part's byte ranges of a Leap frame split once (frame-split.ts); absent: parse the whole body. */
  split?: FrameSplit;
  query: Q;
}

/** A task's value, or the model's error as data (errors lose their fields when cloned). */
export type TaskResult<T> = { ok: true; value: T } | { ok: false; kind: FailureKind; code: ModelErrorCode; message: string; syntax?: true };

/** The split task: a frame body scanned once into its parts' shares, or undefined when it is not split. */
export interface SplitTask {
  body: SharedArrayBuffer;
  length: number;
  count: number;
}
