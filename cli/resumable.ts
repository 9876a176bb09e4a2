// A resumable upload (`/api/v1/uploads`): one session, parts sent in order, each retried until
// the server acknowledges it. After any failure the session's offset is read back from the
// server and the transfer continues from there; a part that may have been applied is sent
// again under the same Upload-Part-Id, so the server either applies it once or answers with
// the offset it already reached.

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { formatBlobId } from './blob-id.js';
import { ApiError, CliError, describe } from './errors.js';
import { FileHasher, rangeStream } from './file-range.js';
import { SLOW_TIMEOUT_MS, apiError, drain, headerValue, readJson, request } from './http.js';
import type { Progress } from './progress.js';
import { type PartRef, type PutState, loadState, removeState, saveState } from './put-state.js';
import { Backoff, retryNote } from './retry.js';

/** The server's default part count limit (SVC_UPLOAD_MAX_PARTS); parts grow to stay under it. */
const MAX_PARTS = 8192;
/** A session that disappears again and again is not chased forever. */
const MAX_RESTARTS = 3;

export interface ResumableOptions {
  server: string;
  file: string;
  size: number;
  mtimeMs: number;
  contentType?: string;
  partSize: number;
  statePath: string;
  progress: Progress;
}

interface SessionStatus {
  id: string;
  state: 'Open' | 'Committing' | 'Committed' | 'Cancelled' | 'Expired' | string;
  offset: number;
  declaredLength?: number;
  committedBlob?: string;
}

export async function resumablePut(o: ResumableOptions): Promise<string> {
  const { server, file, size, progress } = o;
  const backoff = new Backoff((err, delay, attempt) => progress.note(retryNote(`svc put ${file}`)(err, delay, attempt)));
  const hasher = new FileHasher(file);
  const partSize = Math.max(o.partSize, Math.ceil(size / MAX_PARTS / 1048576) * 1048576);
  if (partSize !== o.partSize) progress.note(`svc put: part size raised to ${partSize} bytes to stay within ${MAX_PARTS} parts`);

  const previous = loadState(o.statePath);
  let state: PutState;
  let known: boolean;
  let resumed = false;
  if (previous && previous.file === file && previous.size === size && previous.mtimeMs === o.mtimeMs && previous.server === server && previous.contentType === o.contentType) {
    state = previous;
    known = true;
    resumed = true;
    progress.note(`svc put: resuming upload session ${state.sessionId}`);
  } else {
    state = newState();
    known = false;
  }
  let restarts = 0;
  let stalls = 0;

  function newState(): PutState {
    const fresh: PutState = { version: 1, file, size, mtimeMs: o.mtimeMs, server, contentType: o.contentType, sessionId: randomUUID() };
    saveState(o.statePath, fresh);
    progress.note(`svc put: upload session ${fresh.sessionId}, ${Math.ceil(size / partSize)} parts of up to ${partSize} bytes (state in ${o.statePath})`);
    return fresh;
  }
  const sessionPath = () => `/api/v1/uploads/${state.sessionId}`;

  /** The session as the server has it; undefined when it is gone (unknown or expired). */
  const readSession = (): Promise<SessionStatus | undefined> =>
    backoff.retry(async () => {
      const reply = await request(server, sessionPath());
      if (reply.status === 200) return readJson<SessionStatus>(reply);
      const err = await apiError(reply);
      if (err.status === 404 || err.status === 410) return undefined;
      throw err;
    });

  /** Creates the session; undefined when it exists already (a create whose answer was lost). */
  const createSession = (): Promise<SessionStatus | undefined> =>
    backoff.retry(async () => {
      const reply = await request(server, '/api/v1/uploads', {
        method: 'POST',
        headers: { 'X-Svc-Upload-Session-Id': state.sessionId, 'Upload-Length': size, 'Content-Type': o.contentType },
      });
      if (reply.status === 201) return readJson<SessionStatus>(reply);
      const err = await apiError(reply);
      if (err.status === 409 && err.code === 'upload_exists') return undefined;
      throw err;
    });

  const sendPart = async (part: PartRef): Promise<number> => {
    await hasher.catchUp(part.offset);
    const body = rangeStream(file, part.offset, part.length, (position, chunk) => {
      hasher.see(position, chunk);
      progress.update(position + chunk.length);
    });
    const reply = await request(server, sessionPath(), {
      method: 'PATCH',
      headers: { 'Upload-Offset': part.offset, 'Upload-Part-Id': part.id, 'Content-Length': part.length },
      body,
      timeoutMs: SLOW_TIMEOUT_MS,
    });
    if (reply.status !== 204) throw await apiError(reply);
    drain(reply);
    return offsetOf(reply.headers);
  };

  const commit = async (): Promise<SessionStatus> => {
    const reply = await request(server, `${sessionPath()}/commit`, { method: 'POST', timeoutMs: SLOW_TIMEOUT_MS });
    if (reply.status !== 200) throw await apiError(reply);
    return readJson<SessionStatus>(reply);
  };

  const startOver = (why: string) => {
    if (++restarts > MAX_RESTARTS) throw new CliError(`upload session ${state.sessionId} ${why}, for the ${restarts}th time; giving up`);
    progress.note(`svc put: upload session ${state.sessionId} ${why}; starting a new session`);
    state = newState();
    known = false;
    progress.restart(0);
  };

  /** Session gone or closed under us: the next round reads it again (and starts over if need be). */
  const sessionProblem = (err: unknown) => err instanceof ApiError && (err.status === 404 || err.status === 410 || (err.status === 409 && err.code === 'upload_state'));

  for (;;) {
    const status = known ? await readSession() : await createSession() ?? (await readSession());
    known = true;
    if (!status) {
      startOver('is gone (expired or removed)');
      continue;
    }
    if (status.state === 'Committed' && status.committedBlob) return finish(status.committedBlob);
    if (status.state === 'Cancelled' || status.state === 'Expired') {
      startOver(`is ${status.state.toLowerCase()}`);
      continue;
    }
    if (status.declaredLength !== undefined && status.declaredLength !== size) {
      startOver(`was declared with ${status.declaredLength} bytes, the file has ${size}`);
      continue;
    }
    let offset = status.offset;
    if (resumed) {
      const again = state.part && state.part.offset === offset ? ` (sending part ${state.part.id} again, same part id)` : '';
      progress.note(`svc put: session ${state.sessionId} is at byte ${offset} of ${size}${again}`);
    }
    resumed = false;
    progress.restart(offset);

    let lost = false;
    while (offset < size && !lost) {
      const part = choosePart(state.part, offset, size, partSize);
      if (part !== state.part) {
        state.part = part;
        saveState(o.statePath, state);
      }
      try {
        offset = await sendPart(part);
        if (offset <= part.offset) {
          // Acknowledged without progress: the part id was known from elsewhere. Use a new one.
          state.part = undefined;
          if (++stalls > 3) throw new CliError(`the server acknowledges part ${part.id} at byte ${part.offset} without taking it`);
        } else {
          backoff.reset();
        }
      } catch (err) {
        if (err instanceof ApiError && err.code === 'upload_offset_mismatch' && headerValue(err.headers, 'upload-offset') !== undefined) {
          offset = offsetOf(err.headers);
          continue;
        }
        if (sessionProblem(err)) {
          lost = true;
          continue;
        }
        await backoff.wait(err);
        const now = await readSession();
        if (!now || now.state !== 'Open') lost = true;
        else {
          offset = now.offset;
          const applied = offset === part.offset + part.length ? ' (the part was applied)' : offset === part.offset ? ' (sending the part again, same part id)' : '';
          progress.note(`svc put: session ${state.sessionId} is at byte ${offset} of ${size}${applied}`);
          progress.restart(offset);
        }
      }
      progress.update(offset);
    }
    if (lost) continue;
    if (offset > size) throw new CliError(`the server holds ${offset} bytes for this session but ${file} has ${size}`);

    try {
      const done = await commit();
      if (done.committedBlob) return finish(done.committedBlob);
    } catch (err) {
      if (!sessionProblem(err)) await backoff.wait(err);
    }
  }

  async function finish(blob: string): Promise<string> {
    await hasher.catchUp(size);
    const now = fs.statSync(file);
    if (now.size !== size || now.mtimeMs !== o.mtimeMs) throw new CliError(`${file} changed during the upload; the server stored ${blob}`);
    const local = formatBlobId(hasher.hex(), size);
    if (blob !== local) throw new CliError(`the server committed ${blob} but ${file} hashes to ${local}`);
    removeState(o.statePath);
    return blob;
  }
}

/** The part at `offset`: the one last in flight (same id) if it starts there, else a new one. */
function choosePart(last: PartRef | undefined, offset: number, size: number, partSize: number): PartRef {
  if (last && last.offset === offset && last.length >= 1 && offset + last.length <= size) return last;
  return { id: randomUUID(), offset, length: Math.min(partSize, size - offset) };
}

function offsetOf(headers: Record<string, string | string[] | undefined>): number {
  const raw = headers['upload-offset'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !/^[0-9]+$/.test(value)) throw new Error(`the server's answer has no valid Upload-Offset (${describe(value)})`);
  return Number(value);
}
