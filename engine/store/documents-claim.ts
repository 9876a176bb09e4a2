// Where only one node may serve the document platform (s3: its records are in that node's LMDB,
// its data directory), the claim that says which: a lease in the shared store, renewed by its
// holder, taken over once it lapses, handed on by an operator (svc nodes release-documents).
// The implementation is engine/store/s3-only/documents-node.ts.

/** The claim as read from the store. */
export interface DocumentsClaimRead {
  nodeId: string;
  /** The holder's process (a node started again is another boot); absent in claims of older versions. */
  boot?: string;
  /** The holder stopped cleanly at this time (its clock): the claim waits for it, it never lapses. */
  stoppedAt?: number;
  /** Not renewed within SVC_DOCUMENTS_LEASE_TTL, by the store's clock: any node may take it. */
  lapsed: boolean;
  /** The version read: a take-over replaces exactly this one (compare-and-swap). */
  version: string;
}

/** Why this node does not serve the document platform now. */
export type DocumentsElsewhere =
  | { kind: 'held'; nodeId: string; stoppedAt?: number }
  /** This node holds the claim but its renewal has not reached the store within the lease. */
  | { kind: 'lapsed' }
  /** The claim was not read yet (the store did not answer since the start). */
  | { kind: 'unknown' };

export interface DocumentsClaim {
  /** Whether this node serves the document platform now: it holds the claim and its lease has not lapsed. */
  serving(): boolean;
  /** Who does instead, as last read (while serving() is false). */
  elsewhere(): DocumentsElsewhere;
  /** The node last known to hold the claim (this one while it does). */
  holderId(): string | undefined;
  /** The claim now (undefined: nobody holds it). */
  read(): Promise<DocumentsClaimRead | undefined>;
  /**
   * This node takes the claim, replacing exactly `read` (undefined: taking it where none is).
   * False when it changed since `read` (another node took or renewed it).
   */
  takeFrom(read: DocumentsClaimRead | undefined): Promise<boolean>;
}

/** The holder renews every 5 s, at least three times per lease (SVC_DOCUMENTS_LEASE_TTL). */
export function claimRenewalMs(leaseMs: number): number {
  return Math.min(5000, leaseMs / 3);
}
