// Registered models (name → bundle URI), kept in the catalog's `models` database so that
// registrations survive restarts.

import type { Database } from 'lmdb';
import type { CatalogEnv } from '../store/catalog.js';

export interface Registration {
  modelName: string;
  uri: string;
  registeredAt: string;
}

export class ModelRegistry {
  private readonly db: Database<Registration, string>;

  constructor(catalog: CatalogEnv) {
    this.db = catalog.database<Registration, string>('models');
  }

  get(name: string): Registration | undefined {
    return this.db.get(name);
  }

  /** Every registration, by name. */
  list(): Registration[] {
    return [...this.db.getRange()].map((e) => e.value);
  }

  names(): string[] {
    return [...this.db.getKeys()] as string[];
  }

  async put(registration: Registration): Promise<void> {
    await this.db.put(registration.modelName, registration);
  }

  async remove(name: string): Promise<void> {
    await this.db.remove(name);
  }
}
