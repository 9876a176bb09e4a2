// Writes dist/native/uws.node: the uWebSockets.js addon of this platform with the three answers
// its HTTP parser writes by itself (505 for anything but HTTP/1.1, 431 for oversized headers, 400 for
// malformed framing) rewritten from HTML pages naming the library and its version into the JSON
// error envelope. They are fixed-length constants in the binary, so each is replaced in place by
// an answer of the same length (JSON padded with spaces). server/uws.ts loads this copy when it
// exists; when the addon does not hold exactly the expected pages, none is written and the shipped
// addon is used as it is.
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishBytes } from './publish.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const output = path.join(repo, 'dist', 'native', 'uws.node');
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

function patch(): string {
  const shipped = createRequire(path.join(repo, 'node_modules', 'uWebSockets.js', 'dist', 'uws.mjs')).resolve(
    `./bin/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`,
  );
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

const failure = existsSync(path.join(repo, 'node_modules', 'uWebSockets.js')) ? patch() : 'uWebSockets.js is not installed';
if (failure) {
  rmSync(output, { force: true });
  process.stderr.write(`uWS error pages left as shipped (${failure})\n`);
}
