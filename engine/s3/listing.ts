// ListObjects (v1) and ListObjectsV2 over the index, keys in UTF-8 binary order as S3 lists them
// (names.ts: the stored keys sort so on LMDB and PostgreSQL alike).
//
// One position serves marker, start-after and the continuation token: `after`, the last key or
// common prefix a page listed. A page lists the keys above `after` that start with `prefix`;
// with a delimiter, a key with the delimiter after the prefix rolls up into its common prefix
// (prefix up to and including that delimiter), listed once, and not at all when it is `after`
// itself (the previous page listed it). Keys and common prefixes together count against max-keys.
// A common prefix is not scanned through: when a read meets more than a few keys of a group
// already listed, the next read starts past the whole group (`successor` of the group).
// `next` (when truncated) is the position to pass back: v1's NextMarker, and what the listener
// seals as V2's NextContinuationToken (engine/auth/cursor-seal.ts seals a position string).

import { PAGE_MAX } from '../base/limits.js';
import type { Entry, UnitKey, UnitRange } from '../store/index.js';
import { s3Refusal } from './errors.js';
import { KEY_HIGH, afterStored, compareKeys, decodeKey, encodeKey, groupOf, successor } from './names.js';

/** Entries of one group read past before the next read seeks beyond the group. */
const SKIP_BEFORE_SEEK = 16;
/** Entries read at a time with a delimiter (a read may end in a group it then seeks past). */
const DELIMITED_READ = 100;

export interface ListQuery {
  prefix?: string;
  delimiter?: string;
  /** max-keys: 0 to 1000 (S3 answers at most 1000 whatever is asked; default 1000). */
  maxKeys?: number;
  /** Marker, StartAfter, or the position a continuation token sealed: list above it. */
  after?: string;
}

/** What one listing found, in order: entries and common prefixes interleaved as S3 orders them. */
export type Listed<V> = { key: string; value: V; prefix?: undefined } | { prefix: string; key?: undefined; value?: undefined };

export interface ListPage<V> {
  items: Array<Listed<V>>;
  truncated: boolean;
  /** The position after the last item (present when truncated). */
  next?: string;
}

/** How the lister reads one table whose keys begin [bucket, stored key, ...]. */
export interface GroupedSource<V> {
  read(range: UnitRange): Promise<Array<Entry<V, UnitKey>>>;
  /** The stored key an entry's key names. */
  storedKeyOf(key: UnitKey): string;
  /** The start of what follows an entry (an exclusive lower bound made inclusive). */
  startAfter(key: UnitKey): UnitKey;
}

/** The max-keys of a query: an integer 0 to 1000 (above is 1000), else InvalidArgument. */
export function maxKeysOf(maxKeys: number | undefined): number {
  if (maxKeys === undefined) return PAGE_MAX;
  if (!Number.isInteger(maxKeys) || maxKeys < 0) throw s3Refusal('InvalidArgument', 'max-keys must be an integer from 0');
  return Math.min(maxKeys, PAGE_MAX);
}

/**
 * Up to `max` items of `bucket` from `start` (inclusive) under `prefix`, rolled up by
 * `delimiter`; a group equal to `suppress` is not listed (the previous page's last item).
 */
export async function listGrouped<V>(
  source: GroupedSource<V>,
  bucket: string,
  query: { prefix: string; delimiter?: string; max: number; start: UnitKey; suppress?: string },
): Promise<ListPage<V>> {
  const { prefix, delimiter, max } = query;
  const items: Array<Listed<V>> = [];
  if (max === 0) return { items, truncated: false };
  const storedPrefix = encodeKey(prefix);
  const endKey = successor(storedPrefix);
  const end: UnitKey = [bucket, endKey ?? KEY_HIGH];
  let start = query.start;
  let group: string | undefined;
  for (;;) {
    const limit = delimiter ? Math.min(DELIMITED_READ, max - items.length + SKIP_BEFORE_SEEK) : max - items.length + 1;
    const page = await source.read({ start, end, limit });
    let skipped = 0;
    let next: UnitKey | typeof DONE | undefined;
    for (const entry of page) {
      const key = decodeKey(source.storedKeyOf(entry.key));
      const g = groupOf(key, prefix, delimiter);
      if (g !== undefined && g === group) {
        if (++skipped > SKIP_BEFORE_SEEK) {
          next = seekPast(bucket, g);
          break;
        }
        continue;
      }
      if (items.length === max) return { items, truncated: true, next: lastPosition(items) };
      group = g;
      skipped = 0;
      if (g === undefined) items.push({ key, value: entry.value });
      else if (g !== query.suppress) items.push({ prefix: g });
    }
    if (next === undefined) {
      if (page.length < limit) return { items, truncated: false };
      const last = page[page.length - 1]!.key;
      const lastGroup = groupOf(decodeKey(source.storedKeyOf(last)), prefix, delimiter);
      next = lastGroup === undefined ? source.startAfter(last) : seekPast(bucket, lastGroup);
    }
    if (next === DONE) return { items, truncated: false };
    start = next;
  }
}

/** Nothing can follow (a group of nothing but U+10FFFF). */
const DONE = Symbol('done');

/** Past every key of a common prefix. */
function seekPast(bucket: string, group: string): UnitKey | typeof DONE {
  const next = successor(encodeKey(group));
  return next === undefined ? DONE : [bucket, next];
}

const lastPosition = <V>(items: Array<Listed<V>>): string => {
  const last = items[items.length - 1]!;
  return last.prefix ?? last.key!;
};

/** ListObjects / ListObjectsV2 of the objects table (its keys: [bucket, stored key]). */
export function listObjects<V>(source: GroupedSource<V>, bucket: string, query: ListQuery): Promise<ListPage<V>> {
  const prefix = query.prefix ?? '';
  const after = query.after ?? '';
  const delimiter = query.delimiter || undefined;
  // Above `after` and at or above the prefix: whichever is higher.
  const fromAfter = after === '' ? undefined : afterStored(encodeKey(after));
  const fromPrefix = encodeKey(prefix);
  const from = fromAfter !== undefined && compareKeys(fromAfter, fromPrefix) > 0 ? fromAfter : fromPrefix;
  return listGrouped(source, bucket, { prefix, delimiter, max: maxKeysOf(query.maxKeys), start: [bucket, from], suppress: after === '' ? undefined : after });
}
