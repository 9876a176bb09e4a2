/**
 * The benchmarks' one argument parser, on node:util `parseArgs` (strict). A bench describes its
 * options (name, boolean or string, default, a help line) and its usage line; `benchArgs` parses
 * process.argv and returns typed values:
 *
 * - `--help` (or `-h`) prints the usage and the options' help lines on stdout and exits 0, before
 *   the bench does anything else;
 * - an unknown option, a stray positional, a boolean given a value or a string option given none
 *   prints what is wrong and the usage on stderr and exits 2 (`fail` does the same for the bench's
 *   own checks: a required option, options that exclude each other, a number out of range).
 *
 * String options take `--before=DIR` and `--before DIR` alike. A bench that is also imported by
 * another (pg-s3, gc-ops, peers-nginx) calls this in its `main`, never at module level.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';

export interface BooleanOption {
  type: 'boolean';
  help: string;
}

export interface StringOption {
  type: 'string';
  help: string;
  /** Shown in the help as `--name=VALUE` (default `VALUE`). */
  value?: string;
  /** The value when the option is absent; said in the help line. */
  default?: string;
}

export type OptionSpec = BooleanOption | StringOption;

/** A positional argument (only tus-server, a child process, takes any). */
export interface PositionalSpec {
  name: string;
  help: string;
  optional?: boolean;
}

export interface ArgsSpec<O extends Record<string, OptionSpec>> {
  /** The usage line, `usage: node dist/bench/<name>.js [--quick] ...`. */
  usage: string;
  options: O;
  positionals?: readonly PositionalSpec[];
  /** Default process.argv.slice(2). */
  argv?: string[];
}

type ValueOf<S extends OptionSpec> = S extends BooleanOption ? boolean : S extends { default: string } ? string : string | undefined;
export type Values<O extends Record<string, OptionSpec>> = { -readonly [K in keyof O]: ValueOf<O[K]> };

export interface NumberRule {
  /** Whole numbers only (default true). */
  integer?: boolean;
  /** The least value accepted (default 1). */
  min?: number;
}

export interface BenchArgs<O extends Record<string, OptionSpec>> {
  values: Values<O>;
  positionals: string[];
  /** Prints `message` and the usage on stderr and exits 2. */
  fail(message: string): never;
  /** A string option read as a number (undefined when absent without default); fails when it is not one. */
  number<K extends StringKeys<O>>(name: K, rule?: NumberRule): O[K] extends { default: string } ? number : number | undefined;
}

type StringKeys<O extends Record<string, OptionSpec>> = { [K in keyof O]: O[K] extends StringOption ? K : never }[keyof O] & string;

const HELP: BooleanOption = { type: 'boolean', help: 'print this help and exit' };

/** The help text: the usage line, then one line per option (and positional). */
export function helpText(spec: ArgsSpec<Record<string, OptionSpec>>): string {
  const rows: [string, string][] = (spec.positionals ?? []).map((p) => [p.optional ? `[${p.name}]` : p.name, p.help]);
  for (const [name, o] of Object.entries(spec.options)) {
    const flag = o.type === 'string' ? `--${name}=${o.value ?? 'VALUE'}` : `--${name}`;
    rows.push([flag, o.type === 'string' && o.default !== undefined ? `${o.help} (default: ${o.default})` : o.help]);
  }
  rows.push(['-h, --help', HELP.help]);
  const width = Math.max(...rows.map(([flag]) => flag.length));
  return `${spec.usage}\n\n${rows.map(([flag, help]) => `  ${flag.padEnd(width)}  ${help}`).join('\n')}\n`;
}

export function benchArgs<const O extends Record<string, OptionSpec>>(spec: ArgsSpec<O>): BenchArgs<O> {
  const program = path.basename(process.argv[1] ?? 'bench', '.js');
  const fail = (message: string): never => {
    process.stderr.write(`${program}: ${message}\n${helpText(spec)}`);
    process.exit(2);
  };
  const argv = spec.argv ?? process.argv.slice(2);
  const options: Record<string, { type: 'boolean' | 'string'; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options)) options[name] = { type: o.type };
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: spec.positionals !== undefined });
  } catch (err) {
    // A bad command line may still ask for help: help wins, as a reader expects.
    if (argv.includes('--help') || argv.includes('-h')) help(spec);
    return fail(err instanceof Error ? err.message : String(err));
  }
  if (parsed.values.help) help(spec);
  const wanted = spec.positionals ?? [];
  const required = wanted.filter((p) => !p.optional).length;
  if (parsed.positionals.length < required || parsed.positionals.length > wanted.length) {
    fail(`expected ${required === wanted.length ? required : `${required} to ${wanted.length}`} positional argument(s), got ${parsed.positionals.length}`);
  }
  const values: Record<string, string | boolean | undefined> = {};
  for (const [name, o] of Object.entries(spec.options)) {
    const v = parsed.values[name];
    if (o.type === 'boolean') values[name] = v === true;
    else if (v === '') fail(`--${name} needs a value`);
    else values[name] = v ?? o.default;
  }
  return {
    values: values as Values<O>,
    positionals: parsed.positionals,
    fail,
    number<K extends StringKeys<O>>(name: K, rule: NumberRule = {}) {
      type Result = O[K] extends { default: string } ? number : number | undefined;
      const raw = values[name];
      if (raw === undefined) return undefined as Result;
      const n = Number(raw);
      const integer = rule.integer ?? true;
      const min = rule.min ?? 1;
      if (typeof raw !== 'string' || raw.trim() === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min) {
        fail(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, not "${String(raw)}"`);
      }
      return n as Result;
    },
  };
}

function help(spec: ArgsSpec<Record<string, OptionSpec>>): never {
  process.stdout.write(helpText(spec));
  process.exit(0);
}
