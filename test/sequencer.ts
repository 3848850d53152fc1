import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Test files in the order vitest hands them to its workers: the longest first. Each file is a task
 * a free worker takes from one queue, so a long file taken last keeps one core busy after the
 * other has finished (the suite's tail). vitest's own order needs the results of a previous run
 * (node_modules/.vite); a fresh clone has none, and there it orders by file size (docs/facts.md §7),
 * a poor guide: a short file that spawns the lab command or Chromium can take longer than a long
 * file of pure checks.
 *
 * The weights are measured seconds per file (test/file-weights.json, written by
 * `npx tsx scripts/slowest-tests.ts --weights`). A file not in the table takes vitest's time from
 * a previous run when there is one, else the table's median, so a new file is neither first nor last.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const table = fileWeights();
    return longestFirst(
      files,
      (spec) => {
        const file = relative(root, spec.moduleId);
        const previous = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`);
        return table[file] ?? (previous ? previous.duration / 1000 : undefined);
      },
      median(Object.values(table)),
    );
  }
}

/** The measured seconds per test file, by path from the repository root. */
export function fileWeights(): Record<string, number> {
  return JSON.parse(readFileSync(new URL('./file-weights.json', import.meta.url), 'utf8'));
}

/**
 * `files` sorted by weight, heaviest first (ties by path, so the order is the same on every
 * machine); a file without a weight counts `fallback`.
 */
export function longestFirst<T extends { readonly moduleId: string }>(
  files: readonly T[],
  weightOf: (file: T) => number | undefined,
  fallback: number,
): T[] {
  const weighed = files.map((file) => ({ file, weight: weightOf(file) ?? fallback }));
  weighed.sort((a, b) => b.weight - a.weight || a.file.moduleId.localeCompare(b.file.moduleId));
  return weighed.map(({ file }) => file);
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
