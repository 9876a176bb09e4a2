import type { UploadResponse } from './large.js';
import { PdfSeries } from './pdf.js';
import { RawConnection, getRequest, postRequest } from './raw-http.js';

export interface RevisionResult {
  revision: number;
  bytes: number;
  appendedBytes: number;
  blockCount: number;
  chunker: string;
  freshBlocks: number;
  duplicateBlocks: number;
  /** Blocks (distinct content ids) of this revision absent from the previous revision's block list. */
  newBlocks: number;
  newBlockBytes: number;
  /** newBlockBytes as % of the revision's size. */
  newPercent: number;
  uploadSeconds: number;
  mbPerSecond: number;
}

export interface DedupResult {
  revisions: RevisionResult[];
}

interface BlockEntry {
  contentId: string;
  size: number;
}

async function blockList(conn: RawConnection, id: string): Promise<BlockEntry[]> {
  const blocks: BlockEntry[] = [];
  let cursor: string | undefined;
  do {
    const path = `/api/v1/blobs/${id}/metadata?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await conn.request(getRequest(path));
    if (res.status !== 200) throw new Error(`GET ${path} answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 500)}`);
    const page = JSON.parse(res.body!.toString('utf8')) as { blocks: BlockEntry[]; nextCursor?: string };
    blocks.push(...page.blocks);
    cursor = page.nextCursor;
  } while (cursor);
  return blocks;
}

/** Uploads revisions 1..count of the synthetic PDF series and measures what each adds. */
export async function runDedup(port: number, seed: string, count: number, targetBytes: number): Promise<DedupResult> {
  const series = new PdfSeries(seed);
  const conn = await RawConnection.connect(port, '127.0.0.1', 256 * 1024);
  const revisions: RevisionResult[] = [];
  let previous = new Set<string>();
  try {
    for (let r = 1; r <= count; r++) {
      const rev = r === 1 ? series.first(targetBytes) : series.next();
      const request = postRequest('/api/v1/blobs', 'application/pdf', rev.bytes);
      const started = performance.now();
      const res = await conn.request(request);
      const seconds = (res.doneAt - started) / 1000;
      if (res.status !== 201) throw new Error(`revision ${r} upload answered HTTP ${res.status}: ${res.body?.toString('utf8').slice(0, 500)}`);
      const body = JSON.parse(res.body!.toString('utf8')) as UploadResponse;
      const blocks = await blockList(conn, body.blob.id);
      if (blocks.length !== body.blob.blockCount) throw new Error(`revision ${r}: metadata listed ${blocks.length} blocks, summary says ${body.blob.blockCount}`);
      const current = new Set<string>();
      let newBlocks = 0;
      let newBlockBytes = 0;
      for (const b of blocks) {
        if (!previous.has(b.contentId) && !current.has(b.contentId)) {
          newBlocks++;
          newBlockBytes += b.size;
        }
        current.add(b.contentId);
      }
      revisions.push({
        revision: r,
        bytes: rev.bytes.length,
        appendedBytes: rev.appendedBytes,
        blockCount: body.blob.blockCount,
        chunker: body.blob.chunker,
        freshBlocks: body.freshBlocks,
        duplicateBlocks: body.duplicateBlocks,
        newBlocks,
        newBlockBytes,
        newPercent: (newBlockBytes / rev.bytes.length) * 100,
        uploadSeconds: seconds,
        mbPerSecond: rev.bytes.length / seconds / 1e6,
      });
      previous = current;
    }
  } finally {
    conn.close();
  }
  return { revisions };
}
