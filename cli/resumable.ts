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

export function resumablePut(o: ResumableOptions): Promise<string> {
  return new ResumableUpload(o).run();
}

class ResumableUpload {
  private readonly backoff: Backoff;
  private readonly hasher: FileHasher;
  private readonly partSize: number;
  private state: PutState;
  /** Whether the session is known to exist on the server (else the next round creates it). */
  private known: boolean;
  private resumed = false;
  private restarts = 0;
  private stalls = 0;

  constructor(private readonly o: ResumableOptions) {
    const { file, size, progress } = o;
    this.backoff = new Backoff((err, delay, attempt) => progress.note(retryNote(`svc put ${file}`)(err, delay, attempt)));
    this.hasher = new FileHasher(file);
    this.partSize = Math.max(o.partSize, Math.ceil(size / MAX_PARTS / 1048576) * 1048576);
    if (this.partSize !== o.partSize) progress.note(`svc put: part size raised to ${this.partSize} bytes to stay within ${MAX_PARTS} parts`);
    const previous = loadState(o.statePath);
    if (previous && previous.file === file && previous.size === size && previous.mtimeMs === o.mtimeMs && previous.server === o.server && previous.contentType === o.contentType) {
      this.state = previous;
      this.known = true;
      this.resumed = true;
      progress.note(`svc put: resuming upload session ${previous.sessionId}`);
    } else {
      this.state = this.newState();
      this.known = false;
    }
  }

  /** Rounds of: find the session, send what it lacks, commit; until a blob is committed. */
  async run(): Promise<string> {
    const { size, progress } = this.o;
    for (;;) {
      const status = this.known ? await this.readSession() : (await this.createSession()) ?? (await this.readSession());
      this.known = true;
      if (!status) {
        this.startOver('is gone (expired or removed)');
        continue;
      }
      if (status.state === 'Committed' && status.committedBlob) return this.finish(status.committedBlob);
      if (status.state === 'Cancelled' || status.state === 'Expired') {
        this.startOver(`is ${status.state.toLowerCase()}`);
        continue;
      }
      if (status.declaredLength !== undefined && status.declaredLength !== size) {
        this.startOver(`was declared with ${status.declaredLength} bytes, the file has ${size}`);
        continue;
      }
      if (this.resumed) {
        const part = this.state.part;
        const again = part && part.offset === status.offset ? ` (sending part ${part.id} again, same part id)` : '';
        progress.note(`svc put: session ${this.state.sessionId} is at byte ${status.offset} of ${size}${again}`);
      }
      this.resumed = false;
      progress.restart(status.offset);
      const offset = await this.sendParts(status.offset);
      if (offset === undefined) continue;
      if (offset > size) throw new CliError(`the server holds ${offset} bytes for this session but ${this.o.file} has ${size}`);
      try {
        const done = await this.commit();
        if (done.committedBlob) return this.finish(done.committedBlob);
      } catch (err) {
        if (!sessionProblem(err)) await this.backoff.wait(err);
      }
    }
  }

  /** Sends parts from `offset` to the end; the offset reached, or undefined when the session was lost. */
  private async sendParts(offset: number): Promise<number | undefined> {
    const { size, progress } = this.o;
    while (offset < size) {
      const part = choosePart(this.state.part, offset, size, this.partSize);
      if (part !== this.state.part) {
        this.state.part = part;
        saveState(this.o.statePath, this.state);
      }
      try {
        offset = await this.sendPart(part);
        if (offset <= part.offset) {
          // Acknowledged without progress: the part id was known from elsewhere. Use a new one.
          this.state.part = undefined;
          if (++this.stalls > 3) throw new CliError(`the server acknowledges part ${part.id} at byte ${part.offset} without taking it`);
        } else {
          this.backoff.reset();
        }
      } catch (err) {
        if (err instanceof ApiError && err.code === 'upload_offset_mismatch' && headerValue(err.headers, 'upload-offset') !== undefined) {
          offset = offsetOf(err.headers);
          continue;
        }
        if (sessionProblem(err)) return undefined;
        await this.backoff.wait(err);
        const now = await this.readSession();
        if (!now || now.state !== 'Open') return undefined;
        offset = now.offset;
        const applied = offset === part.offset + part.length ? ' (the part was applied)' : offset === part.offset ? ' (sending the part again, same part id)' : '';
        progress.note(`svc put: session ${this.state.sessionId} is at byte ${offset} of ${size}${applied}`);
        progress.restart(offset);
      }
      progress.update(offset);
    }
    return offset;
  }

  private newState(): PutState {
    const { file, size, statePath, progress } = this.o;
    const fresh: PutState = { version: 1, file, size, mtimeMs: this.o.mtimeMs, server: this.o.server, contentType: this.o.contentType, sessionId: randomUUID() };
    saveState(statePath, fresh);
    progress.note(`svc put: upload session ${fresh.sessionId}, ${Math.ceil(size / this.partSize)} parts of up to ${this.partSize} bytes (state in ${statePath})`);
    return fresh;
  }

  private sessionPath(): string {
    return `/api/v1/uploads/${this.state.sessionId}`;
  }

  /** The session as the server has it; undefined when it is gone (unknown or expired). */
  private readSession(): Promise<SessionStatus | undefined> {
    return this.backoff.retry(async () => {
      const reply = await request(this.o.server, this.sessionPath());
      if (reply.status === 200) return readJson<SessionStatus>(reply);
      const err = await apiError(reply);
      if (err.status === 404 || err.status === 410) return undefined;
      throw err;
    });
  }

  /** Creates the session; undefined when it exists already (a create whose answer was lost). */
  private createSession(): Promise<SessionStatus | undefined> {
    return this.backoff.retry(async () => {
      const reply = await request(this.o.server, '/api/v1/uploads', {
        method: 'POST',
        headers: { 'X-Svc-Upload-Session-Id': this.state.sessionId, 'Upload-Length': this.o.size, 'Content-Type': this.o.contentType },
      });
      if (reply.status === 201) return readJson<SessionStatus>(reply);
      const err = await apiError(reply);
      if (err.status === 409 && err.code === 'upload_exists') return undefined;
      throw err;
    });
  }

  private async sendPart(part: PartRef): Promise<number> {
    await this.hasher.catchUp(part.offset);
    const body = rangeStream(this.o.file, part.offset, part.length, (position, chunk) => {
      this.hasher.see(position, chunk);
      this.o.progress.update(position + chunk.length);
    });
    const reply = await request(this.o.server, this.sessionPath(), {
      method: 'PATCH',
      headers: { 'Upload-Offset': part.offset, 'Upload-Part-Id': part.id, 'Content-Length': part.length },
      body,
      timeoutMs: SLOW_TIMEOUT_MS,
    });
    if (reply.status !== 204) throw await apiError(reply);
    drain(reply);
    return offsetOf(reply.headers);
  }

  private async commit(): Promise<SessionStatus> {
    const reply = await request(this.o.server, `${this.sessionPath()}/commit`, { method: 'POST', timeoutMs: SLOW_TIMEOUT_MS });
    if (reply.status !== 200) throw await apiError(reply);
    return readJson<SessionStatus>(reply);
  }

  private startOver(why: string): void {
    if (++this.restarts > MAX_RESTARTS) throw new CliError(`upload session ${this.state.sessionId} ${why}, for the ${this.restarts}th time; giving up`);
    this.o.progress.note(`svc put: upload session ${this.state.sessionId} ${why}; starting a new session`);
    this.state = this.newState();
    this.known = false;
    this.o.progress.restart(0);
  }

  private async finish(blob: string): Promise<string> {
    const { file, size } = this.o;
    await this.hasher.catchUp(size);
    const now = fs.statSync(file);
    if (now.size !== size || now.mtimeMs !== this.o.mtimeMs) throw new CliError(`${file} changed during the upload; the server stored ${blob}`);
    const local = formatBlobId(this.hasher.hex(), size);
    if (blob !== local) throw new CliError(`the server committed ${blob} but ${file} hashes to ${local}`);
    removeState(this.o.statePath);
    return blob;
  }
}

/** Session gone or closed under us: the next round reads it again (and starts over if need be). */
function sessionProblem(err: unknown): boolean {
  return err instanceof ApiError && (err.status === 404 || err.status === 410 || (err.status === 409 && err.code === 'upload_state'));
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
