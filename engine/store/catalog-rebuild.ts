// `svc catalog rebuild`: the pg-s3 catalog recreated from the bucket alone (the journal of every
// publication's holding and every removal, and the block objects), into the database of SVC_PG_URL.
import type { Config } from '../base/config.js';
import { type RebuildSummary, rebuildPgCatalog } from './pg/catalog-rebuild.js';
import { S3BlockStore } from './s3/block-store.js';
import { S3Journal } from './s3/journal.js';

export { CatalogNotEmpty } from './pg/catalog-rebuild.js';

export interface CatalogRebuildReport extends RebuildSummary {
  /** Journal segments that could not be read or made no sense (their keys are passed to progress). */
  unreadableSegments: number;
}

export async function rebuildCatalog(config: Config, options: { force: boolean; progress: (line: string) => void }): Promise<CatalogRebuildReport> {
  if (config.blobBackend !== 'pg-s3') throw new Error(`the catalog is rebuilt for SVC_BLOB_BACKEND=pg-s3 only (it is ${config.blobBackend})`);
  // The S3 client is made once the catalog is found empty: a refusal says one line and nothing else.
  let store: S3BlockStore | undefined;
  const s3 = () => (store ??= new S3BlockStore({ kind: 's3', ...config.s3 }));
  let unreadableSegments = 0;
  try {
    const summary = await rebuildPgCatalog(config.pg.url, {
      records: (async function* () {
        yield* new S3Journal(s3().client, s3().location).listRecords((key, err) => {
          unreadableSegments++;
          options.progress(`skipped ${key}: ${(err as Error).message ?? String(err)}`);
        });
      })(),
      async *blockObjects(area) {
        let after: string | undefined;
        do {
          const page = await s3().list(area, after);
          yield page.blocks;
          after = page.next;
        } while (after);
      },
      restore: (hex, size) => s3().restore(hex, size),
      progress: options.progress,
    }, options);
    return { ...summary, unreadableSegments };
  } finally {
    await store?.close();
  }
}
