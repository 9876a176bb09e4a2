// Adds the platform builds of msgpackr-extract that the reachable registry lacks to
// package-lock.json, so that `npm ci` accepts the lock (see README, "A note on the lock file").
import fs from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const extract = lock.packages['node_modules/msgpackr-extract'];
if (!extract) process.exit(0);
const platforms = { 'darwin-arm64': ['darwin', 'arm64'], 'darwin-x64': ['darwin', 'x64'], 'linux-arm': ['linux', 'arm'], 'linux-arm64': ['linux', 'arm64'], 'linux-x64': ['linux', 'x64'], 'win32-x64': ['win32', 'x64'] };
for (const [name, [os, cpu]] of Object.entries(platforms)) {
  const key = `node_modules/@msgpackr-extract/msgpackr-extract-${name}`;
  lock.packages[key] ??= { version: extract.version, cpu: [cpu], license: 'MIT', optional: true, os: [os] };
}
lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
fs.writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
