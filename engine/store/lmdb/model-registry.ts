import type { Database } from 'lmdb';
import type { ModelRegistration, ModelRegistry, RegistryWatch, RemoveOutcome } from '../model-registry.js';
import type { CatalogEnv } from './env.js';

/** A registration as stored: records written before generations existed have none. */
type StoredRegistration = Omit<ModelRegistration, 'generation'> & { generation?: number };

const LAST_GENERATION = 'last';

/**
 * The model registry in the node's LMDB (fs): registrations by name in `models` (as before
 * generations: older records read as generation 0), the last generation handed out in
 * `model_generations`. Each write is one LMDB transaction.
 */
export class LmdbModelRegistry implements ModelRegistry {
  private readonly records: Database<StoredRegistration, string>;
  private readonly generations: Database<number, string>;

  constructor(env: CatalogEnv) {
    this.records = env.database<StoredRegistration, string>('models');
    this.generations = env.database<number, string>('model_generations');
  }

  async list(): Promise<ModelRegistration[]> {
    return [...this.records.getRange({})].map(({ value }) => registrationOf(value));
  }

  put(name: string, uri: string, registeredAt: string): Promise<{ registration: ModelRegistration; created: boolean }> {
    return this.records.transaction(() => {
      const created = this.records.get(name) === undefined;
      const generation = (this.generations.get(LAST_GENERATION) ?? 0) + 1;
      const registration: ModelRegistration = { modelName: name, uri, registeredAt, generation };
      this.generations.put(LAST_GENERATION, generation);
      this.records.put(name, registration);
      return { registration, created };
    });
  }

  remove(name: string, generation: number): Promise<RemoveOutcome> {
    return this.records.transaction(() => {
      const stored = this.records.get(name);
      const current = stored && registrationOf(stored);
      if (!current || current.generation !== generation) return { current };
      this.records.remove(name);
      return { removed: current };
    });
  }

  /** Every change goes through this node's one ModelService: nothing to tell it. */
  watch(): RegistryWatch {
    return { close: async () => {} };
  }
}

function registrationOf(stored: StoredRegistration): ModelRegistration {
  return { modelName: stored.modelName, uri: stored.uri, registeredAt: stored.registeredAt, generation: stored.generation ?? 0 };
}
