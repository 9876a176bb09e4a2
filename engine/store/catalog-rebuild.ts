// `svc catalog rebuild`: the pg-s3 catalog recreated from the bucket alone (the holdings journaled
// by every publication, and the block objects), into the database of SVC_PG_URL.
import type { Config } from '../config.js';
import { type RebuildSummary, rebuildPgCatalog } from './pg/catalog-rebuild.js';
import { S3BlockStore } from './s3/block-store.js';
import { S3Holdings } from './s3/holdings.js';

export { CatalogNotEmpty } from './pg/catalog-rebuild.js';

export interface CatalogRebuildReport extends RebuildSummary {
  /** Holding objects that could not be read or made no sense (their keys are passed to progress). */
  unreadableHoldings: number;
}

export async function rebuildCatalog(config: Config, options: { force: boolean; progress: (line: string) => void }): Promise<CatalogRebuildReport> {
  if (config.blobBackend !== 'pg-s3') throw new Error(`the catalog is rebuilt for SVC_BLOB_BACKEND=pg-s3 only (it is ${config.blobBackend})`);
  // The S3 client is made once the catalog is found empty: a refusal says one line and nothing else.
  let store: S3BlockStore | undefined;
  const s3 = () => (store ??= new S3BlockStore({ kind: 's3', ...config.s3 }));
  let unreadableHoldings = 0;
  try {
    const summary = await rebuildPgCatalog(config.pg.url, {
      holdings: (async function* () {
        yield* new S3Holdings(s3().client, s3().location).listHoldings((key, err) => {
          unreadableHoldings++;
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
    return { ...summary, unreadableHoldings };
  } finally {
    store?.client.destroy();
  }
}
