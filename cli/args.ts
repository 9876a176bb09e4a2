// Command-line parsing (node:util parseArgs, strict): options with values (`--name VALUE`,
// `--name=VALUE`, `-o VALUE`), flags, `--` before operands that start with a dash; sizes, counts
// and the server's URL.

import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';
import { useToken } from './http.js';

/** A command's options by long name, as node:util parseArgs takes them. */
type OptionSpecs = Record<string, { type: 'string' | 'boolean'; short?: string }>;

export interface Parsed {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

/** A client command: what `--help` prints, the options it takes, and what it does. */
export interface Command {
  usage: string;
  options: OptionSpecs;
  run(parsed: Parsed): Promise<number>;
}

/** Parses `argv` against `options` plus `--help`/`-h`; anything else is a UsageError. */
export function parseCommandLine(argv: string[], options: OptionSpecs): Parsed {
  try {
    const { positionals, values } = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
    return { positionals, values };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError(parseArgsMessage(err));
    throw err;
  }
}

/** parseArgs' message on one line, without its advice on positionals (docs/cli.md gives it). */
export function parseArgsMessage(err: unknown): string {
  return String((err as Error).message)
    .replace(/\. (To specify a positional argument|This command does not take positional arguments).*$/s, '')
    .replace(/(?<!\s)\s*\n\s*/g, ' ');
}

export function stringOption(parsed: Parsed, name: string): string | undefined {
  const v = parsed.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function flag(parsed: Parsed, name: string): boolean {
  return parsed.values[name] === true;
}

const UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1024, kib: 1024, kb: 1000,
  m: 1024 ** 2, mib: 1024 ** 2, mb: 1000 ** 2,
  g: 1024 ** 3, gib: 1024 ** 3, gb: 1000 ** 3,
};

/** `8MiB`, `512KiB`, `1GiB`, `4096`, `10MB` (K/M/G alone are binary). */
export function parseSize(raw: string, what: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/i.exec(raw.trim());
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new UsageError(`${what}: "${raw}" is not a size (examples: 4096, 512KiB, 8MiB, 1GiB)`);
  const n = Math.round(Number(m[1]) * unit);
  if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`${what}: "${raw}" must be at least one byte`);
  return n;
}

export function parseCount(raw: string, what: string, min: number, max: number): number {
  if (!/^[0-9]+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new UsageError(`${what} must be an integer from ${min} to ${max}`);
  return Number(raw);
}

/**
 * The server's base URL: `--server`, else SVC_SERVER, else the local default. Also sets the
 * bearer token every request of this run carries: `--token`, else SVC_TOKEN, else none.
 */
export function serverUrl(parsed: Parsed): string {
  const token = stringOption(parsed, 'token') ?? process.env.SVC_TOKEN;
  if (token !== undefined && token !== '') useToken(token);
  const raw = stringOption(parsed, 'server') ?? process.env.SVC_SERVER ?? 'http://127.0.0.1:8081';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--server: "${raw}" is not a URL (example: http://127.0.0.1:8081)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--server: "${raw}" must be an http:// or https:// URL`);
  return url.href.replace(/(?<!\/)\/+$/, '');
}

export const SERVER_OPTION: OptionSpecs = { server: { type: 'string' }, token: { type: 'string' } };
