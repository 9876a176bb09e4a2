#!/usr/bin/env node
// The `svc` command: the server and its client, as built into dist/ by `npm run build`.
import('../dist/server/main.js').then(
  (svc) => svc.main(process.argv.slice(2)),
  (err) => {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/server/main.js')) throw err;
    process.stderr.write(`svc: ${new URL('..', import.meta.url).pathname} is not built: run \`npm ci && npm run build\` there\n`);
    process.exitCode = 1;
  },
);
