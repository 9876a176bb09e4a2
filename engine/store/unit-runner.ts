// What both UnitStore implementations share: a step's reads recorded as preconditions (the
// stored bytes each read saw), its writes buffered, and the loop that commits them or runs the
// step again. An implementation supplies the reads and an atomic compare-and-commit.

import { toBufferKey } from 'ordered-binary';
import { type CountedWith, type Entry, type PointKey, type Table, type Unit, UNIT_ATTEMPTS, UnitConflict, type UnitKey, type UnitRange, conflictBackoff } from './unit-store.js';
import { SvcError } from '../base/errors.js';
import type { StoredBlock } from './block-store.js';

// Keys travel as they are: their ordered-binary bytes (`keyBytes`, an allocation each) are made
// only where a store needs them (PostgreSQL), never on LMDB's path.

/** A point read: the key and the stored bytes it saw (undefined: absent). */
export interface PointRead {
  table: string;
  key: UnitKey;
  bytes: Buffer | undefined;
}

/** A range read: the options and the entries it saw, in order. */
export interface RangeRead {
  table: string;
  options: UnitRange;
  entries: Array<{ key: UnitKey; bytes: Buffer }>;
}

/**
 * A write: `value` undefined removes the key; with `delta`, the stored number plus it (`value`
 * unused); with `ifAbsent`, `value` only where the key holds no record, and then `counted`'s
 * number plus its delta (Unit.putIfAbsent).
 */
export interface BufferedWrite {
  table: string;
  key: UnitKey;
  value: unknown;
  delta?: number;
  ifAbsent?: { counted?: { table: string; key: UnitKey; delta: number } };
}

export interface StoredEntry {
  key: UnitKey;
  value: unknown;
  bytes: Buffer;
}

/** The reads and the commit an implementation provides. */
export interface UnitBackend {
  readPoint(table: string, key: UnitKey): Promise<{ value: unknown; bytes: Buffer | undefined }>;
  /** Several point reads in one round trip, in order; without it, `readPoint` of each. */
  readPoints?(reads: ReadonlyArray<{ table: string; key: UnitKey }>): Promise<Array<{ value: unknown; bytes: Buffer | undefined }>>;
  readRange(table: string, options: UnitRange): Promise<StoredEntry[]>;
  /**
   * Atomically: if every read still holds (same bytes, same range entries), apply the writes (and
   * record `blocks` in the blob catalog, with `recordsBlocks`); false when one does not.
   */
  commit(points: PointRead[], ranges: RangeRead[], writes: BufferedWrite[], blocks: readonly StoredBlock[]): Promise<boolean>;
  /** Whether `commit` records blocks in the blob catalog (Unit.recordBlocks). */
  readonly recordsBlocks: boolean;
  /** A record's bytes as the store keeps them, when they follow from the value alone (Unit.getKnown without a read). */
  encoded?(value: unknown): Buffer;
  /** This node's copy of a record of a remembered table (unit-store.ts, REMEMBERED), as last read or committed; undefined: none. */
  remembered?(table: string, key: UnitKey): { value: unknown; bytes: Buffer } | undefined;
}

export const keyBytes = (key: UnitKey): Buffer => toBufferKey(key as never);
/** A key's place in a unit's maps: its table and its value (a string and a number stay apart, as in key order). */
function slot(tableName: string, key: UnitKey): string {
  return typeof key === 'string' ? `${tableName}\u0000s${key}` : typeof key === 'number' ? `${tableName}\u0000n${key}` : `${tableName}\u0000a${JSON.stringify(key)}`;
}

/** Whether two keys are the same key (strings, numbers, arrays of them). */
export function sameKey(a: UnitKey, b: UnitKey): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => x === b[i]);
  return a === b;
}

class RecordingUnit implements Unit {
  readonly points = new Map<string, PointRead>();
  /** Records read by `prefetch`: `get` answers them without reading again. */
  private readonly fetched = new Map<string, unknown>();
  readonly ranges: RangeRead[] = [];
  readonly writes = new Map<string, BufferedWrite>();
  readonly callbacks: Array<() => void> = [];
  /** Blocks the commit records in the blob catalog (Unit.recordBlocks). */
  readonly blocks: StoredBlock[] = [];
  /** A `get` answered from the node's copy of a remembered record: only a commit verifies it. */
  guessed = false;

  constructor(
    private readonly backend: UnitBackend,
    /** 1 for the step's first run. */
    private readonly attempt: number,
  ) {}

  async getKnown<V, K extends UnitKey>(table: Table<V, K>, key: K, known: V, copy = false): Promise<V | undefined> {
    const at = slot(table.name, key);
    if (this.attempt > 1 || !this.backend.encoded || this.writes.has(at) || this.points.has(at)) return this.get(table, key);
    if (copy) this.guessed = true;
    this.points.set(at, { table: table.name, key, bytes: this.backend.encoded(known) });
    return known;
  }

  async prefetch(reads: ReadonlyArray<PointKey>): Promise<void> {
    const wanted = new Map<string, { table: string; key: UnitKey }>();
    for (const r of reads) {
      const at = slot(r.table.name, r.key);
      if (!this.writes.has(at) && !this.points.has(at)) wanted.set(at, { table: r.table.name, key: r.key });
    }
    if (wanted.size === 0) return;
    const list = [...wanted.values()];
    const got = this.backend.readPoints ? await this.backend.readPoints(list) : await Promise.all(list.map((r) => this.backend.readPoint(r.table, r.key)));
    let i = 0;
    for (const [at, r] of wanted) {
      const read = got[i++]!;
      // A key read meanwhile (a get in parallel) keeps its first read: both are preconditions only if they agree.
      if (this.points.has(at) && !sameBytes(this.points.get(at)!.bytes, read.bytes)) throw new UnitConflict(r.table);
      if (!this.points.has(at)) this.points.set(at, { table: r.table, key: r.key, bytes: read.bytes });
      this.fetched.set(at, read.value);
    }
  }

  async get<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<V | undefined> {
    const at = slot(table.name, key);
    const written = this.writes.get(at);
    if (written?.ifAbsent) throw new Error(`a unit cannot read a key of ${table.name} it put if absent without reading it first`);
    if (written) return written.value as V | undefined;
    if (this.fetched.has(at)) return this.fetched.get(at) as V | undefined;
    const copy = this.attempt === 1 && !this.points.has(at) ? this.backend.remembered?.(table.name, key) : undefined;
    if (copy) {
      this.guessed = true;
      this.points.set(at, { table: table.name, key, bytes: copy.bytes });
      return copy.value as V;
    }
    const read = await this.backend.readPoint(table.name, key);
    if (!this.points.has(at)) this.points.set(at, { table: table.name, key, bytes: read.bytes });
    else if (!sameBytes(this.points.get(at)!.bytes, read.bytes)) throw new UnitConflict(table.name);
    return read.value as V | undefined;
  }

  async has<V, K extends UnitKey>(table: Table<V, K>, key: K): Promise<boolean> {
    return (await this.get(table, key)) !== undefined;
  }

  async range<V, K extends UnitKey>(table: Table<V, K>, options: UnitRange & { precondition?: boolean } = {}): Promise<Array<Entry<V, K>>> {
    const { precondition = true, ...range } = options;
    const entries = await this.backend.readRange(table.name, range);
    if (precondition) this.ranges.push({ table: table.name, options: range, entries: entries.map((e) => ({ key: e.key, bytes: e.bytes })) });
    return entries.map((e) => ({ key: e.key as K, value: e.value as V }));
  }

  put<V, K extends UnitKey>(table: Table<V, K>, key: K, value: V): void {
    if (value === undefined) throw new Error('a unit cannot put undefined; remove the key');
    this.writes.set(slot(table.name, key), { table: table.name, key, value });
  }

  remove<V, K extends UnitKey>(table: Table<V, K>, key: K): void {
    this.writes.set(slot(table.name, key), { table: table.name, key, value: undefined });
  }

  add<K extends UnitKey>(table: Table<number, K>, key: K, delta: number): void {
    const at = slot(table.name, key);
    const earlier = this.writes.get(at);
    if (earlier && earlier.delta === undefined) throw new Error(`a unit cannot both put and add to one key of ${table.name}`);
    this.writes.set(at, { table: table.name, key, value: undefined, delta: (earlier?.delta ?? 0) + delta });
  }

  putIfAbsent<V, K extends UnitKey, CK extends UnitKey>(table: Table<V, K>, key: K, value: V, counted?: CountedWith<CK>): void {
    if (value === undefined) throw new Error('a unit cannot put undefined; remove the key');
    const at = slot(table.name, key);
    const earlier = this.writes.get(at);
    if (earlier?.delta !== undefined || earlier?.ifAbsent) throw new Error(`a unit cannot put if absent a key of ${table.name} it added to or put if absent`);
    const read = this.points.get(at);
    if (earlier || read) {
      // Known to the unit: decided here, on its own write or on its read (a precondition).
      if ((earlier ? earlier.value : read!.bytes) !== undefined) return;
      this.put(table, key, value);
      if (counted) this.add(counted.table, counted.key, counted.delta);
      return;
    }
    const ifAbsent = counted ? { counted: { table: counted.table.name, key: counted.key, delta: counted.delta } } : {};
    this.writes.set(at, { table: table.name, key, value, ifAbsent });
  }

  recordBlocks(blocks: readonly StoredBlock[]): void {
    if (!this.backend.recordsBlocks) throw new Error('this store\'s commits do not reach the blob catalog: record the blocks before the unit');
    this.blocks.push(...blocks);
  }

  afterCommit(callback: () => void): void {
    this.callbacks.push(callback);
  }
}

export function sameBytes(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b);
}

/** Whether the range holds the same entries as when it was read. */
export function sameEntries(seen: RangeRead['entries'], now: RangeRead['entries']): boolean {
  if (seen.length !== now.length) return false;
  for (let i = 0; i < seen.length; i++) {
    if (!sameKey(seen[i]!.key, now[i]!.key) || !seen[i]!.bytes.equals(now[i]!.bytes)) return false;
  }
  return true;
}

const contention = () => new SvcError('unavailable', 'contention', 'The records this request changes were changed by others too often; retry it');

/**
 * Runs `step` until it commits: a step that throws commits nothing (the error propagates); one
 * whose reads changed runs again, up to UNIT_ATTEMPTS times (then 503 contention). Returns the
 * step's result and the names of the tables it wrote (empty when it wrote nothing).
 */
export async function runUnit<T>(backend: UnitBackend, step: (unit: Unit) => Promise<T> | T): Promise<{ result: T; written: Set<string> }> {
  // A step run again because it took a remembered copy (not because of a conflict): no pause.
  let unverified = false;
  for (let attempt = 1; attempt <= UNIT_ATTEMPTS; attempt++) {
    const pause = unverified ? 0 : conflictBackoff(attempt);
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    const unit = new RecordingUnit(backend, attempt);
    let result: T;
    try {
      result = await step(unit);
    } catch (err) {
      if (err instanceof UnitConflict) continue;
      // It may have thrown on a stale copy: the answer comes from fresh reads.
      if ((unverified = unit.guessed)) continue;
      throw err;
    }
    const writes = [...unit.writes.values()];
    const commits = writes.length > 0 || unit.blocks.length > 0;
    // Nothing to commit, nothing verifies the copy it took: fresh reads answer.
    if ((unverified = !commits && unit.guessed)) continue;
    if (commits && !(await backend.commit([...unit.points.values()], unit.ranges, writes, unit.blocks))) continue;
    for (const callback of unit.callbacks) callback();
    const written = new Set(writes.map((w) => w.table));
    for (const w of writes) if (w.ifAbsent?.counted) written.add(w.ifAbsent.counted.table);
    return { result, written };
  }
  throw contention();
}
