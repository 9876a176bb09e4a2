// What both UnitStore implementations share: a step's reads recorded as preconditions (the
// stored bytes each read saw), its writes buffered, and the loop that commits them or runs the
// step again. An implementation supplies the reads and an atomic compare-and-commit.

import { toBufferKey } from 'ordered-binary';
import { type Entry, type Table, type Unit, UNIT_ATTEMPTS, UnitConflict, type UnitKey, type UnitRange, conflictBackoff } from './unit-store.js';
import { SvcError } from '../errors.js';

/** A point read: the key and the stored bytes it saw (undefined: absent). */
export interface PointRead {
  table: string;
  key: UnitKey;
  keyBytes: Buffer;
  bytes: Buffer | undefined;
}

/** A range read: the options and the entries it saw, in order. */
export interface RangeRead {
  table: string;
  options: UnitRange;
  entries: Array<{ keyBytes: Buffer; bytes: Buffer }>;
}

/** A write: `value` undefined removes the key; with `delta`, the stored number plus it (`value` unused). */
export interface BufferedWrite {
  table: string;
  key: UnitKey;
  keyBytes: Buffer;
  value: unknown;
  delta?: number;
}

export interface StoredEntry {
  key: UnitKey;
  keyBytes: Buffer;
  value: unknown;
  bytes: Buffer;
}

/** The reads and the commit an implementation provides. */
export interface UnitBackend {
  readPoint(table: string, key: UnitKey, keyBytes: Buffer): Promise<{ value: unknown; bytes: Buffer | undefined }>;
  readRange(table: string, options: UnitRange): Promise<StoredEntry[]>;
  /** Atomically: if every read still holds (same bytes, same range entries), apply the writes; false when one does not. */
  commit(points: PointRead[], ranges: RangeRead[], writes: BufferedWrite[]): Promise<boolean>;
}

export const keyBytes = (key: UnitKey): Buffer => toBufferKey(key as never);
const slot = (tableName: string, bytes: Buffer) => `${tableName}\u0000${bytes.toString('latin1')}`;

class RecordingUnit implements Unit {
  readonly points = new Map<string, PointRead>();
  readonly ranges: RangeRead[] = [];
  readonly writes = new Map<string, BufferedWrite>();
  readonly callbacks: Array<() => void> = [];

  constructor(private readonly backend: UnitBackend) {}

  async get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined> {
    const bytes = keyBytes(key);
    const at = slot(table.name, bytes);
    const written = this.writes.get(at);
    if (written) return written.value as V | undefined;
    const read = await this.backend.readPoint(table.name, key, bytes);
    if (!this.points.has(at)) this.points.set(at, { table: table.name, key, keyBytes: bytes, bytes: read.bytes });
    else if (!sameBytes(this.points.get(at)!.bytes, read.bytes)) throw new UnitConflict(table.name);
    return read.value as V | undefined;
  }

  async has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean> {
    return (await this.get(table, key)) !== undefined;
  }

  async range<V, K extends UnitKey>(table: Table<V, K>, options: UnitRange & { precondition?: boolean } = {}): Promise<Array<Entry<V, K>>> {
    const { precondition = true, ...range } = options;
    const entries = await this.backend.readRange(table.name, range);
    if (precondition) this.ranges.push({ table: table.name, options: range, entries: entries.map((e) => ({ keyBytes: e.keyBytes, bytes: e.bytes })) });
    return entries.map((e) => ({ key: e.key as K, value: e.value as V }));
  }

  put<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V): void {
    if (value === undefined) throw new Error('a unit cannot put undefined; remove the key');
    const bytes = keyBytes(key);
    this.writes.set(slot(table.name, bytes), { table: table.name, key, keyBytes: bytes, value });
  }

  remove<V, K extends UnitKey>(table: Table<V, K>, key: K): void {
    const bytes = keyBytes(key);
    this.writes.set(slot(table.name, bytes), { table: table.name, key, keyBytes: bytes, value: undefined });
  }

  add<K extends UnitKey>(table: Table<number, K>, key: K, delta: number): void {
    const bytes = keyBytes(key);
    const at = slot(table.name, bytes);
    const earlier = this.writes.get(at);
    if (earlier && earlier.delta === undefined) throw new Error(`a unit cannot both put and add to one key of ${table.name}`);
    this.writes.set(at, { table: table.name, key, keyBytes: bytes, value: undefined, delta: (earlier?.delta ?? 0) + delta });
  }

  afterCommit(callback: () => void): void {
    this.callbacks.push(callback);
  }
}

export function sameBytes(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b);
}

/** Whether the range holds the same entries as when it was read. */
export function sameEntries(seen: RangeRead['entries'], now: Array<{ keyBytes: Buffer; bytes: Buffer }>): boolean {
  if (seen.length !== now.length) return false;
  for (let i = 0; i < seen.length; i++) {
    if (!seen[i]!.keyBytes.equals(now[i]!.keyBytes) || !seen[i]!.bytes.equals(now[i]!.bytes)) return false;
  }
  return true;
}

const contention = () => new SvcError(503, 'contention', 'The records this request changes were changed by others too often; retry it');

/**
 * Runs `step` until it commits: a step that throws commits nothing (the error propagates); one
 * whose reads changed runs again, up to UNIT_ATTEMPTS times (then 503 contention). Returns the
 * step's result and the names of the tables it wrote (empty when it wrote nothing).
 */
export async function runUnit<T>(backend: UnitBackend, step: (unit: Unit) => Promise<T> | T): Promise<{ result: T; written: Set<string> }> {
  for (let attempt = 1; attempt <= UNIT_ATTEMPTS; attempt++) {
    const pause = conflictBackoff(attempt);
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    const unit = new RecordingUnit(backend);
    let result: T;
    try {
      result = await step(unit);
    } catch (err) {
      if (err instanceof UnitConflict) continue;
      throw err;
    }
    const writes = [...unit.writes.values()];
    if (writes.length > 0 && !(await backend.commit([...unit.points.values()], unit.ranges, writes))) continue;
    for (const callback of unit.callbacks) callback();
    return { result, written: new Set(writes.map((w) => w.table)) };
  }
  throw contention();
}
