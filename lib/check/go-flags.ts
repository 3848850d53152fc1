/**
 * Reading an Endpoint Picker's command line the way its Go `flag` package does (GAIE v1.0.1
 * cmd/epp/runner/runner.go defines every flag with the standard library's `flag`, and
 * llm-d-inference-scheduler v0.3.2 cmd/epp/main.go runs that same runner). The rules, from Go's
 * flag.FlagSet.parseOne:
 * - `-name` and `--name` are the same flag; `-name=value` / `--name=value` give a value inline.
 * - A boolean flag takes a value only inline: `--secure-serving false` sets it to true, and then
 *   `false` is a positional argument, where parsing STOPS: every later flag is ignored.
 * - Any other flag without `=` takes the next word as its value, even one starting with `-`.
 * - A word not starting with `-` (or a lone `-`) stops parsing; `--` stops it and is dropped.
 */

/** Boolean flags of the EPP: GAIE v1.0.1 runner.go `flag.Bool(...)`, plus controller-runtime zap's `zap-devel`. */
export const EPP_BOOL_FLAGS: ReadonlySet<string> = new Set([
  'enable-pprof',
  'secure-serving',
  'health-checking',
  'model-server-metrics-https-insecure-skip-verify',
  'ha-enable-leader-election',
  'zap-devel',
]);

/** Values strconv.ParseBool accepts. */
const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export interface GoFlags {
  /** Last value of each flag that was parsed (`true` for a bare boolean flag). */
  readonly values: ReadonlyMap<string, string>;
  /**
   * Where parsing stopped early: the positional word, and the words after it that Go ignores.
   * Undefined when every word was parsed.
   */
  readonly stoppedAt?: { readonly word: string; readonly index: number; readonly ignored: readonly string[] };
  /** A word Go rejects (`---x`, `-=x`, a boolean flag with a non-boolean value): the program exits. */
  readonly error?: string;
}

/**
 * Parses Go-style flags. `words` may start with the program (`/epp`), which is skipped; an image's
 * entrypoint with only `args` gives flags from the first word.
 */
export function parseGoFlags(
  words: readonly string[],
  boolFlags: ReadonlySet<string> = EPP_BOOL_FLAGS,
): GoFlags {
  const values = new Map<string, string>();
  let i = words.length > 0 && !words[0].startsWith('-') ? 1 : 0;
  while (i < words.length) {
    const word = words[i];
    if (word.length < 2 || !word.startsWith('-')) {
      return { values, stoppedAt: { word, index: i, ignored: words.slice(i + 1) } };
    }
    if (word === '--') {
      const rest = words.slice(i + 1);
      return rest.length > 0 ? { values, stoppedAt: { word, index: i, ignored: rest } } : { values };
    }
    const body = word.startsWith('--') ? word.slice(2) : word.slice(1);
    if (body === '' || body.startsWith('-') || body.startsWith('=')) {
      return { values, error: `bad flag syntax: ${word}` };
    }
    const eq = body.indexOf('=');
    const name = eq < 0 ? body : body.slice(0, eq);
    if (boolFlags.has(name)) {
      if (eq < 0) values.set(name, 'true');
      else {
        const value = body.slice(eq + 1);
        if (!GO_TRUE.has(value) && !GO_FALSE.has(value)) {
          return { values, error: `invalid boolean value "${value}" for -${name}` };
        }
        values.set(name, GO_TRUE.has(value) ? 'true' : 'false');
      }
      i += 1;
    } else if (eq >= 0) {
      values.set(name, body.slice(eq + 1));
      i += 1;
    } else if (i + 1 < words.length) {
      values.set(name, words[i + 1]);
      i += 2;
    } else {
      return { values, error: `flag needs an argument: ${word}` };
    }
  }
  return { values };
}

/** Whether any word names this flag, in either spelling, parsed or not (finds an EPP by `--pool-name`). */
export function mentionsGoFlag(words: readonly string[], name: string): boolean {
  return words.some((word) => [`-${name}`, `--${name}`].some((f) => word === f || word.startsWith(`${f}=`)));
}

/** A boolean flag's effective value, or its default. */
export function goBool(flags: GoFlags, name: string, fallback: boolean): boolean {
  const value = flags.values.get(name);
  return value === undefined ? fallback : value === 'true';
}
