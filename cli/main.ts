// The client commands of `svc` (put, get, stat, ls, gc): dispatch, usage, errors and exit codes
// (0 done, 1 failed, 2 bad usage). Results go to stdout, everything else to stderr.

import { ApiError, CliError, UsageError, describe } from './errors.js';
import { gc } from './gc.js';
import { get } from './get.js';
import { closeConnections } from './http.js';
import { ls, stat } from './inventory.js';
import { put } from './put.js';

export const CLIENT_USAGE = `Client commands (server: --server URL, else $SVC_SERVER, else http://127.0.0.1:8081):
  svc put FILE [--type MEDIA_TYPE] [--part-size SIZE] [--threshold SIZE] [--state FILE]
                   upload FILE and print its blob id; files of --threshold (64MiB) or more go
                   through a resumable session in --part-size (8MiB) parts, resumed after
                   failures and after the client itself was stopped
  svc get ID [-o FILE]
                   write the blob to stdout or FILE (resuming a partial FILE), checked against ID
  svc stat ID      the blob's headers and summary as JSON
  svc ls [--limit N] [--all]
                   the inventory, newest first: id, size, media type, creation time
  svc gc [mark|quarantine|purge|run] [--apply] [--min-age DURATION] [--quarantine-age DURATION]
                   run garbage collection on the server (default: run, every phase) and print
                   its report as JSON; a dry run unless --apply; the ages (e.g. 0s) replace
                   SVC_GC_MIN_AGE and SVC_GC_QUARANTINE_AGE for this run only, logged by the server

Dropped connections, 5xx answers and server restarts are retried with backoff for up to
$SVC_RETRY_SECONDS (120) without progress; a refused first connection (no server there) fails
at once. Exit codes: 0 done, 1 failed, 2 bad usage.
More in docs/cli.md.
`;

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = { put, get, stat, ls, gc };

export function isClientCommand(command: string | undefined): boolean {
  return command !== undefined && Object.hasOwn(COMMANDS, command);
}

export async function run(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const handler = command === undefined ? undefined : COMMANDS[command];
  try {
    if (!handler) throw new UsageError(`unknown command "${command ?? ''}"`);
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(CLIENT_USAGE);
      return 0;
    }
    return await handler(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`svc: ${err.message}\n\n${CLIENT_USAGE}`);
      return 2;
    }
    if (err instanceof ApiError || err instanceof CliError) {
      process.stderr.write(`svc: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`svc: ${describe(err)}\n`);
    return 1;
  } finally {
    closeConnections();
  }
}
