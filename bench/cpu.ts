import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let clockTicks: number | undefined;
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** User + system CPU seconds a process has used (all its threads), from /proc/<pid>/stat. */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(rest[11]) + Number(rest[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

interface HostTicks {
  busy: number;
  steal: number;
}

/** Whole-host CPU ticks from /proc/stat: busy (everything but idle and iowait) and steal. */
function hostTicks(): HostTicks | undefined {
  try {
    const line = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0];
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal guest guest_nice (guest is included in user)
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - v[3] - (v[4] ?? 0), steal: v[7] ?? 0 };
  } catch {
    return undefined;
  }
}

/** CPU use over a window, each as % of one core (so up to 100 x CPUs). */
export interface CpuReport {
  /** This process: the load generator / client. */
  benchPercent: number;
  /** The server process, all threads. */
  serverPercent?: number;
  /** All CPUs of the host, busy (steal included). */
  hostBusyPercent?: number;
  /** Host busy minus bench and server: other processes (and the kernel) competing for the CPUs. */
  otherPercent?: number;
  /** Time the hypervisor gave the vCPUs to someone else. */
  stealPercent?: number;
}

export class CpuWindow {
  private readonly t0 = performance.now();
  private readonly self0 = process.cpuUsage();
  private readonly server0: number | undefined;
  private readonly host0 = hostTicks();

  constructor(private readonly serverPid?: number) {
    this.server0 = serverPid === undefined ? undefined : processCpuSeconds(serverPid);
  }

  end(): CpuReport {
    const seconds = (performance.now() - this.t0) / 1000;
    const self = process.cpuUsage(this.self0);
    const server1 = this.serverPid === undefined ? undefined : processCpuSeconds(this.serverPid);
    const host1 = hostTicks();
    const pctOf = (cpuSeconds: number) => (cpuSeconds / seconds) * 100;
    const benchPercent = pctOf((self.user + self.system) / 1e6);
    const serverPercent = this.server0 !== undefined && server1 !== undefined ? pctOf(server1 - this.server0) : undefined;
    let hostBusyPercent: number | undefined;
    let stealPercent: number | undefined;
    let otherPercent: number | undefined;
    if (this.host0 && host1) {
      hostBusyPercent = pctOf((host1.busy - this.host0.busy) / ticksPerSecond());
      stealPercent = pctOf((host1.steal - this.host0.steal) / ticksPerSecond());
      otherPercent = Math.max(0, hostBusyPercent - benchPercent - (serverPercent ?? 0));
    }
    return { benchPercent, serverPercent, hostBusyPercent, otherPercent, stealPercent };
  }
}

/** Node's default V8 platform pool (`--v8-pool-size`, 4). */
const V8_POOL_SIZE = 4;

/** A process's threads grouped as svc's CPU is read (bench/cpu.ts ThreadWindow). */
export type ThreadGroup = 'main' | 'V8 platform' | 'workers' | 'libuv' | 'other';
export const THREAD_GROUPS: readonly ThreadGroup[] = ['main', 'V8 platform', 'workers', 'libuv', 'other'];

/** CPU ticks of each thread of `pid` now, by thread id, with its name (/proc/<pid>/task/<tid>). */
function threadTicks(pid: number): Map<number, { comm: string; ticks: number }> {
  const out = new Map<number, { comm: string; ticks: number }>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), { comm, ticks: Number(rest[11]) + Number(rest[12]) });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

/** Times the thread `tid` of `pid` has gone to sleep (`voluntary_ctxt_switches`): each is a wake-up after it. */
function voluntarySwitches(pid: number, tid: number): number {
  try {
    const m = /^voluntary_ctxt_switches:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1'));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/**
 * CPU seconds of a Node process over a window by group of threads: `main` (the event loop: the
 * thread whose id is the pid), `V8 platform` (V8's background threads: TurboFan's compile jobs,
 * concurrent marking and sweeping; Node names them as the main thread: the first
 * V8_POOL_SIZE threads named so after its `DelayedTaskScheduler`, which Node starts just before
 * them), `libuv` (its thread pool: fs, crypto, LMDB's async calls), `workers` (worker_threads:
 * the rest named like the main thread) and `other`. Ticks are /proc's (1/CLK_TCK s): read totals over windows of seconds. And the times
 * the main thread woke up (it slept: the event loop had nothing to do), which an event loop pays
 * for in the kernel's scheduling beside its work.
 */
export class ThreadWindow {
  private readonly t0: Map<number, { comm: string; ticks: number }>;
  private readonly sleeps0: number;

  constructor(private readonly pid: number) {
    this.t0 = threadTicks(pid);
    this.sleeps0 = voluntarySwitches(pid, pid);
  }

  end(): { seconds: Record<ThreadGroup, number>; mainWakeups: number } {
    const t1 = threadTicks(this.pid);
    const mainComm = t1.get(this.pid)?.comm;
    const ordered = [...t1.keys()].sort((a, b) => a - b);
    const delayed = ordered.find((tid) => t1.get(tid)!.comm.startsWith('DelayedTaskSch'));
    const platform = new Set(delayed === undefined ? [] : ordered.filter((tid) => tid > delayed && t1.get(tid)!.comm === mainComm).slice(0, V8_POOL_SIZE));
    const sums: Record<ThreadGroup, number> = { main: 0, 'V8 platform': 0, workers: 0, libuv: 0, other: 0 };
    for (const tid of ordered) {
      const { comm, ticks } = t1.get(tid)!;
      const group: ThreadGroup =
        tid === this.pid ? 'main'
        : comm.startsWith('libuv-worker') ? 'libuv'
        : platform.has(tid) ? 'V8 platform'
        : comm === mainComm ? 'workers'
        : 'other';
      sums[group] += (ticks - (this.t0.get(tid)?.ticks ?? 0)) / ticksPerSecond();
    }
    return { seconds: sums, mainWakeups: voluntarySwitches(this.pid, this.pid) - this.sleeps0 };
  }
}
