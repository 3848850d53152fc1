/**
 * Start-up time of the `lab` command line as a user runs it: `bin/lab.ts --help` and
 * `bin/lab.ts config`, each spawned N times (default 15) after one untimed run that fills tsx's
 * transform cache, from outside the repository (the shebang line finds tsx itself). Prints the
 * median, the fastest and the slowest run of each against the targets of issue 14, and the load
 * average: on a busy 2-core machine every figure rises with it.
 *
 * Run: npx tsx scripts/bench-startup.ts [runs]
 */
import { spawnSync } from 'node:child_process';
import { loadavg, tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

const LAB = fileURLToPath(new URL('../bin/lab.ts', import.meta.url));

/** Issue 14's targets, in seconds. */
const CASES = [
  { args: ['--help'], target: 0.5 },
  { args: ['config'], target: 0.8 },
] as const;

const runs = Number(process.argv[2] ?? 15);
if (!Number.isInteger(runs) || runs < 1) {
  throw new Error(`runs must be a whole number of at least 1, got "${process.argv[2]}"`);
}

/** Seconds one run of `lab <args>` takes, start to exit; a failing run stops the benchmark. */
function timeRun(args: readonly string[]): number {
  const start = process.hrtime.bigint();
  const result = spawnSync(LAB, args, {
    cwd: tmpdir(),
    env: { ...process.env, LAB_CONFIG: '' },
    encoding: 'utf8',
  });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (result.status !== 0) throw new Error(`lab ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return seconds;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

const load = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');
process.stdout.write(
  `lab start-up, ${runs} runs each, node ${process.version}, load average before: ${load()}\n`,
);
let missed = 0;
for (const { args, target } of CASES) {
  timeRun(args);
  const times = Array.from({ length: runs }, () => timeRun(args));
  const m = median(times);
  if (m >= target) missed++;
  process.stdout.write(
    `lab ${args.join(' ').padEnd(7)} median ${m.toFixed(3)} s  (min ${Math.min(...times).toFixed(3)}, max ${Math.max(...times).toFixed(3)})  target < ${target} s: ${m < target ? 'met' : 'MISSED'}\n`,
  );
}
process.stdout.write(`load average after: ${load()}\n`);
process.exitCode = missed > 0 ? 1 : 0;
