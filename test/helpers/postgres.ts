// A throwaway PostgreSQL cluster per test file: initdb into a temporary directory, a free loopback
// port, a non-root user when the tests run as root. The logic lives in bench/postgres-server.ts
// so that the benchmarks start their clusters the same way; this is the tests' entry point.
export { startPostgres, requirePostgres, findPostgresBinDir, POSTGRES_MISSING } from '../../bench/postgres-server.js';
export type { PgServer } from '../../bench/postgres-server.js';
