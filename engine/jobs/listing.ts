// Job lists from the index tables (by tenant, document, state), and the backfill that builds
// those indexes for a data directory written before they existed.

import type { Logger } from '../base/log.js';
import type { Table, UnitKey, UnitStore } from '../store/unit-store.js';
import { INDEX_VERSION, JOBS, JOBS_BY_DOCUMENT, JOBS_BY_STATE, JOBS_BY_TENANT, JOBS_META, type JobRecord, type JobState, documentOf, indexLists } from './records.js';

export interface JobFilter {
  documentId?: string;
  state?: JobState;
}

/** Above every UUID: the high end of a reversed prefix range. */
const HIGH = '\uffff';
const BACKFILL_BATCH = 256;

/**
 * The tenant's jobs newest first after job id `after`, from the most selective index: the
 * document's (then filtered by state: a document has few jobs), else the state's, else the
 * tenant's. `next` (the page's last job id) is set when more index entries follow it. A record
 * that changed between the index read and its own read (another state now) is left out, so a
 * page can be short and still have a next one.
 */
export async function listJobs(store: UnitStore, tenant: string, filter: JobFilter, limit: number, after?: string): Promise<{ jobs: JobRecord[]; next?: string }> {
  const [index, prefix]: [Table<1, never>, UnitKey[]] =
    filter.documentId !== undefined
      ? [JOBS_BY_DOCUMENT as Table<1, never>, [tenant, filter.documentId]]
      : filter.state !== undefined
        ? [JOBS_BY_STATE as Table<1, never>, [tenant, filter.state]]
        : [JOBS_BY_TENANT as Table<1, never>, [tenant]];
  const matches = (r: JobRecord | undefined): r is JobRecord =>
    r !== undefined && r.tenant === tenant && (filter.state === undefined || r.state === filter.state) && (filter.documentId === undefined || documentOf(r) === filter.documentId);
  const jobs: JobRecord[] = [];
  if (limit <= 0) return { jobs };
  let start: UnitKey[] = [...prefix, after ?? HIGH];
  let skip = after;
  for (;;) {
    const page = await store.range(index, { start: start as never, end: prefix as never, reverse: true, limit: limit + 1 });
    let i = 0;
    if (skip !== undefined && page.length > 0 && lastOf(page[0]!.key) === skip) i = 1;
    for (; i < page.length; i++) {
      const jobId = lastOf(page[i]!.key);
      if (jobs.length === limit) return { jobs, next: jobs[jobs.length - 1]!.jobId };
      const record = await store.get(JOBS, jobId);
      if (matches(record)) jobs.push(record);
    }
    if (page.length < limit + 1) return { jobs };
    // The page's last entry starts the next read (inclusive, so skipped).
    skip = lastOf(page[page.length - 1]!.key);
    start = [...prefix, skip];
  }
}

const lastOf = (key: unknown) => (key as string[])[(key as string[]).length - 1]!;

/**
 * Builds the list indexes from the `jobs` table when they are not known to be complete (a data
 * directory from before them): in units of BACKFILL_BATCH records, each read in the unit (so a
 * job changed meanwhile is indexed as it is now), then the marker. Idempotent: an interrupted
 * backfill runs again whole at the next start; several nodes may run it at once.
 */
export async function backfillIndexes(store: UnitStore, log: Logger): Promise<number> {
  if (await store.get(JOBS_META, 'indexes')) return 0;
  let ids: string[] = [];
  let count = 0;
  const flush = async () => {
    const batch = ids;
    ids = [];
    await store.run(async (unit) => {
      for (const jobId of batch) {
        const record = await unit.get(JOBS, jobId);
        if (!record) continue;
        // As if new: the tenant's and document's entries, and the state's.
        indexLists(unit, undefined, record);
        for (const state of ['pending', 'running', 'completed', 'failed', 'dead'] as const) {
          if (state !== record.state) unit.remove(JOBS_BY_STATE, [record.tenant, state, jobId]);
        }
      }
    });
    count += batch.length;
  };
  for await (const { key } of store.scan(JOBS)) {
    ids.push(key);
    if (ids.length === BACKFILL_BATCH) await flush();
  }
  if (ids.length > 0) await flush();
  await store.run((unit) => unit.put(JOBS_META, 'indexes', { version: INDEX_VERSION, at: Date.now() }));
  if (count > 0) log.info('jobs: list indexes built for the existing jobs', { jobs: count });
  return count;
}
