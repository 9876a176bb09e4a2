// Each tenant's ledger: `<prefix>ledgers/<base64url tenant>`, one JSON document with the tenant's
// retained bytes (the quota), blob count and next inventory position, changed only by
// compare-and-swap (PUT If-Match of the ETag read; If-None-Match: * for the first), so that
// nodes sharing a bucket never lose each other's updates. Without conditional writes (one
// node) a queue per tenant in this process keeps the updates in order instead.
//
// Why retained bytes stay exact across kill -9 without a scan: a publication or removal first
// records its intent in the ledger together with the change of bytes (`pending`), then writes or
// deletes the objects, then drops the intent. An intent whose writer is gone (this node's earlier
// boot, or a node whose heartbeat is older than SVC_NODE_TTL) is settled by the next writer of
// the ledger from what the bucket holds: the change stands when the holding is as the write
// meant to leave it (there after an addition, gone after a removal), else it is undone. Either
// way the ledger then agrees with the holdings, and so with the inventory that lists them. The
// intent also locks the blob: a second writer of the same (tenant, blob) waits for it.
import { KeyQueue } from '../key-queue.js';
import type { S3OnlyKeys } from './keys.js';
import type { NodeRegistry } from './nodes.js';
import type { ObjectIo } from './objects.js';

export interface Intent {
  op: 'add' | 'remove';
  id: string;
  size: number;
  /** The blob's inventory position. */
  seq: number;
  node: string;
  boot: string;
  /** When it was recorded (the writer's clock), for logs. */
  at: number;
}

export interface LedgerDoc {
  v: 1;
  bytes: number;
  blobs: number;
  nextSeq: number;
  pending: Intent[];
}

/** Thrown by a change that must wait for another writer's intent on the same blob. */
class Busy extends Error {}

/** How long a writer waits for another live writer's intent on the same blob before giving up. */
const BUSY_WAIT_MS = 30_000;
/** Finished intents wait this long for another write of the ledger to drop them with. */
const FLUSH_MS = 25;

/** Settles an intent whose writer is gone, from what the bucket holds; returns whether its change of bytes stands. */
export type SettleIntent = (tenant: string, intent: Intent) => Promise<'stands' | 'undone'>;

export class TenantLedgers {
  private readonly local = new KeyQueue();
  /** This process's writes in progress (`tenant\0id`): its own intents not among them were abandoned. */
  private readonly inFlight = new Set<string>();
  /** This process's finished writes (`tenant\0id`) whose intents are still in the ledger: they stand. */
  private readonly done = new Set<string>();
  /** Tenants with a flush of finished intents scheduled. */
  private readonly flushing = new Set<string>();
  /** The last version read or written per tenant (its ETag for the next compare-and-swap). */
  private readonly known = new Map<string, { doc: LedgerDoc; etag: string }>();

  constructor(
    private readonly io: ObjectIo,
    private readonly keys: S3OnlyKeys,
    private readonly nodes: NodeRegistry,
    private readonly settle: SettleIntent,
  ) {}

  /** The tenant's retained bytes, with any intent of a gone writer settled first. */
  async bytes(tenant: string): Promise<number> {
    return (await this.usage(tenant)).bytes;
  }

  /** The tenant's retained bytes and blob count, with any intent of a gone writer settled first. */
  async usage(tenant: string): Promise<{ bytes: number; objects: number }> {
    // In this node's queue for the tenant: never a read beside this node's own write of the
    // ledger (a server may serve a half-written object then; s3rver does).
    const read = await this.local.run(tenant, () => this.read(tenant));
    const doc = (await this.hasStale(read.doc, tenant)) ? await this.change(tenant, () => {}) : read.doc;
    return { bytes: doc.bytes, objects: doc.blobs };
  }

  /**
   * Reserves a blob's bytes for the tenant and its inventory position: throws `quotaExceeded()`
   * when they would take the tenant past `quotaBytes` (nothing is written then).
   */
  async reserve(tenant: string, id: string, size: number, quotaBytes: number | undefined, quotaExceeded: (retainedBytes: number) => Error): Promise<number> {
    let seq = 0;
    await this.begin(tenant, id, (doc) => {
      if (quotaBytes !== undefined && doc.bytes + size > quotaBytes) throw quotaExceeded(doc.bytes);
      // Microseconds of the clock, or on from the tenant's last: strictly increasing per tenant,
      // and across tenants in the order of the nodes' clocks (as one sequence would be).
      seq = Math.max(doc.nextSeq, Date.now() * 1000);
      doc.nextSeq = seq + 1;
      doc.bytes += size;
      doc.blobs += 1;
      doc.pending.push(this.intent('add', id, size, seq));
    });
    return seq;
  }

  /** Frees a blob's bytes at once and records the removal in progress. */
  async beginRemoval(tenant: string, id: string, size: number, seq: number): Promise<void> {
    await this.begin(tenant, id, (doc) => {
      doc.bytes -= size;
      doc.blobs -= 1;
      doc.pending.push(this.intent('remove', id, size, seq));
    });
  }

  /**
   * The write of `id` is done. Its change stands: the intent is dropped with the ledger's next
   * write (another publication's, or a flush a moment later), which saves a round trip per
   * publication; until then a crash leaves an intent that settles as standing. With `undo` it did
   * not happen: its change of bytes goes back at once.
   */
  async finish(tenant: string, id: string, undo = false): Promise<void> {
    const key = `${tenant}\0${id}`;
    if (!undo) {
      this.inFlight.delete(key);
      this.done.add(key);
      this.flushSoon(tenant);
      return;
    }
    try {
      await this.change(tenant, (doc) => {
        const i = doc.pending.findIndex((p) => p.id === id && p.node === this.nodes.nodeId && p.boot === this.nodes.boot);
        if (i < 0) return;
        const [intent] = doc.pending.splice(i, 1);
        revert(doc, intent!);
      });
    } finally {
      this.inFlight.delete(key);
    }
  }

  private flushSoon(tenant: string): void {
    if (this.flushing.has(tenant)) return;
    this.flushing.add(tenant);
    setTimeout(() => {
      this.flushing.delete(tenant);
      // A failed flush leaves the intents to the next write, which drops them all the same.
      this.change(tenant, () => {}).catch(() => {});
    }, FLUSH_MS).unref();
  }

  /**
   * The write of `id` failed with an unknown outcome (the holding may or may not have been
   * written): its intent is left for the next writer of the ledger to settle from the bucket.
   */
  abandon(tenant: string, id: string): void {
    this.inFlight.delete(`${tenant}\0${id}`);
  }

  /** Records an intent on `id` (after any other writer's on it is done) with its change. */
  private async begin(tenant: string, id: string, apply: (doc: LedgerDoc) => void): Promise<void> {
    const key = `${tenant}\0${id}`;
    this.inFlight.add(key);
    try {
      await this.change(tenant, (doc) => {
        this.waitForOthers(doc, id);
        apply(doc);
      });
    } catch (err) {
      this.inFlight.delete(key);
      throw err;
    }
  }

  private intent(op: Intent['op'], id: string, size: number, seq: number): Intent {
    return { op, id, size, seq, node: this.nodes.nodeId, boot: this.nodes.boot, at: Date.now() };
  }

  private waitForOthers(doc: LedgerDoc, id: string): void {
    if (doc.pending.some((p) => p.id === id)) throw new Busy(`another write of ${id} is in progress`);
  }

  private async hasStale(doc: LedgerDoc, tenant: string): Promise<boolean> {
    for (const p of doc.pending) if (!(await this.writing(tenant, p))) return true;
    return false;
  }

  /** Whether the intent's writer may still be at work: a write of this process in flight, or a live node's. */
  private async writing(tenant: string, intent: Intent): Promise<boolean> {
    if (intent.node === this.nodes.nodeId && intent.boot === this.nodes.boot) return this.inFlight.has(`${tenant}\0${intent.id}`);
    return this.nodes.isLive(intent.node, intent.boot);
  }

  /**
   * Reads, settles gone writers' intents, applies `apply` and writes back by compare-and-swap,
   * until it holds. While another write of the same blob is under way (Busy) it waits outside the
   * tenant's queue: that write's own end needs the queue to record itself.
   */
  private async change(tenant: string, apply: (doc: LedgerDoc) => void): Promise<LedgerDoc> {
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.local.run(tenant, () => this.swap(tenant, apply, started));
      } catch (err) {
        if (!(err instanceof Busy) || Date.now() - started > BUSY_WAIT_MS) throw err;
        this.known.delete(tenant);
        await sleep(Math.min(500, 20 * 2 ** Math.min(attempt, 5)));
      }
    }
  }

  /** One turn of `change` in the tenant's queue: compare-and-swap until it holds (Busy goes out to wait). */
  private async swap(tenant: string, apply: (doc: LedgerDoc) => void, started: number): Promise<LedgerDoc> {
    for (let attempt = 0; ; attempt++) {
      const read = this.known.get(tenant) ?? (await this.read(tenant));
      const doc: LedgerDoc = { ...read.doc, pending: [...read.doc.pending] };
      const dropped: string[] = [];
      for (const intent of [...doc.pending]) {
        const key = `${tenant}\0${intent.id}`;
        if (intent.node === this.nodes.nodeId && intent.boot === this.nodes.boot && this.done.has(key)) {
          dropped.push(key);
        } else if (await this.writing(tenant, intent)) {
          continue;
        } else if ((await this.settle(tenant, intent)) === 'undone') {
          revert(doc, intent);
        }
        doc.pending.splice(doc.pending.indexOf(intent), 1);
      }
      apply(doc);
      const body = JSON.stringify(doc);
      // Nothing changed (a flush that another write got to first, a read of the bytes): no write.
      if (read.etag && body === JSON.stringify(read.doc)) return read.doc;
      const written = await this.io.put(this.keys.ledger(tenant), Buffer.from(body), read.etag ? { ifMatch: read.etag } : { ifNoneMatch: true });
      if (written !== 'refused') {
        this.known.set(tenant, { doc, etag: written.etag });
        for (const key of dropped) this.done.delete(key);
        return doc;
      }
      // Another node changed it first: read it again.
      this.known.delete(tenant);
      if (Date.now() - started > BUSY_WAIT_MS) throw new Error(`ledger of tenant ${JSON.stringify(tenant)}: compare-and-swap lost for ${BUSY_WAIT_MS} ms`);
      await sleep(Math.min(200, 5 * 2 ** Math.min(attempt, 5)));
    }
  }

  private async read(tenant: string): Promise<{ doc: LedgerDoc; etag: string }> {
    const got = await this.io.get(this.keys.ledger(tenant));
    if (!got) return { doc: { v: 1, bytes: 0, blobs: 0, nextSeq: 1, pending: [] }, etag: '' };
    const doc = JSON.parse(got.body.toString('utf8')) as LedgerDoc;
    if (doc.v !== 1) throw new Error(`ledger of tenant ${JSON.stringify(tenant)}: version ${String(doc.v)} is not known to this svc`);
    return { doc, etag: got.etag };
  }
}

function revert(doc: LedgerDoc, intent: Intent): void {
  const sign = intent.op === 'add' ? -1 : 1;
  doc.bytes += sign * intent.size;
  doc.blobs += sign;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
