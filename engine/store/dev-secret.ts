// Where the generated development secret is kept (SVC_DEV_SHARED_SECRET unset): the first one made
// is the one every later start reads and, where the store is shared (pg-s3), every node reads, so a
// development token minted on one node verifies on all of them.

export interface DevSecretStore {
  /** Where the secret is kept, for the log. */
  readonly location: string;
  /** The secret kept, or `candidate` when none was, kept now (`created`); concurrent callers all get the first kept. */
  keep(candidate: string): Promise<{ secret: string; created: boolean }>;
}
