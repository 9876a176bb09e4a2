// Writes dist/native/uws-<ABI>.node: the uWebSockets.js addon of this platform for each Node ABI the
// package ships from Node 20 on (127 for Node 22, the runtime `npm ci` brings; 115 for Node 20, which
// the benchmarks compare against), with the three answers its HTTP parser writes by itself (505 for
// anything but HTTP/1.1, 431 for oversized headers, 400 for malformed framing) rewritten from HTML
// pages naming the library and its version into the JSON error envelope. They are fixed-length
// constants in the binary, so each is replaced in place by an answer of the same length (JSON
// padded with spaces). server/uws.ts loads the copy of its own ABI when it exists; when an addon
// does not hold exactly the expected pages, no copy of it is written and the shipped addon is used
// as it is.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishBytes } from './publish.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const outputs = path.join(repo, 'dist', 'native');
const FOOTER = '<hr><i>uWebSockets/20 Server</i>';
const PAGES: Array<{ status: string; page: string; error: string; messages: string[] }> = [
  { status: '505 HTTP Version Not Supported', page: '<h1>HTTP Version Not Supported</h1><p>This server does not support HTTP/1.0.</p>', error: 'http_version_not_supported', messages: ['Only HTTP/1.1 is served'] },
  { status: '431 Request Header Fields Too Large', page: '<h1>Request Header Fields Too Large</h1>', error: 'headers_too_large', messages: ['Request line or headers too large', 'Headers too large'] },
  { status: '400 Bad Request', page: '<h1>Bad Request</h1>', error: 'invalid_request', messages: ['Malformed request', 'Malformed'] },
];

/** The same-length JSON answer: the fullest message that fits, with Content-Type when it fits too. */
function replacement(original: string, status: string, error: string, messages: string[]): string | undefined {
  const heads = ['Content-Type: application/json\r\nConnection: close\r\n', 'Content-Type:application/json\r\n', 'Connection: close\r\n'];
  for (const message of messages) {
    for (const head of heads) {
      const answer = `HTTP/1.1 ${status}\r\n${head}\r\n${JSON.stringify({ error, message })}`;
      if (answer.length <= original.length) return answer.padEnd(original.length, ' ');
    }
  }
  return undefined;
}

/** Writes the patched copy of `shipped` (one ABI's addon) as `output`; returns why not, or ''. */
function patch(shipped: string, output: string): string {
  let binary = readFileSync(shipped);
  for (const { status, page, error, messages } of PAGES) {
    const original = `HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n${page}${FOOTER}`;
    const at = binary.indexOf(`${original}\0`, 0, 'latin1');
    if (at < 0 || binary.indexOf(`${original}\0`, at + 1, 'latin1') >= 0) return `the ${status} page is not where expected`;
    const answer = replacement(original, status, error, messages);
    if (!answer) return `no JSON answer fits the ${status} page`;
    binary = Buffer.concat([binary.subarray(0, at), Buffer.from(answer, 'latin1'), binary.subarray(at + original.length)]);
  }
  mkdirSync(path.dirname(output), { recursive: true });
  // Renamed into place, and only when it changed: a running server has the old one mapped.
  publishBytes(output, binary);
  return '';
}

const installed = path.join(repo, 'node_modules', 'uWebSockets.js', 'dist', 'bin');
const prefix = `uws_${process.platform}_${process.arch}_`;
const abis = existsSync(installed)
  ? readdirSync(installed).flatMap((f) => (f.startsWith(prefix) && f.endsWith('.node') ? [f.slice(prefix.length, -'.node'.length)] : []))
  : [];
/** Node 20's ABI: older ones are of no use to this package. */
const OLDEST_ABI = 115;
if (!abis.includes(process.versions.modules)) {
  process.stderr.write(`uWS error pages left as shipped (uWebSockets.js has no ${prefix}${process.versions.modules}.node)\n`);
}
for (const abi of abis.filter((a) => Number(a) >= OLDEST_ABI)) {
  const output = path.join(outputs, `uws-${abi}.node`);
  const failure = patch(path.join(installed, `${prefix}${abi}.node`), output);
  if (failure) {
    rmSync(output, { force: true });
    process.stderr.write(`uWS error pages left as shipped for ABI ${abi} (${failure})\n`);
  }
}
// The single copy earlier builds wrote, for whichever ABI they ran on.
rmSync(path.join(outputs, 'uws.node'), { force: true });
