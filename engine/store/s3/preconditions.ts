// Does this S3 server honour conditional writes? Several S3-only nodes (SVC_BLOB_BACKEND=s3)
// publish a manifest exactly once (PUT If-None-Match: *) and take and renew leases by
// compare-and-swap (PUT If-Match: <etag>). Some servers, s3rver among them, accept the headers
// and ignore them, so two nodes would both "win"; svc probes at start and refuses to run several
// S3-only nodes on such a server (a single node needs no preconditions).
import { randomUUID } from 'node:crypto';
import { DeleteObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';

export interface ConditionalWrites {
  /** A second PUT with If-None-Match: * over an existing key is refused (412). */
  ifNoneMatch: boolean;
  /** A PUT with If-Match of a wrong ETag is refused (412) and one with the right ETag is accepted. */
  ifMatch: boolean;
  /**
   * The form of the right ETag that If-Match accepted: as the server returns it ("quoted", RFC
   * 7232) or bare ("unquoted": radosgw 16 compares the bare hex and refuses the quoted form).
   */
  ifMatchEtagForm?: EtagForm;
}

export type EtagForm = 'quoted' | 'unquoted';

/** The If-Match value for `etag` (as the server returned it) in the form the server accepts. */
export function ifMatchValue(etag: string, form: EtagForm): string {
  return form === 'quoted' ? etag : etag.replace(/^"(.*)"$/, '$1');
}

type PutAnswer = { outcome: 'written'; etag: string } | { outcome: 'refused' } | { outcome: 'unsupported' };

// An ETag no object has: S3 ETags of single-part objects are the hex MD5 of their bytes.
const WRONG_ETAG = '"00000000000000000000000000000000"';

export async function probeConditionalWrites(client: S3Client, bucket: string, prefix: string): Promise<ConditionalWrites> {
  const key = `${prefix}svc-precondition-probe/${randomUUID()}`;
  const put = (body: string, conditions: { IfNoneMatch?: string; IfMatch?: string }) =>
    conditionalPut(client, bucket, key, body, conditions);
  try {
    const created = await put('probe 1', { IfNoneMatch: '*' });
    if (created.outcome !== 'written') throw new Error(`precondition probe: creating s3://${bucket}/${key} was ${created.outcome}`);
    const again = await put('probe 2', { IfNoneMatch: '*' });
    const wrongEtag = await put('probe 3', { IfMatch: WRONG_ETAG });
    // Only after a refused wrong ETag does the object still carry the ETag of its creation, and
    // it keeps it until one of the forms below is accepted.
    let ifMatchEtagForm: EtagForm | undefined;
    if (wrongEtag.outcome === 'refused') {
      for (const form of ['quoted', 'unquoted'] as const) {
        const rightEtag = await put(`probe 4 ${form}`, { IfMatch: ifMatchValue(created.etag, form) });
        if (rightEtag.outcome === 'written') {
          ifMatchEtagForm = form;
          break;
        }
      }
    }
    const ifNoneMatch = again.outcome === 'refused';
    return ifMatchEtagForm ? { ifNoneMatch, ifMatch: true, ifMatchEtagForm } : { ifNoneMatch, ifMatch: false };
  } finally {
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
  }
}

async function conditionalPut(
  client: S3Client,
  bucket: string,
  key: string,
  body: string,
  conditions: { IfNoneMatch?: string; IfMatch?: string },
): Promise<PutAnswer> {
  try {
    const answer = await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ...conditions }));
    return { outcome: 'written', etag: answer.ETag ?? '' };
  } catch (error) {
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    if (status === 412) return { outcome: 'refused' };
    // A server that rejects the header outright does not offer the condition either.
    if (status === 501 || (error as { name?: string }).name === 'NotImplemented') return { outcome: 'unsupported' };
    throw error;
  }
}
