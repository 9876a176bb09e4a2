// Types of test/helpers/job-kinds.mjs (plain JavaScript: the kill -9 test's child process loads it without a build).
import type { Database } from 'lmdb';
import type { CatalogEnv } from '../../dist/engine/store/index.js';
import type { Table } from '../../dist/engine/store/unit-store.js';

export const EFFECTS: Table<number, string>;
export function effectsDb(env: CatalogEnv): Database<number, string>;
export function effectCount(env: CatalogEnv, jobId: string): number;
export function defineKinds(queue: unknown, hooks?: { beforeApply?: (job: unknown, output: unknown) => void | Promise<void> }): void;
