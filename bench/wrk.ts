/**
 * wrk (https://github.com/wg/wrk, Debian package `wrk`) as the load generator of the small and
 * medium object scenarios (issue 7): a compiled, event-driven client, so the server rather than
 * the client is what the figure measures.
 *
 * Every run gets a Lua script generated into a temp directory:
 * - downloads: `request()` hands out prepared GETs round-robin over the stored objects, each
 *   wrk thread starting at its own offset;
 * - uploads: `request()` builds a distinct body for every request from a random base file
 *   (fresh for every run, so no two runs send the same bytes): every 4 KiB region of the base
 *   starts with a 16-byte stamp `<thread><region><counter>` in hex, so every region of every body
 *   differs from every other one: svc deduplicates whole blocks (at least SVC_CHUNK_MIN, 256 KiB
 *   by default, or the whole body when smaller), and every block holds stamps only its body
 *   has; nginx PUTs go to distinct names (`<prefix><thread>-<counter>.bin`);
 * - `done()` prints one line, `WRK_JSON {...}`: responses, duration, bytes read, wrk's error
 *   counters (connect/read/write/timeout, and `status`: responses with a status >= 400),
 *   latency percentiles, and wrk's own CPU ticks (utime + stime of the whole process from
 *   /proc/self/stat, read after its threads have finished).
 *
 * `stampedBody` builds the same bodies in Node for the fallback generator (bench/load.ts).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ticksPerSecond } from './cpu.js';

export const WRK_INSTALL_HINT = 'wrk not installed: apt-get install wrk (Debian)';
/** Bytes between two stamps of an upload body, and the stamp's length. */
export const STAMP_REGION = 4096;
const STAMP_BYTES = 16;

export interface WrkInfo {
  binary: string;
  /** `wrk -v`'s first line, e.g. "wrk debian/4.1.0-3+b2 [epoll] ...". */
  version: string;
}

/** wrk on PATH (or /usr/bin/wrk), with its version line; undefined when absent. */
export function findWrk(): WrkInfo | undefined {
  let binary: string | undefined;
  try {
    binary = execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    // not on PATH
  }
  binary ??= ['/usr/bin/wrk', '/usr/local/bin/wrk'].find((p) => fs.existsSync(p));
  if (!binary) return undefined;
  let text = '';
  try {
    // `wrk -v` prints its version and usage and exits with status 1.
    text = execFileSync(binary, ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    text = String((err as { stdout?: string }).stdout ?? '');
  }
  const line = text.split('\n').find((l) => /^wrk /.test(l)) ?? 'wrk (version unknown)';
  return { binary, version: line.replace(/\s+Copyright.*$/, '').trim() };
}

/** Node's copy of the Lua body builder: `base` with a stamp at the start of every 4 KiB region. */
export function stampedBody(base: Buffer, thread: number, counter: number): Buffer {
  const out = Buffer.from(base);
  for (let region = 0, off = 0; off < out.length; region++, off += STAMP_REGION) {
    const stamp = `${(thread % 256).toString(16).padStart(2, '0')}${region.toString(16).padStart(6, '0')}${(counter % 2 ** 32).toString(16).padStart(8, '0')}`;
    out.write(stamp, off, Math.min(STAMP_BYTES, out.length - off), 'latin1');
  }
  return out;
}

export type WrkWork =
  | { kind: 'get'; paths: string[] }
  | {
      kind: 'upload';
      method: 'POST' | 'PUT';
      /** The request path, or with `distinctNames` the prefix of `<thread>-<counter>.bin`. */
      path: string;
      distinctNames: boolean;
      bodyBytes: number;
    };

export interface WrkSpec {
  binary: string;
  port: number;
  threads: number;
  connections: number;
  /** Whole seconds (wrk's -d takes no fractions). */
  durationSeconds: number;
  /** wrk's per-request timeout (a request slower than this counts as a timeout error). */
  timeoutSeconds?: number;
  /** Where the script and the base body go (removed afterwards). */
  dir: string;
  work: WrkWork;
}

/** What the script's done() prints. */
export interface WrkSummary {
  requests: number;
  durationUs: number;
  bytes: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** Requests the threads built (uploads: counters; includes ones in flight when the run ended). */
  built: number;
  cpuTicks: { utime: number; stime: number };
}

export interface WrkRun {
  args: string[];
  summary: WrkSummary;
  /** wrk's CPU (all its threads), seconds and % of one core over its run. */
  cpuSeconds: number;
  cpuPercent: number;
  /** Spawn to exit. */
  wallSeconds: number;
  requestsPerSecond: number;
  /** Response bytes (headers included) per second, decimal MB. */
  readMbPerSecond: number;
  /** Sum of wrk's error counters. */
  errorCount: number;
}

const lua = (s: string) => JSON.stringify(s); // a JSON string literal is a valid Lua string literal for these (ASCII, no control characters)

export function wrkScript(work: WrkWork, baseFile: string): string {
  const common = `
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

local function cpu_ticks()
  local f = io.open("/proc/self/stat", "r")
  if not f then return -1, -1 end
  local s = f:read("*a")
  f:close()
  local rest = s:match("^.*%) (.*)$")
  local fields = {}
  for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
  -- fields[1] is field 3 (state): utime and stime are fields 14 and 15
  return tonumber(fields[12]), tonumber(fields[13])
end

function done(summary, latency, requests)
  local built = 0
  for _, t in ipairs(threads) do built = built + (t:get("counter") or 0) end
  local e = summary.errors
  local ut, st = cpu_ticks()
  io.write(string.format('WRK_JSON {"requests":%d,"durationUs":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f},"built":%d,"cpuTicks":{"utime":%d,"stime":%d}}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean, built, ut, st))
end
`;
  if (work.kind === 'get') {
    return `-- generated by bench/wrk.ts: GETs round-robin over ${work.paths.length} paths
local paths = { ${work.paths.map(lua).join(', ')} }
local reqs = {}
local i = 0
counter = 0
function init(args)
  for k, p in ipairs(paths) do reqs[k] = wrk.format("GET", p) end
  i = (tid - 1) % #reqs
end
function request()
  i = i % #reqs + 1
  counter = counter + 1
  return reqs[i]
end
${common}`;
  }
  return `-- generated by bench/wrk.ts: ${work.method} of distinct ${work.bodyBytes}-byte bodies
local base_file = ${lua(baseFile)}
local region = ${STAMP_REGION}
local stamp_bytes = ${STAMP_BYTES}
local method = ${lua(work.method)}
local path = ${lua(work.path)}
local distinct = ${work.distinctNames ? 'true' : 'false'}
local tails = {}
local nregions = 0
local headers = nil
counter = 0
function init(args)
  local f = assert(io.open(base_file, "rb"))
  local base = f:read("*a")
  f:close()
  nregions = math.ceil(#base / region)
  for r = 0, nregions - 1 do tails[r + 1] = base:sub(r * region + stamp_bytes + 1, math.min((r + 1) * region, #base)) end
  headers = { ["Content-Type"] = "application/octet-stream" }
end
function request()
  counter = counter + 1
  local parts = {}
  for r = 1, nregions do
    parts[2 * r - 1] = string.format("%02x%06x%08x", tid % 256, r - 1, counter % 4294967296)
    parts[2 * r] = tails[r]
  end
  local p = path
  if distinct then p = path .. tid .. "-" .. counter .. ".bin" end
  return wrk.format(method, p, headers, table.concat(parts))
end
${common}`;
}

/** Runs wrk once; rejects on a failed start, a missing summary line or a run past its time limit. */
export async function runWrk(spec: WrkSpec): Promise<WrkRun> {
  fs.mkdirSync(spec.dir, { recursive: true });
  const id = `${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  const scriptFile = path.join(spec.dir, `wrk-${id}.lua`);
  const baseFile = path.join(spec.dir, `wrk-${id}.body`);
  if (spec.work.kind === 'upload') {
    if (spec.work.bodyBytes < STAMP_BYTES) throw new Error(`upload bodies must be at least ${STAMP_BYTES} bytes`);
    fs.writeFileSync(baseFile, randomBytes(spec.work.bodyBytes));
  }
  fs.writeFileSync(scriptFile, wrkScript(spec.work, baseFile));
  const args = ['-t', String(spec.threads), '-c', String(spec.connections), '-d', `${spec.durationSeconds}s`, '--timeout', `${spec.timeoutSeconds ?? 30}s`, '-s', scriptFile, `http://127.0.0.1:${spec.port}/`];
  const started = performance.now();
  try {
    const { stdout, stderr, code, signal } = await new Promise<{ stdout: string; stderr: string; code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      const child = spawn(spec.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (t: string) => (out += t));
      child.stderr.setEncoding('utf8').on('data', (t: string) => (err = (err + t).slice(-4000)));
      // Bounded: the run's duration plus the request timeout and a margin, then SIGKILL (this child only).
      const limitMs = (spec.durationSeconds + (spec.timeoutSeconds ?? 30) + 30) * 1000;
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`wrk did not finish within ${limitMs / 1000} s (killed)`));
      }, limitMs);
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.once('close', (c, s) => {
        clearTimeout(timer);
        resolve({ stdout: out, stderr: err, code: c, signal: s });
      });
    });
    const wallSeconds = (performance.now() - started) / 1000;
    const line = stdout.split('\n').find((l) => l.startsWith('WRK_JSON '));
    if (code !== 0 || !line) throw new Error(`wrk ${args.join(' ')} exited with ${code ?? signal}${line ? '' : ' without its summary line'}: ${(stderr || stdout).trim().slice(-500)}`);
    const summary = JSON.parse(line.slice('WRK_JSON '.length)) as WrkSummary;
    const seconds = summary.durationUs / 1e6;
    const cpuSeconds = summary.cpuTicks.utime >= 0 ? (summary.cpuTicks.utime + summary.cpuTicks.stime) / ticksPerSecond() : NaN;
    const e = summary.errors;
    return {
      args,
      summary,
      cpuSeconds,
      cpuPercent: (cpuSeconds / seconds) * 100,
      wallSeconds,
      requestsPerSecond: summary.requests / seconds,
      readMbPerSecond: summary.bytes / seconds / 1e6,
      errorCount: e.connect + e.read + e.write + e.status + e.timeout,
    };
  } finally {
    fs.rmSync(scriptFile, { force: true });
    fs.rmSync(baseFile, { force: true });
  }
}
