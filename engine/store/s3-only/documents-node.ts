// The s3 backend has no shared store for the document platform: its records stay in one node's
// LMDB. So that a cluster never splits them, the first node to claim `<prefix>documents-node`
// (a conditional create) serves the document platform for good; the others answer 503
// documents_single_node naming it (docs/backends.md, "s3").
import type { ObjectIo } from './objects.js';
import type { S3OnlyKeys } from './keys.js';

interface DocumentsNodeV1 {
  v: 1;
  nodeId: string;
  since: string;
}

/** The node serving the document platform: this one if none is recorded yet. */
export async function claimDocumentsNode(io: ObjectIo, keys: S3OnlyKeys, nodeId: string): Promise<string> {
  const key = keys.documentsNode();
  for (let attempt = 0; attempt < 5; attempt++) {
    const existing = await io.get(key);
    if (existing) return (JSON.parse(existing.body.toString('utf8')) as DocumentsNodeV1).nodeId;
    const record: DocumentsNodeV1 = { v: 1, nodeId, since: new Date().toISOString() };
    const put = await io.put(key, Buffer.from(JSON.stringify(record)), { ifNoneMatch: true });
    if (put !== 'refused') return nodeId;
  }
  throw new Error(`the s3 backend could not read or claim ${key}`);
}
