/**
 * Command-line settings of the probes: `--name value` or `--name=value`, falling back to the
 * environment variable `PROBE_<NAME>` (upper snake case) so a pod spec can set them either way.
 * Pure: argv and env are parameters.
 */

interface FlagBase {
  /** One line shown in error messages. */
  readonly description: string;
}

export interface NumberFlag extends FlagBase {
  readonly kind: 'int' | 'number';
  readonly min: number;
  readonly max?: number;
  /** Absent: the flag is required. */
  readonly default?: number;
}

export interface StringFlag extends FlagBase {
  readonly kind: 'string';
  /** Absent: the flag is required. */
  readonly default?: string;
}

/** May be given several times (or comma-separated in the environment); empty when absent. */
export interface StringListFlag extends FlagBase {
  readonly kind: 'strings';
}

export type FlagSpec = NumberFlag | StringFlag | StringListFlag;
export type FlagSpecs = Record<string, FlagSpec>;

export type FlagValues<S extends FlagSpecs> = {
  readonly [K in keyof S]: S[K] extends StringListFlag ? string[] : S[K] extends StringFlag ? string : number;
};

/** The environment variable read when a flag is not on the command line. */
export function envName(flag: string): string {
  return `PROBE_${flag.toUpperCase().replace(/-/g, '_')}`;
}

function parseNumber(flag: string, spec: NumberFlag, raw: string): number {
  const value = Number(raw);
  const integer = spec.kind === 'int';
  const range = spec.max === undefined ? `>= ${spec.min}` : `from ${spec.min} to ${spec.max}`;
  if (
    raw.trim() === '' ||
    !Number.isFinite(value) ||
    (integer && !Number.isInteger(value)) ||
    value < spec.min ||
    (spec.max !== undefined && value > spec.max)
  ) {
    throw new Error(`--${flag} must be ${integer ? 'an integer' : 'a number'} ${range}, got '${raw}'`);
  }
  return value;
}

/** Splits argv into flag -> raw values, rejecting unknown flags and missing values. */
function collect(specs: FlagSpecs, argv: readonly string[]): Map<string, string[]> {
  const given = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) throw new Error(`unexpected argument '${arg}' (settings are --name value)`);
    const equals = arg.indexOf('=');
    const name = equals === -1 ? arg.slice(2) : arg.slice(2, equals);
    if (!(name in specs)) {
      throw new Error(
        `unknown flag --${name}; allowed: ${Object.keys(specs)
          .map((f) => `--${f}`)
          .join(', ')}`,
      );
    }
    const value: string | undefined = equals === -1 ? argv[i + 1] : arg.slice(equals + 1);
    if (equals === -1) {
      if (value === undefined || value.startsWith('--')) throw new Error(`--${name} needs a value`);
      i++;
    }
    given.set(name, [...(given.get(name) ?? []), value]);
  }
  return given;
}

/** The settings of one probe from its argv and environment; throws naming the flag and the bad value. */
export function parseFlags<S extends FlagSpecs>(
  specs: S,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): FlagValues<S> {
  const given = collect(specs, argv);
  const values: Record<string, number | string | string[]> = {};
  for (const [flag, spec] of Object.entries(specs)) {
    const fromEnv = env[envName(flag)];
    const raws = given.get(flag) ?? (fromEnv === undefined ? [] : [fromEnv]);
    if (spec.kind === 'strings') {
      values[flag] = given.has(flag) ? raws : raws.flatMap((raw) => raw.split(',')).filter((s) => s !== '');
      continue;
    }
    if (raws.length > 1) throw new Error(`--${flag} was given ${raws.length} times; give it once`);
    const raw = raws[0];
    if (raw === undefined) {
      if (spec.default === undefined) {
        throw new Error(`--${flag} is required (${spec.description}; or set ${envName(flag)})`);
      }
      values[flag] = spec.default;
    } else {
      values[flag] = spec.kind === 'string' ? raw : parseNumber(flag, spec, raw);
    }
  }
  return values as FlagValues<S>;
}

/** `host:port` with a port from 1 to 65535; IPv6 hosts in brackets (`[::1]:80`). */
export function parseHostPort(flag: string, raw: string): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:[\]]+):(\d+)$/.exec(raw);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || !(port >= 1 && port <= 65535)) {
    throw new Error(`--${flag} must be host:port with a port from 1 to 65535, got '${raw}'`);
  }
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}
