// The client commands of `svc` (put, get, stat, ls, gc, nodes, legacy, models): dispatch, usage, errors and exit codes
// (0 done, 1 failed, 2 bad usage). Results go to stdout, everything else to stderr.

import { type Command, parseCommandLine } from './args.js';
import { ApiError, CliError, UsageError, describe } from './errors.js';
import { gc } from './gc.js';
import { get } from './get.js';
import { closeConnections } from './http.js';
import { ls, stat } from './inventory.js';
import { legacy } from './legacy.js';
import { models } from './models.js';
import { nodes } from './nodes.js';
import { put } from './put.js';

const COMMANDS: Record<string, Command> = { put, get, stat, ls, gc, nodes, legacy, models };

const FOOTER = `
Every client command takes --server URL (else $SVC_SERVER, else http://127.0.0.1:8081),
--token TOKEN (else $SVC_TOKEN: a bearer token, for a server with SVC_SECURITY_ENABLED=true) and
--help. Dropped connections, 5xx answers and server restarts are retried with backoff for up to
$SVC_RETRY_SECONDS (120) without progress; a refused first connection (no server there) fails
at once. Exit codes: 0 done, 1 failed, 2 bad usage. More in docs/cli.md.
`;

/** Every client command's synopsis. */
const CLIENT_USAGE = `Client commands:\n${Object.values(COMMANDS).map((c) => c.usage).join('')}${FOOTER}`;

/** One command's synopsis (`svc put --help`). */
function usageOf(command: Command): string {
  return `Usage:\n${command.usage}${FOOTER}`;
}

export function isClientCommand(command: string | undefined): boolean {
  return command !== undefined && Object.hasOwn(COMMANDS, command);
}

export async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const command = name !== undefined && isClientCommand(name) ? COMMANDS[name] : undefined;
  try {
    if (!command) throw new UsageError(`unknown command "${name ?? ''}"`);
    const parsed = parseCommandLine(rest, command.options);
    if (parsed.values.help === true) {
      process.stdout.write(usageOf(command));
      return 0;
    }
    return await command.run(parsed);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`svc: ${err.message}\n\n${command ? usageOf(command) : CLIENT_USAGE}`);
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
