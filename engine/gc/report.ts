// A collection run's report and the collector's state as GET /api/ops/v1/gc shows them: the
// types and builders both collectors (./gc.ts, ./shared-collector.ts) share.

import { randomUUID } from 'node:crypto';
import type { GcConfig } from '../base/config.js';
import type { GcSchedule } from './schedule.js';

export type GcPhase = 'mark' | 'quarantine' | 'purge' | 'run';
export const GC_PHASES: readonly GcPhase[] = ['mark', 'quarantine', 'purge', 'run'];

/** Ages of one run instead of the configured ones (milliseconds). */
export interface GcAgeOverrides {
  minAgeMs?: number;
  quarantineAgeMs?: number;
}


export interface GcReport {
  runId: string;
  phase: GcPhase;
  apply: boolean;
  trigger: 'api' | 'schedule';
  startedAt: string;
  finishedAt?: string;
  /** Distinct blocks referenced by published manifests and every block-roots source. */
  markedBlocks: number;
  /** Unreferenced block files found (any age). */
  candidates: number;
  /** Moved to quarantine (dry run: would be). */
  quarantined: { count: number; bytes: number };
  /** Quarantined copies deleted (dry run: would be). */
  purged: { count: number; bytes: number };
  /** Quarantined blocks moved back because something references them again. */
  restored: number;
  /** Ages this run used instead of the configured ones, when it was asked to. */
  overrides?: GcAgeOverrides;
  /** Blocks left alone, by reason. */
  skipped: { count: number; reasons: Record<string, number> };
  /** Receipts in quarantine when the run ended. */
  quarantineBlocks: number;
  /**
   * Set when the run quarantined and purged nothing (shared catalogs): root holders that are down
   * had not marked their roots for it. The reason names them, their last heartbeat and what to do.
   */
  heldBack?: { reason: string; nodes: Array<{ nodeId: string; address: string; lastSeenAt: string }> };
  /** Set when the run failed; the counts say how far it got. */
  error?: string;
}

/** A run's report before it starts (both collectors). */
export function newReport(phase: GcPhase, apply: boolean, trigger: 'api' | 'schedule', ages: GcAgeOverrides): GcReport {
  const report: GcReport = {
    runId: randomUUID(),
    phase,
    apply,
    trigger,
    startedAt: new Date().toISOString(),
    markedBlocks: 0,
    candidates: 0,
    quarantined: { count: 0, bytes: 0 },
    purged: { count: 0, bytes: 0 },
    restored: 0,
    skipped: { count: 0, reasons: {} },
    quarantineBlocks: 0,
  };
  if (ages.minAgeMs !== undefined || ages.quarantineAgeMs !== undefined) report.overrides = { ...ages };
  return report;
}

/** What GET /api/ops/v1/gc answers, from a collector's parts (both collectors). */
export function gcState(
  current: { report: GcReport; step: string } | undefined,
  lastRun: GcReport | undefined,
  quarantinedBlocks: number,
  config: GcConfig,
  schedule: GcSchedule,
  reclaimed: { blocks: number; bytes: number },
): GcState {
  const { intervalMs, minAgeMs, quarantineAgeMs } = config;
  const r = current?.report;
  return {
    running: current !== undefined,
    current: current && r && { runId: r.runId, phase: r.phase, apply: r.apply, trigger: r.trigger, startedAt: r.startedAt, step: current.step },
    lastRun,
    quarantinedBlocks,
    config: { intervalMs, minAgeMs, quarantineAgeMs },
    nextScheduledRunAt: schedule.nextAt === undefined ? undefined : new Date(schedule.nextAt).toISOString(),
    reclaimed,
  };
}

export interface GcState {
  running: boolean;
  current?: { runId: string; phase: GcPhase; apply: boolean; trigger: 'api' | 'schedule'; startedAt: string; step: string };
  lastRun?: GcReport;
  quarantinedBlocks: number;
  config: { intervalMs: number; minAgeMs: number; quarantineAgeMs: number };
  nextScheduledRunAt?: string;
  /** Blocks of failed uploads deleted at once since start (not counted in the runs). */
  reclaimed: { blocks: number; bytes: number };
}
