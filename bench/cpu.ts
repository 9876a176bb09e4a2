import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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
