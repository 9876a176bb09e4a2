// engine/base/clock.ts: the ReferenceClock that pg-s3 nodes follow PostgreSQL's clock with
// (test/pg-clock.test.ts runs it against PostgreSQL, with nodes under libfaketime). Here its
// arithmetic, against a reference read through a timer: the reading stands at the middle of the
// round trip, the shortest round trip of the recent samples wins, and now() moves on with the
// monotonic clock between samples.
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type ClockReading, ReferenceClock, systemClock } from '../dist/engine/base/clock.js';

/** A reference `offsetMs` ahead of this process's clock, read `before` ms after the request is sent and answered `after` ms later. */
function reference(offsetMs: number, legs: Array<[number, number]>): () => Promise<ClockReading> {
  let i = 0;
  return async () => {
    const [before, after] = legs[Math.min(i++, legs.length - 1)]!;
    const sent = performance.now();
    await delay(before);
    const value = Date.now() + offsetMs;
    await delay(after);
    return { reference: value, sent, received: performance.now() };
  };
}

describe('ReferenceClock', () => {
  it('is the system clock before its first sample, then the reference moved on by the monotonic clock', async () => {
    const clock = new ReferenceClock(reference(600_000, [[0, 0]]), { intervalMs: 60_000 });
    expect(Math.abs(clock.now() - systemClock.now())).toBeLessThan(100);
    expect(clock.offsetMs()).toBeUndefined();
    await clock.sample();
    expect(Math.abs(clock.now() - (Date.now() + 600_000))).toBeLessThan(100);
    await delay(200);
    expect(Math.abs(clock.now() - (Date.now() + 600_000))).toBeLessThan(100);
    // Offset: this process's clock minus the reference.
    expect(Math.abs(clock.offsetMs()! + 600_000)).toBeLessThan(100);
  });

  it('takes a reading to stand at the middle of its round trip, and follows the sample with the shortest round trip', async () => {
    // The reference reads its clock right away and answers 400 ms later: the midpoint puts the
    // reading 200 ms late (error ≤ half the round trip); a later sample with a short round trip replaces it.
    const clock = new ReferenceClock(reference(0, [[0, 400], [5, 5], [300, 300]]), { intervalMs: 60_000 });
    await clock.sample();
    expect(clock.roundTripMs()).toBeGreaterThanOrEqual(390);
    expect(clock.offsetMs()!).toBeGreaterThan(120);
    expect(clock.offsetMs()!).toBeLessThan(300);
    await clock.sample();
    expect(clock.roundTripMs()).toBeLessThan(200);
    expect(Math.abs(clock.offsetMs()!)).toBeLessThan(100);
    // A slow sample after it (600 ms round trip, read in its middle) does not replace it.
    await clock.sample();
    expect(clock.roundTripMs()).toBeLessThan(200);
  });

  it('never goes back: a sample that puts the reference earlier holds it still until the reference catches up', async () => {
    let offset = 0;
    const clock = new ReferenceClock(async () => {
      const sent = performance.now();
      return { reference: Date.now() + offset, sent, received: sent + (offset === 0 ? 10 : 1) };
    }, { intervalMs: 60_000 });
    await clock.sample();
    const before = clock.now();
    offset = -300; // a better sample (shorter round trip) 300 ms earlier
    await clock.sample();
    expect(clock.now()).toBe(before);
    await delay(400);
    expect(clock.now()).toBeGreaterThan(before);
  });

  it('keeps its last reading when a sample fails, and reports the failure', async () => {
    let fail = false;
    const errors: unknown[] = [];
    const clock = new ReferenceClock(async () => {
      if (fail) throw new Error('no database');
      return { reference: Date.now() - 30_000, sent: performance.now(), received: performance.now() };
    }, { intervalMs: 50, onError: (err) => errors.push(err) });
    await clock.start();
    fail = true;
    await delay(200);
    clock.stop();
    expect(errors.length).toBeGreaterThan(0);
    expect(Math.abs(clock.offsetMs()! - 30_000)).toBeLessThan(100);
  });
});
