/**
 * The timing model against docs/facts.md §4.1's calibration table with the default coefficients:
 * the same points and engine for scripts/bench-calibration.ts (which prints every row) and the
 * table of docs/planning.md (`<!-- example-of: calibration-table -->`, npm run docs:examples).
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
import { DEFAULT_SIMULATION_MODEL, type SimulationModel } from '../lib/study/simulator.ts';

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
