/**
 * The timing model against docs/facts.md §4.1's calibration table (one replica, 128/64/16/8 prefixes):
 * the in-sample error of the default coefficients, a refit from them, and the simulator's run time.
 * docs/planning.md's table is the first of these (scripts/calibration-table.ts, npm run docs:examples).
 *
 * Run: npx tsx scripts/bench-calibration.ts            (the defaults' errors and a refit)
 *      npx tsx scripts/bench-calibration.ts --no-fit   (the defaults' errors only)
 */
import {
  type CalibrationRow,
  calibrationErrors,
  fitTimingModel,
  rmsRelativeError,
  TIMING_COEFFICIENTS,
} from '../lib/study/calibration.ts';
import { type SimulationModel, simulate } from '../lib/study/simulator.ts';
import { CALIBRATION_ENGINE as ENGINE, CALIBRATION_POINTS as POINTS, percent } from './calibration-table.ts';

function table(title: string, rows: readonly CalibrationRow[]): void {
  console.log(`\n${title}`);
  console.log(
    `  ${'run'.padEnd(28)} ${'metric'.padEnd(22)} ${'predicted'.padStart(10)} ${'measured'.padStart(10)} ${'error'.padStart(8)}`,
  );
  for (const r of rows) {
    const err = percent(r.relativeError);
    console.log(
      `  ${r.label.padEnd(28)} ${r.metric.padEnd(22)} ${r.predicted.toFixed(1).padStart(10)} ${r.measured.toFixed(1).padStart(10)} ${err.padStart(8)}`,
    );
  }
  console.log(`  RMS relative error ${(100 * rmsRelativeError(rows)).toFixed(1)}%`);
}

function coefficients(model: Pick<SimulationModel, (typeof TIMING_COEFFICIENTS)[number]>): string {
  return TIMING_COEFFICIENTS.map((k) => `${k} ${Number(model[k].toPrecision(3))}`).join(', ');
}

// Run time of one simulation of the default single-replica workload (warm).
const input = POINTS[0]?.input;
if (!input) throw new Error('no calibration point');
simulate(input, 'single-replica', ENGINE);
const t0 = performance.now();
const runs = 5;
for (let i = 0; i < runs; i++) simulate({ ...input, seed: input.seed + i }, 'single-replica', ENGINE);
const perRun = (performance.now() - t0) / runs;

table(`Default coefficients (${coefficients(ENGINE)}):`, calibrationErrors(POINTS, ENGINE));
console.log(`\nsimulate(): ${perRun.toFixed(0)} ms per single-replica run of ${input.prompts} prompts`);

if (!process.argv.includes('--no-fit')) {
  const t1 = performance.now();
  const fit = fitTimingModel(POINTS, ENGINE, { maxEvaluations: 200 });
  table(
    `Refit from the defaults (${fit.evaluations} evaluations, ${((performance.now() - t1) / 1000).toFixed(1)} s): ${coefficients(fit.coefficients)}`,
    fit.rows,
  );
}
