// The object's SHA-256 of a resumable session, kept on this node's scanning thread between parts
// (docs/architecture.md, "Resumable uploads"), and rebuilt from the session's recorded blocks and
// staged tail when this node does not hold it at the session's offset (after a restart, or a
// shared session whose parts went to other nodes meanwhile).

import type { StreamScanner } from '../cas/index.js';
import type { Logger } from '../base/log.js';
import type { BlockStore, SessionRecord, StoredBlock, TailStaging, UploadCatalog } from '../store/index.js';

interface KeptHashesDeps {
  scanner: StreamScanner;
  blocks: BlockStore;
  ledger: UploadCatalog;
  staging: TailStaging;
  log: Logger;
}

export class KeptHashes {
  /** By session id: the offset the kept hash covers (a shared session may have moved on elsewhere). */
  private readonly at = new Map<string, number>();
  /** Hashes being rebuilt: a retried part waits for the same rebuild. */
  private readonly rebuilding = new Map<string, Promise<void>>();

  constructor(private readonly deps: KeptHashesDeps) {}

  /** The kept hash now covers the session up to `offset`. */
  keptAt(id: string, offset: number): void {
    this.at.set(id, offset);
  }

  /** Resolves once this node holds the session's hash at its offset (rebuilt if it must be). */
  ensure(session: SessionRecord): Promise<void> {
    const running = this.rebuilding.get(session.id);
    if (running) return running;
    if (session.offset === 0) return Promise.resolve();
    if (this.deps.scanner.hasKept(session.id)) {
      // A shared session's parts may have gone to other nodes since this one kept its hash.
      if (!this.deps.ledger.shared || this.at.get(session.id) === session.offset) return Promise.resolve();
      this.drop(session.id);
    }
    const rebuild = this.rebuild(session)
      .then(() => void this.at.set(session.id, session.offset))
      .finally(() => this.rebuilding.delete(session.id));
    this.rebuilding.set(session.id, rebuild);
    return rebuild;
  }

  drop(id: string): void {
    this.deps.scanner.dropKept(id);
    this.at.delete(id);
  }

  private async rebuild(session: SessionRecord): Promise<void> {
    const { scanner, blocks: store, ledger, staging } = this.deps;
    const started = performance.now();
    const total = session.offset;
    let scanned = 0;
    let failure: Error | undefined;
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => (done = resolve));
    const stream = scanner.open(true, null, 1, (n) => {
      scanned = n;
      if (scanned === total) done();
    }, (err) => {
      failure = err;
      done();
    }, { key: session.id, skip: 0 });
    const pieces: Array<() => Promise<Uint8Array>> = (await ledger.blocks(session.id)).map((b: StoredBlock) => () => store.read(b.hex, b.size));
    pieces.push(() => staging.read(session.id, session.tail));
    try {
      let fed = 0;
      for (const read of pieces) {
        const bytes = await read();
        fed += bytes.length;
        if (bytes.length) stream.update(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length), 0, bytes.length, false);
      }
      // Stored or staged bytes that do not add up to the offset would never finish the rebuild.
      if (fed !== total) throw new Error(`the session's blocks and staged tail hold ${fed} bytes, its offset is ${total}`);
      await finished;
      if (failure) throw failure;
    } catch (err) {
      this.drop(session.id);
      throw err;
    } finally {
      stream.discard();
    }
    this.deps.log.info('uploads: object hash rebuilt', { session: session.id, bytes: total, ms: Math.round(performance.now() - started) });
  }
}
