// The tests' own PostgreSQL clusters (issue 19): start, use with the catalog's driver, run two at
// once, stop without leaving a process, a directory or an open port behind.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startPostgres, type PgServer } from './helpers/postgres.js';

/** Resolves true when something accepts a TCP connection on the loopback port. */
function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}

/** Command lines of the processes that mention `dir` (a cluster's temp directory). */
function processesUsing(dir: string): string[] {
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n').filter((line) => line.includes(dir));
}

const BUILT_HELPER = fileURLToPath(new URL('../dist/bench/postgres-server.js', import.meta.url));

/** A started cluster, or the test skipped with the helper's reason (PostgreSQL not installed). */
async function started(skip: (note: string) => never): Promise<PgServer> {
  const s = await startPostgres();
  if ('skip' in s) skip(s.skip);
  return s;
}

describe('PostgreSQL for the tests', () => {
  const servers: PgServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop())); // idempotent: a no-op for those already stopped
  });

  it('starts a cluster, round-trips bytea and bigint through pg, runs two more beside it, stops all cleanly', async ({ skip }) => {
    const first = await started(skip);
    servers.push(first);
    expect(first.url).toBe(`postgres://postgres@127.0.0.1:${first.port}/svc_test`);
    expect(await portOpen(first.port)).toBe(true);

    const client = new pg.Client({ connectionString: first.url });
    await client.connect();
    try {
      await client.query('CREATE TABLE blobs (id bytea PRIMARY KEY, size bigint NOT NULL)');
      const id = Buffer.from(Array.from({ length: 256 }, (_, i) => i)); // every byte value
      const size = 2n ** 53n + 1n; // beyond a double's exact integers
      await client.query('INSERT INTO blobs (id, size) VALUES ($1, $2)', [id, size.toString()]);
      const { rows } = await client.query<{ id: Buffer; size: string }>('SELECT id, size FROM blobs WHERE id = $1', [id]);
      expect(rows).toHaveLength(1);
      expect(Buffer.compare(rows[0]!.id, id)).toBe(0);
      expect(BigInt(rows[0]!.size)).toBe(size);
    } finally {
      await client.end();
    }

    // Two more, started together while the first runs, each with its own port and directory; and
    // a second database in one of them.
    const [second, third] = await Promise.all([started(skip), started(skip)]);
    servers.push(second, third);
    expect(new Set([first.port, second.port, third.port]).size).toBe(3);
    expect(new Set([first.dir, second.dir, third.dir]).size).toBe(3);
    const otherUrl = await second.createDatabase('other_db');
    const other = new pg.Client({ connectionString: otherUrl });
    await other.connect();
    expect((await other.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db).toBe('other_db');
    await other.end();

    for (const s of [first, second, third]) {
      expect(processesUsing(s.dir).length).toBeGreaterThan(0);
      expect(existsSync(s.dir)).toBe(true);
    }
    await Promise.all([first.stop(), second.stop(), third.stop()]);
    for (const s of [first, second, third]) {
      expect(existsSync(s.dir)).toBe(false);
      expect(await portOpen(s.port)).toBe(false);
      expect(processesUsing(s.dir)).toEqual([]);
    }
  });

  it('stop() waits out a connected client (fast shutdown) and can be called twice', async ({ skip }) => {
    const server = await started(skip);
    servers.push(server);
    const client = new pg.Client({ connectionString: server.url });
    client.on('error', () => {}); // the shutdown terminates its session
    await client.connect();
    await client.query('BEGIN');
    await client.query('CREATE TABLE t (x int)');
    await Promise.all([server.stop(), server.stop()]);
    expect(existsSync(server.dir)).toBe(false);
    expect(await portOpen(server.port)).toBe(false);
    await client.end().catch(() => {});
  });

  it('a process killed with SIGKILL leaves no cluster behind: its guard stops it and removes the directory', async ({ skip }) => {
    if (!existsSync(BUILT_HELPER)) skip('dist/ is not built (npm test builds it)');
    const child = spawn(process.execPath, ['--input-type=module', '-e', `
      const { startPostgres } = await import(${JSON.stringify(BUILT_HELPER)});
      const s = await startPostgres();
      console.log(JSON.stringify('skip' in s ? s : { dir: s.dir, port: s.port, pid: s.pid }));
      setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString())));
    const started = JSON.parse(line) as { skip: string } | { dir: string; port: number; pid: number };
    child.kill('SIGKILL');
    if ('skip' in started) {
      skip(started.skip);
      return;
    }
    expect(processesUsing(started.dir).length).toBeGreaterThan(0);
    const deadline = Date.now() + 15_000;
    while ((existsSync(started.dir) || processesUsing(started.dir).length > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(processesUsing(started.dir)).toEqual([]);
    expect(existsSync(started.dir)).toBe(false);
    expect(await portOpen(started.port)).toBe(false);
  });
});
