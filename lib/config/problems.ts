import type { z } from 'zod';

/**
 * Turns schema issues into messages a person can act on: the setting, the value it had, and what
 * is allowed. All problems of one configuration are reported together.
 */

export interface ConfigProblem {
  /** Dotted setting name and the offending value, e.g. `vllm.blockSize = 24`. */
  readonly setting: string;
  readonly message: string;
}

export class LabConfigError extends Error {
  constructor(
    readonly problems: readonly ConfigProblem[],
    readonly source: string,
  ) {
    const lines = problems.map((p) => `  - ${p.setting}: ${p.message}`);
    super(`Invalid lab configuration (${source}): ${problems.length} problem(s)\n${lines.join('\n')}`);
    this.name = 'LabConfigError';
  }
}

export function settingName(path: readonly PropertyKey[]): string {
  let name = '';
  for (const key of path) {
    if (typeof key === 'number') name += `[${key}]`;
    else name += name ? `.${String(key)}` : String(key);
  }
  return name || '(top level)';
}

export function describeIssues(
  issues: readonly z.core.$ZodIssue[],
  input: unknown,
  knownKeys: (path: readonly PropertyKey[]) => string[],
): ConfigProblem[] {
  return issues.flatMap((issue) => {
    if (issue.code === 'unrecognized_keys') {
      const allowed = knownKeys(issue.path);
      return issue.keys.map((key) => ({
        setting: settingName([...issue.path, key]),
        message: `unknown setting${suggestion(key, allowed)}; allowed here: ${allowed.join(', ')}`,
      }));
    }
    const value = 'input' in issue && issue.input !== undefined ? issue.input : valueAt(input, issue.path);
    return [{ setting: `${settingName(issue.path)}${showValue(value)}`, message: explain(issue) }];
  });
}

/** ` = <value>` for values short enough to read in one line; whole objects are left out. */
function showValue(value: unknown): string {
  if (value === undefined || (typeof value === 'object' && value !== null && !Array.isArray(value)))
    return '';
  const json = JSON.stringify(value);
  return json.length <= 80 ? ` = ${json}` : '';
}

/** Zod's own wording starts like this; anything else is a message the schema wrote for people. */
const GENERIC_MESSAGE = /^(Too (small|big)|Invalid|Expected)/;

function explain(issue: z.core.$ZodIssue): string {
  if (!GENERIC_MESSAGE.test(issue.message)) return issue.message;
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int') return 'must be a whole number';
      return issue.input === undefined
        ? `is required (${withArticle(issue.expected)})`
        : `must be ${withArticle(issue.expected)}`;
    case 'too_small':
      if (issue.origin === 'array') return `needs at least ${issue.minimum} item(s)`;
      if (issue.origin === 'string') return 'must not be empty';
      return issue.inclusive ? `must be at least ${issue.minimum}` : `must be greater than ${issue.minimum}`;
    case 'too_big':
      if (issue.origin === 'string') return `must be at most ${issue.maximum} characters`;
      return issue.inclusive ? `must be at most ${issue.maximum}` : `must be less than ${issue.maximum}`;
    case 'invalid_value':
      return `allowed: ${issue.values.map(String).join(', ')}`;
    case 'invalid_format':
      return `has the wrong format (${issue.format})`;
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    default:
      return issue.message;
  }
}

/** "a number", "an array": zod names the expected type with a bare word. */
export function withArticle(noun: string): string {
  return `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`;
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let node: unknown = root;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/** "did you mean" for a mistyped key: the allowed key with the smallest edit distance, if close. */
export function suggestion(key: string, allowed: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of allowed) {
    const d = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(key.length / 3))
    ? ` (did you mean "${best}"?)`
    : '';
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
    }
    previous = current;
  }
  return previous[b.length];
}
