// Command-line parsing: options with values (`--name VALUE`, `--name=VALUE`, `-o VALUE`), flags, sizes.

import { UsageError } from './errors.js';

export interface OptionSpec {
  /** Long name without the dashes. */
  name: string;
  /** One-letter alias without the dash. */
  short?: string;
  /** Takes a value (else a flag). */
  value: boolean;
}

export interface Parsed {
  positionals: string[];
  options: Map<string, string | true>;
}

export function parseArgs(argv: string[], specs: OptionSpec[]): Parsed {
  const positionals: string[] = [];
  const options = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const key = arg.startsWith('--') ? arg.slice(2, eq < 0 ? undefined : eq) : arg.slice(1, 2);
    const spec = specs.find((s) => (arg.startsWith('--') ? s.name === key : s.short === key));
    if (!spec) throw new UsageError(`unknown option ${eq < 0 ? arg : arg.slice(0, eq)}`);
    if (!spec.value) {
      if (eq >= 0) throw new UsageError(`--${spec.name} takes no value`);
      options.set(spec.name, true);
      continue;
    }
    let value: string | undefined;
    if (arg.startsWith('--')) value = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
    else value = arg.length > 2 ? arg.slice(2) : argv[++i];
    if (value === undefined) throw new UsageError(`--${spec.name} needs a value`);
    options.set(spec.name, value);
  }
  return { positionals, options };
}

export function stringOption(parsed: Parsed, name: string): string | undefined {
  const v = parsed.options.get(name);
  return typeof v === 'string' ? v : undefined;
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

/** The server's base URL: `--server`, else SVC_SERVER, else the local default. */
export function serverUrl(parsed: Parsed): string {
  const raw = stringOption(parsed, 'server') ?? process.env.SVC_SERVER ?? 'http://127.0.0.1:8081';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--server: "${raw}" is not a URL (example: http://127.0.0.1:8081)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--server: "${raw}" must be an http:// or https:// URL`);
  return url.href.replace(/\/+$/, '');
}

export const SERVER_OPTION: OptionSpec = { name: 'server', value: true };
