// Staged tails of resumable sessions in the bucket (pg-s3): the next part of a session may reach
// another node, which reads the tail from here. `<prefix>staging/<session id>/<tail-a|tail-b>`:
// a PutObject replaces an object whole and atomically, so the name the session's record does not
// name can be written over while the other one stays intact, as with files.
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { Readable } from 'node:stream';
import type { S3Location } from '../block-store.js';
import type { TailStaging } from '../upload-catalog.js';
import { isNotFound } from './block-store.js';

export class S3TailStaging implements TailStaging {
  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
  ) {}

  private prefix(id?: string): string {
    return `${this.location.prefix}staging/${id === undefined ? '' : `${id}/`}`;
  }

  async overwrite(id: string, name: string, pieces: readonly Uint8Array[]): Promise<void> {
    // A tail is less than a block, or what an early-answered part's pipeline had not stored yet
    // (within the ingest's memory bound): one PUT of its bytes.
    const Body = pieces.length === 1 ? pieces[0] : Buffer.concat(pieces);
    await this.client.send(new PutObjectCommand({ Bucket: this.location.bucket, Key: this.prefix(id) + name, Body, ContentLength: Body.length }));
  }

  async read(id: string, name: string | undefined, take?: (size: number) => Buffer): Promise<Buffer> {
    if (name === undefined) return Buffer.alloc(0);
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.location.bucket, Key: this.prefix(id) + name }));
    if (!(out.Body instanceof Readable)) throw new Error(`staged tail of ${id}: S3 returned no body`);
    const size = out.ContentLength ?? 0;
    const bytes = take ? take(size) : Buffer.allocUnsafe(size);
    let at = 0;
    for await (const chunk of out.Body as AsyncIterable<Buffer>) {
      if (at + chunk.length > size) {
        out.Body.destroy();
        throw new Error(`staged tail of ${id}: object longer than its ${size} bytes`);
      }
      chunk.copy(bytes, at);
      at += chunk.length;
    }
    if (at !== size) throw new Error(`staged tail of ${id} ended at ${at} of ${size} bytes`);
    return bytes;
  }

  async removeFile(id: string, name: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: this.prefix(id) + name })).catch((err) => {
      if (!isNotFound(err)) throw err;
    });
  }

  async prune(id: string, keep: string | undefined): Promise<void> {
    const names = await this.names(id);
    await Promise.all(names.filter((n) => n !== keep).map((n) => this.removeFile(id, n)));
  }

  async remove(id: string): Promise<void> {
    await this.prune(id, undefined);
  }

  async sessions(): Promise<string[]> {
    const ids: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: this.prefix(), Delimiter: '/', ContinuationToken: token }));
      for (const p of page.CommonPrefixes ?? []) ids.push(p.Prefix!.slice(this.prefix().length, -1));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return ids;
  }

  /** The session's staged names (two at most). */
  private async names(id: string): Promise<string[]> {
    const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.location.bucket, Prefix: this.prefix(id) }));
    return (page.Contents ?? []).map((o) => o.Key!.slice(this.prefix(id).length));
  }
}
