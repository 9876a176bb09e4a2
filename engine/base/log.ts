import type { LogLevel } from './config.js';

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** JSON lines on stderr. Internal details go here, never into client responses. */
export class Logger {
  constructor(private readonly level: LogLevel) {}

  /** Whether lines of `level` are written (to skip building their fields). */
  enabled(level: Exclude<LogLevel, 'silent'>): boolean {
    return ORDER[level] >= ORDER[this.level];
  }

  private write(level: Exclude<LogLevel, 'silent'>, msg: string, fields?: Record<string, unknown>): void {
    if (ORDER[level] < ORDER[this.level]) return;
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
  }

  debug(msg: string, fields?: Record<string, unknown>) {
    this.write('debug', msg, fields);
  }
  info(msg: string, fields?: Record<string, unknown>) {
    this.write('info', msg, fields);
  }
  warn(msg: string, fields?: Record<string, unknown>) {
    this.write('warn', msg, fields);
  }
  error(msg: string, fields?: Record<string, unknown>) {
    this.write('error', msg, fields);
  }
}
