// The configured legacy repositories (SVC_LEGACY_REPOS): their roots checked at start, one
// LegacyRepository each (with its two lazy indexes), and their metrics.

import fs from 'node:fs';
import path from 'node:path';
import type { Registry } from 'prom-client';
import { ConfigError, type LegacyRepoConfig } from '../base/config.js';
import type { Logger } from '../base/log.js';
import { LegacyMetrics } from './metrics.js';
import { LegacyRepository } from './repository.js';

export class LegacyRepositories {
  readonly metrics: LegacyMetrics;
  private readonly repos = new Map<string, LegacyRepository>();

  /** Each root resolved (realpath): it must be an existing directory (ConfigError otherwise). */
  static check(configs: readonly LegacyRepoConfig[], log: Logger): LegacyRepoConfig[] {
    return configs.map(({ name, root }) => {
      let real: string;
      try {
        real = fs.realpathSync(root);
      } catch (err) {
        throw new ConfigError(`SVC_LEGACY_REPOS: the root of repository "${name}" (${root}) cannot be resolved (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      }
      if (!fs.statSync(real).isDirectory()) throw new ConfigError(`SVC_LEGACY_REPOS: the root of repository "${name}" (${root}) is not a directory`);
      for (const tree of ['metadata', 'binaries']) {
        if (!fs.existsSync(path.join(real, tree))) log.warn('legacy repository without a tree', { repo: name, root: real, missing: `${tree}/` });
      }
      return { name, root: real };
    });
  }

  constructor(checked: readonly LegacyRepoConfig[], registry: Registry, log: Logger) {
    this.metrics = new LegacyMetrics(registry, checked.map((r) => r.name));
    for (const { name, root } of checked) this.repos.set(name, new LegacyRepository(name, root, this.metrics, log));
  }

  /** The repository configured under exactly this name. */
  get(name: string): LegacyRepository | undefined {
    return this.repos.get(name);
  }

  get names(): string[] {
    return [...this.repos.keys()];
  }
}
