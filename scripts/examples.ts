/**
 * Example outputs in README.md and docs/*.md, kept equal to what the `lab` command prints.
 *
 * A block is marked by an HTML comment on the line before its opening fence:
 *
 *     <!-- example: --config examples/network-lab.yaml plan | ^  cells run in parallel -->
 *
 * Before the `|`: the `lab` arguments (split on spaces; no quoting). After it, optionally: a
 * regular expression; only the lines it matches are kept. The block holds what the command writes
 * to standard output and standard error, in the order written, with the checkout's own path shown
 * as a relative one (a path differs between machines, the rest must not).
 *
 * scripts/update-examples.ts rewrites the blocks (`npm run docs:examples`);
 * test/docs/examples.test.ts fails when one differs.
 *
 * An excerpt of a command's JSON is marked `<!-- example-json: <args> -->`: each line of its block
 * is one JSON object that must appear, key for key, somewhere in what the command prints (an
 * excerpt cannot be regenerated, so it is checked instead).
 *
 * Output that no offline `lab` command prints (a rehearsal's smoke checklist, the simulator's
 * calibration table) is marked `<!-- example-of: <source> -->`, a name of EXAMPLE_SOURCES
 * (scripts/example-sources.ts): code that makes the block from the lab's own code. Its block is a
 * fenced one, or a Markdown table (the lines that start with `|`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout this script belongs to. */
export const REPO_ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));

const MARKER = /^<!-- example: (.+?) -->\s*$/;
const JSON_MARKER = /^<!-- example-json: (.+?) -->\s*$/;
const SOURCE_MARKER = /^<!-- example-of: (\S+) -->\s*$/;
/** How a block of a named source is keyed among the specs (it has no lab arguments). */
const SOURCE_SPEC = 'example-of: ';

/** One marked block of a Markdown file. */
export interface ExampleBlock {
  /** What the marker says, as written: `<args> [| <filter>]`; `example-of: <source>` for a named source. */
  readonly spec: string;
  /** Arguments of `lab` (none for a named source). */
  readonly args: readonly string[];
  /** The name in EXAMPLE_SOURCES that makes the block, for an `example-of` marker. */
  readonly source?: string;
  /** Lines to keep, when the marker names a filter. */
  readonly filter?: RegExp;
  /** Index of the first line inside the fence, or of a table's first line (0-based). */
  readonly firstLine: number;
  /** Index of the closing fence, or of the first line after a table. */
  readonly fenceEnd: number;
  /** The block's text now, without the fences. */
  readonly text: string;
}

/** Parses `<args> [| <filter>]`; throws on a marker it cannot use, naming it. */
export function parseSpec(spec: string): { args: string[]; filter?: RegExp } {
  const bar = spec.indexOf(' | ');
  const command = (bar < 0 ? spec : spec.slice(0, bar)).trim();
  const args = command.split(/\s+/).filter((arg) => arg !== '');
  if (args.length === 0) throw new Error(`example marker "${spec}" names no lab arguments`);
  if (bar < 0) return { args };
  const pattern = spec.slice(bar + 3);
  if (pattern.trim() === '') throw new Error(`example marker "${spec}" has an empty filter after "|"`);
  return { args, filter: new RegExp(pattern) };
}

/** The spec of a named source's block. */
export function sourceSpec(source: string): string {
  return `${SOURCE_SPEC}${source}`;
}

/**
 * Every marked block of a Markdown text, in order: the `example` and `example-of` blocks, or with
 * `json` the JSON excerpts instead.
 */
export function findExamples(markdown: string, file = 'markdown', json = false): ExampleBlock[] {
  const lines = markdown.split('\n');
  const blocks: ExampleBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const match = (json ? JSON_MARKER : MARKER).exec(line);
    const source = json ? undefined : SOURCE_MARKER.exec(line)?.[1];
    if (!match && source === undefined) continue;
    const spec = source === undefined ? (match?.[1] ?? '') : sourceSpec(source);
    const head = source === undefined ? parseSpec(spec) : { args: [], source };
    if (source !== undefined && lines[i + 1]?.startsWith('|')) {
      // A Markdown table: it ends at its first line that is not a row.
      const after = lines.findIndex((row, k) => k > i && !row.startsWith('|'));
      const end = after < 0 ? lines.length : after;
      blocks.push({
        spec,
        ...head,
        firstLine: i + 1,
        fenceEnd: end,
        text: lines.slice(i + 1, end).join('\n'),
      });
      continue;
    }
    if (!lines[i + 1]?.startsWith('```'))
      throw new Error(
        `${file}:${i + 1}: example marker "${spec}" must be followed by a fenced block${source === undefined ? '' : ' or a table'}`,
      );
    const fenceEnd = lines.findIndex((row, k) => k > i + 1 && row.startsWith('```'));
    if (fenceEnd < 0)
      throw new Error(`${file}:${i + 1}: the block after example marker "${spec}" is not closed`);
    blocks.push({
      spec,
      ...head,
      firstLine: i + 2,
      fenceEnd,
      text: lines.slice(i + 2, fenceEnd).join('\n'),
    });
  }
  return blocks;
}

/** What a command's output looks like in a block: filtered, the checkout's path made relative. */
export function blockText(output: string, filter?: RegExp): string {
  const relative = output.split(`${REPO_ROOT}/`).join('');
  const lines = relative.replace(/\n+$/, '').split('\n');
  return (filter ? lines.filter((line) => filter.test(line)) : lines).join('\n');
}

/** The Markdown with each block's text replaced by `texts[spec]`. */
export function withTexts(markdown: string, texts: ReadonlyMap<string, string>, file = 'markdown'): string {
  const lines = markdown.split('\n');
  // Last block first, so earlier line indices stay valid.
  for (const block of findExamples(markdown, file).reverse()) {
    const text = texts.get(block.spec);
    if (text === undefined) continue;
    lines.splice(block.firstLine, block.fenceEnd - block.firstLine, ...text.split('\n'));
  }
  return lines.join('\n');
}

/**
 * Runs `lab <args>` in this process (no child: the plan's simulation is the only cost), from the
 * checkout, and returns what it wrote to standard output and standard error, interleaved as
 * written. LAB_CONFIG is unset meanwhile: a marker names its configuration with --config.
 */
export async function runLabCaptured(args: readonly string[]): Promise<string> {
  const [{ runLab }, { exampleOutput }] = await Promise.all([
    import('../lib/cli/program.ts'),
    import('../test/cli/example-output.ts'),
  ]);
  const { stdout } = await exampleOutput(() => runLab(args), { stderr: true, cwd: REPO_ROOT });
  return stdout;
}

/** README.md and every page under docs/, relative to the checkout. */
export function documentationFiles(): string[] {
  const docs = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Each file's blocks, read from disk. */
export function examplesOnDisk(): { file: string; markdown: string; blocks: ExampleBlock[] }[] {
  return documentationFiles().map((file) => {
    const markdown = readFileSync(join(REPO_ROOT, file), 'utf8');
    return { file, markdown, blocks: findExamples(markdown, file) };
  });
}

/**
 * What every distinct block shows now: each `lab` command run once, each named source made once
 * (`sources`: the registry, EXAMPLE_SOURCES unless a test passes its own).
 */
export async function currentOutputs(
  specs: Iterable<string>,
  sources?: Readonly<Record<string, ExampleSource>>,
): Promise<Map<string, string>> {
  const outputs = new Map<string, string>(); // args -> raw output
  const texts = new Map<string, string>(); // spec -> block text
  for (const spec of specs) {
    if (texts.has(spec)) continue;
    if (spec.startsWith(SOURCE_SPEC)) {
      const name = spec.slice(SOURCE_SPEC.length);
      const registry = sources ?? (await import('./example-sources.ts')).EXAMPLE_SOURCES;
      const source = registry[name];
      if (!source)
        throw new Error(
          `example-of marker names "${name}", which is no example source; allowed: ${Object.keys(registry).join(', ')}`,
        );
      // Only its test makes it (ExampleSource.make): the block stays as written.
      if (source.make) texts.set(spec, (await source.make()).replace(/\n+$/, ''));
      continue;
    }
    const { args, filter } = parseSpec(spec);
    const key = args.join(' ');
    if (!outputs.has(key)) outputs.set(key, await runLabCaptured(args));
    texts.set(spec, blockText(outputs.get(key) ?? '', filter));
  }
  return texts;
}

/** Code that makes an `example-of` block from the lab's own code (scripts/example-sources.ts). */
export interface ExampleSource {
  /** What the block shows and which code makes it, for the reader of the registry. */
  readonly what: string;
  /**
   * The block's text, without fences. Absent when only a test can make it (its mocks need vitest):
   * then `checkedBy` names that test, and npm run docs:examples leaves the block as it is.
   */
  readonly make?: () => Promise<string>;
  /**
   * A test file that already runs the code behind the block and compares the page's block with
   * what it makes (sourceBlockOnPage); test/docs/examples.test.ts then leaves the block to it
   * instead of running the same code a second time.
   */
  readonly checkedBy?: string;
}

/** The text of the `example-of: <source>` block of a page (relative to the checkout); throws when it has none. */
export function sourceBlockOnPage(file: string, source: string): string {
  const blocks = findExamples(readFileSync(join(REPO_ROOT, file), 'utf8'), file);
  const block = blocks.find((b) => b.source === source);
  if (!block) throw new Error(`${file} has no <!-- example-of: ${source} --> block`);
  return block.text;
}

/** Every object and array element inside a JSON value, the value itself included. */
function jsonObjects(value: unknown): Record<string, unknown>[] {
  if (Array.isArray(value)) return value.flatMap(jsonObjects);
  if (value === null || typeof value !== 'object') return [];
  const object = value as Record<string, unknown>;
  return [object, ...Object.values(object).flatMap(jsonObjects)];
}

/** The lines of a JSON excerpt that match no object of the command's JSON output. */
export function missingJsonLines(output: string, excerpt: string): string[] {
  const objects = jsonObjects(JSON.parse(output));
  return excerpt
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      const wanted = JSON.parse(line) as Record<string, unknown>;
      return !objects.some((object) =>
        Object.entries(wanted).every(([key, value]) => JSON.stringify(object[key]) === JSON.stringify(value)),
      );
    });
}
