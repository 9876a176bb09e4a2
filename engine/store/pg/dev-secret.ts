import type { DevSecretStore } from '../dev-secret.js';
import type { PgPool } from './pool.js';

/** The development secret in PostgreSQL (pg-s3, schema v7): one row every node reads. */
export class PgDevSecretStore implements DevSecretStore {
  readonly location = 'the PostgreSQL catalog (table dev_secret)';

  constructor(private readonly sql: PgPool) {}

  async keep(candidate: string): Promise<{ secret: string; created: boolean }> {
    const inserted = await this.sql`INSERT INTO dev_secret (secret) VALUES (${candidate}) ON CONFLICT (only_row) DO NOTHING RETURNING 1`;
    if (inserted.length > 0) return { secret: candidate, created: true };
    // Another node's insert won: a statement of its own sees it (the insert's snapshot may not).
    const [row] = await this.sql<{ secret: string }[]>`SELECT secret FROM dev_secret`;
    return { secret: row!.secret, created: false };
  }
}
