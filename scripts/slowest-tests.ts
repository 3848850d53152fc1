// Prints the ten slowest test files.
//
//   npx tsx scripts/slowest-tests.ts                  # runs the whole suite once, then prints them
//   npx tsx scripts/slowest-tests.ts test/aws         # only these files or folders
//   npx tsx scripts/slowest-tests.ts --report r.json  # reads a report already written by
//                                                     # vitest run --reporter=json --outputFile=r.json
//   npx tsx scripts/slowest-tests.ts --report r.json --weights
//                                                     # also writes test/file-weights.json, the
//                                                     # order test/sequencer.ts runs files in
//
// A file's time is from its first test's start to its last test's end in its worker (vitest's
// JSON report: startTime, endTime), so it leaves out the module loading the worker shares with
// the files before it (vitest.config.ts: isolate false).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The part of vitest's JSON report this reads. */
export interface VitestJsonReport {
  readonly testResults: readonly {
    readonly name: string;
    readonly startTime: number;
    readonly endTime: number;
    readonly status: string;
    readonly assertionResults: readonly { readonly status: string }[];
  }[];
}

export interface FileTime {
  readonly file: string;
  readonly seconds: number;
  readonly tests: number;
  readonly failed: number;
}

/** The `count` slowest files, slowest first, with paths relative to `root`. */
export function slowestFiles(report: VitestJsonReport, root: string, count = 10): FileTime[] {
  return report.testResults
    .map((result) => ({
      file: relative(root, result.name),
      seconds: Math.max(0, result.endTime - result.startTime) / 1000,
      tests: result.assertionResults.length,
      failed: result.assertionResults.filter((a) => a.status === 'failed').length,
    }))
    .sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file))
    .slice(0, count);
}

/**
 * Every file's seconds, by path relative to `root`, sorted by path (test/file-weights.json: a
 * whole-suite report keeps the table complete; a partial one would drop the files it did not run).
 */
export function fileWeights(report: VitestJsonReport, root: string): Record<string, number> {
  const entries = report.testResults.map(
    (result) =>
      [
        relative(root, result.name),
        Math.round(Math.max(0, result.endTime - result.startTime) / 100) / 10,
      ] as const,
  );
  return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
}

/** One line per file, aligned, and the share of the whole report's time they take. */
export function formatSlowest(slowest: readonly FileTime[], report: VitestJsonReport): string {
  const total = report.testResults.reduce((sum, r) => sum + Math.max(0, r.endTime - r.startTime), 0) / 1000;
  const width = Math.max(...slowest.map((f) => f.file.length), 4);
  const lines = slowest.map(
    (f) =>
      `${f.seconds.toFixed(1).padStart(7)} s  ${f.file.padEnd(width)}  ${f.tests} test(s)${f.failed ? `, ${f.failed} failed` : ''}`,
  );
  const shown = slowest.reduce((sum, f) => sum + f.seconds, 0);
  const share = total > 0 ? Math.round((100 * shown) / total) : 0;
  return [
    `The ${slowest.length} slowest of ${report.testResults.length} test files (${share}% of ${total.toFixed(1)} s of file time):`,
    ...lines,
    '',
  ].join('\n');
}

function main(args: string[]): number {
  const root = process.cwd();
  const at = args.indexOf('--report');
  let reportFile: string;
  let scratch: string | undefined;
  if (at >= 0) {
    reportFile = args[at + 1];
    if (!reportFile) {
      process.stderr.write('slowest-tests: --report needs the path of a vitest JSON report\n');
      return 2;
    }
  } else {
    scratch = mkdtempSync(join(tmpdir(), 'lab-slowest-'));
    reportFile = join(scratch, 'report.json');
    const run = spawnSync(
      'npx',
      [
        'vitest',
        'run',
        '--reporter=dot',
        '--reporter=json',
        `--outputFile.json=${reportFile}`,
        ...args.filter((a) => a !== '--weights'),
      ],
      { stdio: 'inherit' },
    );
    if (run.error) throw run.error;
  }
  try {
    const report = JSON.parse(readFileSync(reportFile, 'utf8')) as VitestJsonReport;
    process.stdout.write(formatSlowest(slowestFiles(report, root), report));
    if (args.includes('--weights')) {
      const file = join(root, 'test', 'file-weights.json');
      writeFileSync(file, `${JSON.stringify(fileWeights(report, root), null, 2)}\n`);
      process.stdout.write(`wrote ${relative(root, file)}\n`);
    }
    return 0;
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = main(process.argv.slice(2));
}
