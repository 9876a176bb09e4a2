// The one uWebSockets.js module every listener uses: the copy with JSON error pages that the build
// writes for this Node's ABI (native/uws-error-pages.ts), else the package's own addon. Loading
// both would start two uWS loops, so nothing else imports the package at run time (types only).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { HTTP_MAX_HEADER_BYTES } from '../engine/base/limits.js';

type Uws = typeof import('uWebSockets.js');

const patched = fileURLToPath(new URL(`../native/uws-${process.versions.modules}.node`, import.meta.url));

// Read by the addon once, as it loads: set before it does.
process.env.UWS_HTTP_MAX_HEADERS_SIZE ??= String(HTTP_MAX_HEADER_BYTES);

const uws: Uws = existsSync(patched) ? createRequire(import.meta.url)(patched) : await import('uWebSockets.js');
export default uws;
