// The task of bench/job-pickup.ts's pool-lane kind: nothing to compute, so the measured time is the queue's.
export function noop(): { ok: true } {
  return { ok: true };
}
