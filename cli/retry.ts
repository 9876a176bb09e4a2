// Retrying with exponential backoff under a time budget: a server restart, a dropped connection
// or a 5xx costs a wait, not the transfer.

import { CliError, describe, isRetryable } from './errors.js';

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 10_000;

/** Seconds of retrying allowed without progress (SVC_RETRY_SECONDS, default 120). */
export function retryBudgetMs(): number {
  const raw = process.env.SVC_RETRY_SECONDS;
  const s = raw === undefined || raw === '' ? 120 : Number(raw);
  return Number.isFinite(s) && s >= 0 ? s * 1000 : 120_000;
}

export class Backoff {
  private since?: number;
  private attempt = 0;

  constructor(
    /** Called before each wait, to tell the user. */
    private readonly onRetry: (err: unknown, delayMs: number, attempt: number) => void = () => {},
    private readonly budgetMs = retryBudgetMs(),
  ) {}

  /** Progress was made: the next failure starts a new budget. */
  reset(): void {
    this.since = undefined;
    this.attempt = 0;
  }

  /** Waits before the next attempt; rethrows `err` when it is not worth retrying or the budget is spent. */
  async wait(err: unknown): Promise<void> {
    if (!isRetryable(err)) throw err;
    const now = Date.now();
    this.since ??= now;
    const left = this.since + this.budgetMs - now;
    if (left <= 0) throw new CliError(`gave up after ${Math.round((now - this.since) / 1000)} s of retrying: ${describe(err)}`);
    const base = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.attempt);
    const delay = Math.min(left, Math.round(base * (0.8 + Math.random() * 0.4)));
    this.attempt++;
    this.onRetry(err, delay, this.attempt);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }

  /** Runs `attempt` until it succeeds, waiting between failures. */
  async retry<T>(attempt: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await attempt();
      } catch (err) {
        await this.wait(err);
      }
    }
  }
}

export function retryNote(what: string): (err: unknown, delayMs: number, attempt: number) => string {
  return (err, delayMs, attempt) => `${what}: ${describe(err)}; retrying in ${(delayMs / 1000).toFixed(1)} s (attempt ${attempt + 1})`;
}
