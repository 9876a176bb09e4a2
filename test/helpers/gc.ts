// What the garbage-collection suites share: a server configuration whose blocks are predictable
// (fixed 16 KiB blocks, so shared prefixes share blocks; no inline blobs) and whose GC waits for
// nothing, and the block names a blob's metadata lists.
import { expect } from 'vitest';

export const BLOCK = 16 * 1024;

export const FIXED_BLOCKS_ENV = {
  SVC_DURABILITY: 'relaxed',
  SVC_CHUNKER: 'fixed',
  SVC_CHUNK_MIN: '4KiB',
  SVC_CHUNK_AVG: '16KiB',
  SVC_CHUNK_MAX: '64KiB',
  SVC_INLINE_MAX_BYTES: '0',
  SVC_GC_MIN_AGE: '0s',
  SVC_GC_QUARANTINE_AGE: '0s',
};

/** `<hex>-<size>` of every block of the blob, in order, from its metadata pages. */
export async function blockNames(url: string, blobId: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  do {
    const res = await fetch(`${url}/api/v1/blobs/${blobId}/metadata?limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    const page = (await res.json()) as { blocks: Array<{ contentId: string }>; nextCursor?: string };
    for (const b of page.blocks) {
      const [, hex, size] = b.contentId.split(':');
      out.push(`${hex}-${size}`);
    }
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

/** POST /api/ops/v1/gc: the run's report, which must be a 200 without an error. */
export async function gcRun(url: string, phase: string, apply = true): Promise<any> {
  const res = await fetch(`${url}/api/ops/v1/gc?phase=${phase}&apply=${apply}`, { method: 'POST' });
  const report = (await res.json()) as any;
  expect(res.status, JSON.stringify(report)).toBe(200);
  expect(report.error).toBeUndefined();
  return report;
}
