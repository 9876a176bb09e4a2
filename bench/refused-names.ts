/**
 * What refused requests naming huge names leave behind (issue 36, hole 1): a server with
 * security on and a development token; POST /v1/documents/{id}/migrate requests whose
 * `namespaceUrn` is 1 MB, each refused, sent 4 at a time. The server process's resident memory
 * (VmRSS of /proc/<pid>/status) is read before, every 500 requests, and after; flat is the target
 * (before the edge check the principal's capability cache kept every name: ~1 MiB per request).
 *
 *   npm run bench:refused-names                 2,000 requests
 *   npm run bench:refused-names -- --count 400  another count
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './args.js';
import { ServerProcess } from './server-process.js';

const ENTRY = fileURLToPath(new URL('../server/main.js', import.meta.url));
const args = benchArgs({
  usage: 'usage: node dist/bench/refused-names.js [--count N]',
  options: { count: { type: 'string', value: 'N', default: '2000', help: 'refused requests sent' } },
});
const COUNT = args.number('count');
const NAME_BYTES = 1_000_000;
const PARALLEL = 4;
const MiB = 1024 * 1024;

const agent = new http.Agent({ keepAlive: true, maxSockets: PARALLEL });

function request(port: number, method: string, p: string, headers: Record<string, string>, body?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, agent, headers: body === undefined ? headers : { ...headers, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round((Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024 * 10) / MiB) / 10;
}

async function main(): Promise<void> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-names-'));
  const server = await ServerProcess.start({
    entry: ENTRY, fsRoot: root, durability: 'relaxed',
    env: { SVC_SECURITY_ENABLED: 'true', SVC_DEV_SHARED_SECRET: randomBytes(32).toString('base64url'), HTTP_PORT: '0' },
  });
  try {
    const token = JSON.parse((await request(server.port, 'POST', '/dev/token', {}, JSON.stringify({ org_id: 'bench', sub: 'mallory' }))).text).access_token as string;
    const auth = { Authorization: `Bearer ${token}` };
    const created = await request(server.port, 'POST', '/v1/documents', auth, '{}');
    if (created.status !== 201) throw new Error(`POST /v1/documents: ${created.status} ${created.text}`);
    const { documentId } = JSON.parse(created.text) as { documentId: string };
    const filler = 'x'.repeat(NAME_BYTES - 16);
    const statuses = new Map<number, number>();
    const samples: Array<{ requests: number; rssMiB: number }> = [{ requests: 0, rssMiB: rssMiB(server.pid) }];
    let next = 0;
    let done = 0;
    const worker = async () => {
      while (next < COUNT) {
        const i = next++;
        const body = JSON.stringify({ namespaceUrn: `urn:svc:${String(i).padStart(8, '0')}${filler}`, toSchemaUrn: 'urn:svc:schema:none@1.0.0', reason: 'bench' });
        const { status } = await request(server.port, 'POST', `/v1/documents/${documentId}/migrate`, auth, body);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (++done % 500 === 0) samples.push({ requests: done, rssMiB: rssMiB(server.pid) });
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const seconds = (performance.now() - started) / 1000;
    if (samples.at(-1)!.requests !== COUNT) samples.push({ requests: COUNT, rssMiB: rssMiB(server.pid) });
    const report = {
      bench: 'refused-names', requests: COUNT, nameBytes: NAME_BYTES, parallel: PARALLEL, seconds: Math.round(seconds * 10) / 10,
      statuses: Object.fromEntries(statuses), rss: samples, growthMiB: Math.round((samples.at(-1)!.rssMiB - samples[0]!.rssMiB) * 10) / 10,
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    agent.destroy();
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
