/**
 * The report's self-calibration: the timing model refitted on the study's own single-replica runs,
 * every arm predicted again, and per arm and figure the a-priori prediction, the calibrated one and
 * the measurement side by side, with what a deviation beyond the noise band may mean.
 */

import { TIMING_COEFFICIENTS, type TimingCoefficient } from '../study/calibration.ts';
import type { StudyRecord } from '../study/results.ts';
import {
  type ArmDeviation,
  armDeviations,
  DEVIATION_METRICS,
  type DeviationContext,
  deviationDirections,
  fitErrorsByMetric,
  type SelfCalibration,
  type SelfCalibrationOptions,
  selfCalibrate,
} from '../study/self-calibration.ts';
import { DEFAULT_SIMULATION_MODEL } from '../study/simulator.ts';
import {
  armLabel,
  estimateText,
  MISSING,
  ms,
  percent,
  type ReportSection,
  tokensPerSecond,
} from './format.ts';
import { type ArmRow, BASELINE_ARM, type ReportTables } from './tables.ts';

export interface CalibrationReport {
  readonly calibration: SelfCalibration;
  /** Per prefix arm (and the ideal partition), its figures against both predictions. */
  readonly rows: ReadonlyArray<ArmDeviation & { readonly label: string }>;
}

/** Refits on the study's bound runs and compares every prefix arm; `tables` gives the measurements. */
export function calibrationReport(
  study: StudyRecord,
  tables: Pick<ReportTables, 'prefixArms' | 'partition'>,
  options: SelfCalibrationOptions = {},
): CalibrationReport {
  const calibration = selfCalibrate(study, options);
  if (!calibration.available) return { calibration, rows: [] };
  const baseline = calibration.calibrated.arms.find((a) => a.arm === BASELINE_ARM);
  const loadBalanced = baseline?.hitRate.mean;
  const fitErrors = fitErrorsByMetric(calibration.fit.rows);
  const deviations = (row: ArmRow, context: DeviationContext) =>
    armDeviations(
      row.arm,
      {
        hitRate: row.hitRate ?? undefined,
        totalTokensPerSecond: row.totalTokensPerSecond,
        meanTtftMs: row.meanTtftMs,
        p99TtftMs: row.p99TtftMs,
        meanItlMs: row.meanItlMs,
        requests: row.arm === 'partition' ? [] : row.requests,
      },
      calibration.calibrated,
      calibration.apriori,
      loadBalanced,
      context,
    ).map((d) => ({ ...d, label: row.arm === 'partition' ? 'Ideal partition (reference)' : armLabel(row) }));
  // The partition first: it runs without a front end, so where it deviates the model does.
  const reference = tables.partition ? deviations(tables.partition, { fitErrors }) : [];
  const context = { fitErrors, reference: deviationDirections(reference) };
  const rows = [...tables.prefixArms.flatMap((row) => deviations(row, context)), ...reference];
  return { calibration, rows };
}

const METRIC_LABEL: Readonly<Record<ArmDeviation['metric'], string>> = {
  ...Object.fromEntries(Object.entries(DEVIATION_METRICS).map(([k, v]) => [k, v.label])),
  requestsPerReplica: 'busiest replica share',
} as Record<ArmDeviation['metric'], string>;

function valueText(metric: ArmDeviation['metric']): (v: number) => string {
  switch (metric) {
    case 'hitRate':
    case 'requestsPerReplica':
      return percent;
    case 'totalTokensPerSecond':
      return tokensPerSecond;
    default:
      return ms;
  }
}

const COEFFICIENT_UNIT: Readonly<Record<TimingCoefficient, string>> = {
  stepOverheadMs: 'ms per step',
  memoryBandwidthGBps: 'GB/s',
  prefillMsPerToken: 'ms per prefill token',
  frontEndMsPerRequest: 'ms per request (API server)',
  frontEndMsPerOutputToken: 'ms per streamed token (API server)',
};

/** The report section; absent calibration says why. */
export function calibrationSection(report: CalibrationReport): ReportSection {
  const intro =
    "The timing model refitted on this study's own single-replica runs (the upper-bound sweep: one " +
    'replica, no front end), then every arm predicted again. Per arm and figure: the a-priori prediction ' +
    '(calibrated on docs/facts.md §4.1), the calibrated prediction, the measurement, and whether the measurement ' +
    "lies outside the calibrated band (twice the simulated spread plus the model's tolerance: hit rate 2 " +
    'points, tok/s 5%, mean TTFT 15%, p99 TTFT 25%, ITL 10%, busiest replica share 5 points; a timing ' +
    "figure's tolerance grows by the fit's own RMS error on the bound runs for that figure). With the " +
    "engine's timing fitted to this host, a deviation left is the front end's own doing, unless the ideal " +
    "partition, which has no front end, deviates the same way: then it is the timing model's.";
  const { calibration } = report;
  if (!calibration.available) {
    return {
      id: 'prediction-calibrated',
      title: 'Prediction vs measurement, calibrated on this study',
      intro,
      notes: [calibration.reason],
    };
  }
  const { fit } = calibration;
  const coefficients = TIMING_COEFFICIENTS.map(
    (k) =>
      `${k} ${Number(DEFAULT_SIMULATION_MODEL[k].toPrecision(3))} -> ${Number(fit.coefficients[k].toPrecision(3))} ${COEFFICIENT_UNIT[k]}`,
  ).join('; ');
  const outside = report.rows.filter((r) => r.outside);
  return {
    id: 'prediction-calibrated',
    title: 'Prediction vs measurement, calibrated on this study',
    intro,
    table: {
      headers: [
        'Arm',
        'Figure',
        'A-priori prediction',
        'Calibrated prediction',
        'Measured',
        'Band',
        'Result',
      ],
      align: ['left', 'left', 'right', 'right', 'right', 'right', 'left'],
      rows: report.rows.map((r) => {
        const text = valueText(r.metric);
        return [
          r.label,
          METRIC_LABEL[r.metric],
          r.apriori ? estimateText(r.apriori, text) : MISSING,
          estimateText(r.calibrated, text),
          text(r.measured),
          r.metric === 'hitRate' || r.metric === 'requestsPerReplica'
            ? `+-${(100 * r.band).toFixed(1)} points`
            : `+-${text(r.band)}`,
          r.outside ? `outside: ${r.meaning ?? 'deviates'}` : 'inside',
        ];
      }),
    },
    notes: [
      `Fitted on ${calibration.points.length} single-replica run(s) (${calibration.points.map((p) => p.label).join(', ')}): ${coefficients}. In-sample RMS relative error ${(100 * fit.rmsBefore).toFixed(1)}% with the a-priori coefficients, ${(100 * fit.rmsAfter).toFixed(1)}% calibrated.`,
      outside.length === 0
        ? 'Every measurement is inside its calibrated band.'
        : `Outside the calibrated band: ${[...new Set(outside.map((r) => r.label))].join(', ')}.`,
    ],
  };
}
