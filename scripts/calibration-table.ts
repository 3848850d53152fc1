/**
 * The timing model against docs/facts.md §4.1's calibration table with the default coefficients:
 * the same points and engine for scripts/bench-calibration.ts (which prints every row) and the
 * table of docs/planning.md (`<!-- example-of: calibration-table -->`, npm run docs:examples),
 * and docs/plan.md's hit rates against the same points (`simulator-calibration`).
 */
import { defaultLabConfig } from '../lib/config/load.ts';
import {
  type CalibrationPoint,
  type CalibrationRow,
  calibrationErrors,
  labSpecCalibrationPoints,
  rmsRelativeError,
  type TimingMetric,
} from '../lib/study/calibration.ts';
import { planEngine, planInput } from '../lib/study/planner.ts';
import { DEFAULT_SIMULATION_MODEL, type SimulationModel, simulate } from '../lib/study/simulator.ts';
import { upperBound } from '../lib/study/workload.ts';

const CONFIG = defaultLabConfig();
/** The simulator as `lab plan` runs it on the default configuration. */
export const CALIBRATION_ENGINE: SimulationModel = { ...DEFAULT_SIMULATION_MODEL, ...planEngine(CONFIG) };
/** docs/facts.md §4.1's runs on the default workload, one replica. */
export const CALIBRATION_POINTS: readonly CalibrationPoint[] = labSpecCalibrationPoints({
  ...planInput(CONFIG),
  replicas: 1,
});

/** A relative error as the table shows it: `+8.2%`, `-0.1%`. */
export function percent(relativeError: number): string {
  return `${relativeError >= 0 ? '+' : ''}${(100 * relativeError).toFixed(1)}%`;
}

const COLUMNS: readonly [TimingMetric, string][] = [
  ['totalTokensPerSecond', 'tok/s'],
  ['meanTtftMs', 'mean TTFT'],
  ['meanItlMs', 'ITL'],
];

/**
 * The in-sample error of the default coefficients as a Markdown table, one row per prefix count,
 * and a last row with the RMS over every figure (what the fit minimizes, before its weights).
 */
export function calibrationTable(
  rows: readonly CalibrationRow[] = calibrationErrors(CALIBRATION_POINTS, CALIBRATION_ENGINE),
): string {
  const lines = [
    `| prefixes | ${COLUMNS.map(([, title]) => title).join(' | ')} |`,
    `|---${'|---'.repeat(COLUMNS.length)}|`,
  ];
  for (const point of CALIBRATION_POINTS) {
    const cells = COLUMNS.map(([metric]) => {
      const row = rows.find((r) => r.label === point.label && r.metric === metric);
      if (!row) throw new Error(`${point.label}: no ${metric} in the calibration rows`);
      return percent(row.relativeError);
    });
    lines.push(`| ${point.input.prefixes} | ${cells.join(' | ')} |`);
  }
  lines.push(`| RMS | ${(100 * rmsRelativeError(rows)).toFixed(1)}% over all ${rows.length} figures | | |`);
  return lines.join('\n');
}

const pct = (fraction: number) => `${(100 * fraction).toFixed(1)}%`;
const thousands = (n: number) => Math.round(n).toLocaleString('en-US');

/**
 * docs/plan.md's calibration table: per point of docs/facts.md §4.1, the measured and simulated hit
 * rate, the upper bound's formula (lib/study/workload.ts), and measured against simulated tok/s and
 * ITL, one single-replica simulation per point with the default coefficients.
 */
export function simulatorCalibrationTable(): string {
  const lines = [
    '| prefixes | measured hit rate | simulated | bound (formula) | measured / simulated tok/s | measured / simulated ITL |',
    '|---|---|---|---|---|---|',
  ];
  for (const point of CALIBRATION_POINTS) {
    const { hitRate, timing } = simulate(point.input, 'single-replica', CALIBRATION_ENGINE);
    const m = point.measured;
    if (m.hitRate === undefined) throw new Error(`${point.label}: no measured hit rate`);
    lines.push(
      `| ${point.input.prefixes} | ${pct(m.hitRate)} | ${pct(hitRate)} | ${pct(upperBound(point.input))} | ${thousands(m.totalTokensPerSecond)} / ${thousands(timing.totalTokensPerSecond)} | ${m.meanItlMs.toFixed(1)} / ${timing.meanItlMs.toFixed(1)} ms |`,
    );
  }
  return lines.join('\n');
}
