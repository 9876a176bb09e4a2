// A secret kept in the units of work (engine/store/unit-store.ts) under a name: the node's LMDB
// under SVC_FS_ROOT on fs, PostgreSQL on pg-s3 (every node reads the same row). The first one
// kept is the one every later start and every node reads; it needs no table of its own.
import type { DevSecretStore } from './dev-secret.js';
import { type UnitStore, table } from './unit-store.js';

const SECRETS = table<{ secret: string; createdAt: number }, string>('svc_kept_secrets');

export class UnitSecretStore implements DevSecretStore {
  readonly location: string;

  constructor(
    private readonly units: UnitStore,
    private readonly name: string,
  ) {
    this.location = `the catalog (${units.shared ? 'shared units' : "this node's units"}, ${SECRETS.name} ${name})`;
  }

  /** The kept secret, or `candidate` kept now; a node that loses the race reads the winner's (its unit runs again). */
  keep(candidate: string): Promise<{ secret: string; created: boolean }> {
    return this.units.run(async (unit) => {
      const kept = await unit.get(SECRETS, this.name);
      if (kept) return { secret: kept.secret, created: false };
      unit.put(SECRETS, this.name, { secret: candidate, createdAt: Date.now() });
      return { secret: candidate, created: true };
    });
  }
}
