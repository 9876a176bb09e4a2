// Registered models (name → bundle URI), kept in the catalog's `models` database so that
// registrations survive restarts.

import type { KeyedCatalog } from '../store/index.js';

export interface Registration {
  modelName: string;
  uri: string;
  registeredAt: string;
}

export class ModelRegistry {
  constructor(private readonly db: KeyedCatalog<Registration>) {}

  get(name: string): Registration | undefined {
    return this.db.get(name);
  }

  /** Every registration, by name. */
  list(): Registration[] {
    return [...this.db.entries()].map((e) => e.record);
  }

  names(): string[] {
    return [...this.db.keys()];
  }

  async put(registration: Registration): Promise<void> {
    await this.db.put(registration.modelName, registration);
  }

  async remove(name: string): Promise<void> {
    await this.db.remove(name);
  }
}
