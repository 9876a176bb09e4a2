// What a collector of a shared catalog (PostgreSQL, several nodes) needs of it: one run at a time
// across nodes, a mark set, the block records' states (live → quarantined → purged, or back to
// live when referenced again), the nodes' heartbeats (each with the start of its oldest open
// upload: the purge fence across nodes), the root holders (nodes whose data directory holds
// references only they can mark; known while they are down) and the runs' reports.

import type { BlockRoots } from '../base/block-roots.js';

export interface KeyedBlock {
  key: Buffer;
  size: number;
}

export interface NodeRecord {
  nodeId: string;
  address: string;
  lastSeenAt: number;
  /** Start (ms) of the node's oldest upload that may still reference blocks; null: none. */
  oldestIngestAt: number | null;
}

/** A node the catalog knows of (heartbeats, root holders), live or down; forgotten ones are left out. */
export interface ClusterNode {
  nodeId: string;
  /** Where its blob API listened at its last heartbeat ('' before it listened). */
  address: string;
  /** Its last heartbeat (ms, the catalog's clock). */
  lastSeenAt: number;
  /** A heartbeat within SVC_NODE_TTL. */
  live: boolean;
  /** Since when (ms) it holds references only it can mark (its data directory's); undefined: none. */
  rootHolderSince?: number;
  /** What it said of itself at its last heartbeat (its traffic, capacity and health: engine/ops/snapshot.ts). */
  summary?: Record<string, unknown>;
}

/** What forgetting a node did: only a node that is down is forgotten. */
export type ForgetOutcome = { outcome: 'forgotten'; node: ClusterNode } | { outcome: 'live'; node: ClusterNode } | { outcome: 'unknown' };

export interface SharedGcCatalog {
  /**
   * The roots of this node (optional): a catalog whose runs cannot see other nodes' roots (S3-only)
   * has each node keep its own roots' blocks out of quarantine and hold back purges until it has.
   */
  adoptRoots?(roots: readonly BlockRoots[]): void;
  /** One run at a time across nodes: a lock that its holder's death releases; undefined when another holds it. */
  lock(): Promise<{ release(): Promise<void> } | undefined>;
  /** Empties the mark set and fills it with every published manifest's blocks and those of the resumable sessions the catalog keeps (Open or Committing); the count marked. */
  markManifests(): Promise<number>;
  /** Adds digests (a block-roots source's) to the mark set. */
  mark(keys: readonly Buffer[]): Promise<void>;
  markedCount(): Promise<number>;
  clearMarks(): Promise<void>;
  /** Live blocks not marked and not referenced since `before` (ms), after `after`, in key order. */
  candidates(before: number, limit: number, after?: Buffer): Promise<KeyedBlock[]>;
  /**
   * The candidates among `keys` (still live, unmarked, not referenced since `before`) become
   * quarantined, not yet stamped (the caller moves their bytes, then stamps them); they leave
   * the totals. Returns those that changed.
   */
  beginQuarantine(keys: readonly Buffer[], before: number): Promise<KeyedBlock[]>;
  /** Stamps quarantined blocks with the time their bytes were moved (now); unstamped ones found later get stamped too. */
  stampQuarantined(keys?: readonly Buffer[]): Promise<void>;
  /** Quarantined blocks that are marked again become live (and count again); returns them, for their bytes to move back. */
  reviveMarked(limit: number): Promise<KeyedBlock[]>;
  /** How many quarantined, unmarked blocks are stamped before `stampedBefore` (a dry run's purge). */
  countPurgeable(stampedBefore: number): Promise<{ count: number; bytes: number }>;
  /** Removes the records of quarantined, unmarked blocks stamped before `stampedBefore`; returns them (their bytes go next). */
  takePurgeable(stampedBefore: number, limit: number): Promise<KeyedBlock[]>;
  /** Which of `keys` (hex) are in the mark set. */
  markedAmong(keys: readonly Buffer[]): Promise<Set<string>>;
  /** The state of each of `keys` that has a record. */
  states(keys: readonly Buffer[]): Promise<Map<string, 'live' | 'quarantined'>>;
  quarantinedCount(): Promise<number>;
  saveRun(runId: string, report: unknown, keep: number): Promise<void>;
  lastRun<R>(): Promise<R | undefined>;
  /**
   * This node is alive: its address and how long ago (ms, its own clock) its oldest open upload
   * started (null: none); the catalog turns that into a time on its clock. Returns the epoch of a
   * run whose marking is open and that this node has not marked for yet (its roots are wanted).
   */
  heartbeat(nodeId: string, address: string, oldestIngestAgeMs: number | null, summary?: Record<string, unknown>): Promise<{ markEpoch?: number }>;
  /**
   * Ends the LISTEN connections of nodes whose heartbeat is older than `ttlMs` (pg-s3): a stopped
   * node's connection stops reading and would hold PostgreSQL's notification queue until it
   * fills, and with it every commit of the cluster. Returns how many were ended.
   */
  endListenersOfDownNodes?(ttlMs: number): Promise<number>;
  /** A run's marking opens (after the manifests are marked): nodes add their roots for the new epoch. */
  openMarking(): Promise<number>;
  /** The marking of `epoch` is over: nodes stop being asked. */
  closeMarking(epoch: number): Promise<void>;
  /** `nodeId` has added all its roots for `epoch`. */
  markedBy(nodeId: string, epoch: number): Promise<void>;
  /** Nodes seen within `ttlMs` that have not marked for `epoch`. */
  unmarkedNodes(epoch: number, ttlMs: number): Promise<string[]>;
  /** Nodes seen within `ttlMs`. */
  nodes(ttlMs: number): Promise<NodeRecord[]>;
  /**
   * `nodeId` keeps references to blocks that only it can mark (its data directory's): from now on
   * runs quarantine and purge nothing while it has not marked for them, live or down, until it is
   * forgotten. Idempotent. Returns when it had been forgotten (its references' blocks may be gone).
   */
  registerRootHolder(nodeId: string): Promise<{ forgottenAt?: number }>;
  /** Whether `nodeId` is a root holder (not forgotten since it registered). */
  isRootHolder(nodeId: string): Promise<boolean>;
  /** Root holders that have not added their roots to the marks of `epoch` (a catalog whose nodes do not mark for a run, S3-only: those not live). */
  rootHoldersUnmarked(epoch: number, ttlMs: number): Promise<ClusterNode[]>;
  /** Every node known and not forgotten, live or down, in id order. */
  knownNodes(ttlMs: number): Promise<ClusterNode[]>;
  /** The operator declares `nodeId` gone for good: refused while it is live (seen within `ttlMs`). */
  forgetNode(nodeId: string, ttlMs: number): Promise<ForgetOutcome>;
  /** The catalog's clock (ms): every node compares ages against it. */
  now(): Promise<number>;
}
