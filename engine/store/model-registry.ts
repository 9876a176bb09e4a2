// The model registry: which bundle URI each model name serves. On fs it is the node's LMDB
// (lmdb/model-registry.ts); on pg-s3 a table every node shares (pg/model-registry.ts), so that a
// registration made on one node is served by all. Loaded models are not kept here: each node
// loads a bundle on first use and drops its copy when the registration's generation changes.

export interface ModelRegistration {
  modelName: string;
  uri: string;
  registeredAt: string;
  /**
   * Different for every write of a registration, a re-registration of the same URI included (the
   * bundle behind it may have changed): a node's loaded copy is current while its generation is
   * the registry's. Compared for equality only. 0 on registrations stored before generations existed.
   */
  generation: number;
}

export type RemoveOutcome =
  | { removed: ModelRegistration }
  /** The precondition failed: what the name holds instead (undefined: nothing). */
  | { current: ModelRegistration | undefined };

/** A subscription to the registry's changes (watch). */
export interface RegistryWatch {
  close(): Promise<void>;
}

/**
 * Each method is one unit: it commits atomically or not at all, and concurrent calls on any nodes
 * sharing the store are serialized per name (the last committed write wins).
 */
export interface ModelRegistry {
  /** Every registration, in name order. */
  list(): Promise<ModelRegistration[]>;
  /**
   * Registers `uri` under `name`, replacing what it held. `created`: no registration of that name
   * existed when this one committed.
   */
  put(name: string, uri: string, registeredAt: string): Promise<{ registration: ModelRegistration; created: boolean }>;
  /** Removes `name` if its registration is still `generation`. */
  remove(name: string, generation: number): Promise<RemoveOutcome>;
  /**
   * Calls `onChange` whenever registrations may have changed through another node; the caller then
   * reads `list()` again. A shared store calls it within a few seconds of any change, even when a
   * notification is lost (a periodic resync, and after each reconnection); a single node's store,
   * whose changes all go through its one owner, never calls it.
   */
  watch(onChange: () => void): RegistryWatch;
}
