// What garbage collection must keep besides published manifests: each module that references
// blocks on its own (resumable sessions, document content) registers a source of their digests.

export interface BlockRoots {
  /** The owner, for GC reports. */
  name: string;
  /**
   * Whether the references outlive the process (kept in the data directory, not only in memory).
   * A node of a shared catalog holding any is a root holder: GC waits for it even while it is down.
   */
  persistent: boolean;
  /** Every block digest (32 bytes) the owner still references; read in one pass, in any order. */
  digests(): Iterable<Buffer> | AsyncIterable<Buffer>;
}
