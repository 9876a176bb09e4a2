// `svc catalog rebuild [--force]`: a server-side command (it reads the SVC_* variables as `svc
// serve` does and talks to PostgreSQL and S3 itself, not to a server).
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../engine/base/config.js';
import { CatalogNotEmpty, rebuildCatalog } from '../engine/store/catalog-rebuild.js';
import { parseArgsMessage } from '../cli/args.js';

export const CATALOG_USAGE = `Usage: svc catalog rebuild [--force]

Recreates the pg-s3 catalog (SVC_PG_URL) from the bucket alone (SVC_S3_BUCKET, SVC_S3_PREFIX):
the holding every publication journals under holdings/, and the block objects. Stop every svc
node on the database first. Progress goes to stderr; the last line on stdout is a JSON summary
{ blobs, holdings, blocks, bytes, tenants, restoredBlocks, missingBlocks, unreadableHoldings }.

The database must hold no manifests (exit 1 otherwise).

Options:
  --force      empty the catalog's tables first, then rebuild
  -h, --help   this text
`;

/** Runs `svc catalog ARGS`; resolves to the exit code. */
export async function runCatalogCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: true });
  } catch (err) {
    process.stderr.write(`svc catalog: ${parseArgsMessage(err)}\n\n${CATALOG_USAGE}`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(CATALOG_USAGE);
    return 0;
  }
  const [action, ...extra] = parsed.positionals;
  if (action !== 'rebuild' || extra.length > 0) {
    process.stderr.write(`svc catalog: ${action === undefined ? 'which action? (rebuild)' : `unexpected "${[action, ...extra].join(' ')}"`}\n\n${CATALOG_USAGE}`);
    return 2;
  }
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`svc: invalid configuration: ${err.message}\n`);
    return 2;
  }
  if (config.blobBackend !== 'pg-s3') {
    process.stderr.write(`svc catalog rebuild: SVC_BLOB_BACKEND is ${config.blobBackend}; only the pg-s3 catalog is rebuilt from its bucket\n`);
    return 2;
  }
  try {
    const report = await rebuildCatalog(config, { force: parsed.values.force === true, progress: (line) => process.stderr.write(`svc catalog rebuild: ${line}\n`) });
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return 0;
  } catch (err) {
    if (!(err instanceof CatalogNotEmpty)) throw err;
    process.stderr.write(`svc catalog rebuild: ${err.message}\n`);
    return 1;
  }
}
