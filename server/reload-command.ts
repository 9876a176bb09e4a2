// `svc reload`: makes the server of this data directory (SVC_FS_ROOT) read SVC_TENANT_POLICY_FILE
// again, by sending SIGHUP to the process that holds the directory's lock (its pid is in
// svc.lock). Only that process is signalled: not npm, not a shell wrapping it, not another server.
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../engine/base/config.js';
import { dataDirHolder } from '../engine/store/index.js';
import { parseArgsMessage } from '../cli/args.js';

export const RELOAD_USAGE = `Usage: svc reload

Sends SIGHUP to the server that holds the data directory (SVC_FS_ROOT, default ./data: run it
with the server's SVC_FS_ROOT, or from the directory the server was started in), which reads
SVC_TENANT_POLICY_FILE again; an invalid file keeps the policy in force (the server's log says
so). Exit status 1 when no running server holds the directory.
`;

export function runReloadCommand(args: string[]): number {
  let help: boolean | undefined;
  try {
    help = parseArgs({ args, options: { help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }).values.help;
  } catch (err) {
    process.stderr.write(`svc reload: ${parseArgsMessage(err)}\n${RELOAD_USAGE}`);
    return 2;
  }
  if (help) {
    process.stdout.write(RELOAD_USAGE);
    return 0;
  }
  let root: string;
  try {
    root = loadConfig().fsRoot;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`svc: invalid configuration: ${err.message}\n`);
    return 2;
  }
  const pid = dataDirHolder(root);
  if (pid === undefined) {
    process.stderr.write(`svc reload: no running svc server holds the data directory ${root} (SVC_FS_ROOT)\n`);
    return 1;
  }
  try {
    process.kill(pid, 'SIGHUP');
  } catch (err) {
    process.stderr.write(`svc reload: cannot signal process ${pid}: ${(err as Error).message}\n`);
    return 1;
  }
  process.stdout.write(`svc reload: sent SIGHUP to process ${pid} (the server of ${root})\n`);
  return 0;
}
