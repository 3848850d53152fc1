import type { SseClientResult } from '../../network/probes/sse.ts';
import type {
  CurlOutcome,
  DownloadResult,
  ExperimentId,
  LatencyArm,
  NetworkStudyRecord,
} from '../../network/study/model.ts';
import { attributionOf } from './attribution.ts';
import { calibrationVsBaseline, chooseBaseline, conntrackVsBaseline, scaleVsBaseline } from './baseline.ts';
import { selectRuns, type UsableRun } from './runs.ts';
import { conntrackRows, scaleRows } from './scale-rows.ts';

/**
 * The network report's tables (docs/facts.md §N6) from the cells' study records. Pure. Only
 * valid runs enter a table, a comparison or a chart; invalid runs are listed with their reasons.
 */

/** Repeat spread beyond which an arm is flagged (docs/facts.md §N5: within +-3% of the mean). */
export const REPEAT_SPREAD_LIMIT_PERCENT = 3;

export { attributionOf, intervalOf } from './attribution.ts';
export { BaselineError, chooseBaseline, DEFAULT_BASELINE_RULE } from './baseline.ts';
export { fortioFigures } from './runs.ts';
export { newConnectionRunId } from './scale-rows.ts';
export type * from './table-rows.ts';

import type {
  DownloadRow,
  FlaggedRun,
  FortioFigures,
  GrpcRow,
  LatencyGroup,
  LatencyRow,
  MtlsRow,
  NetworkReportTables,
  RepeatSummary,
  SseRow,
} from './table-rows.ts';

// ---- summaries -------------------------------------------------------------------------------

const mean = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

/** Mean of the values that exist, or undefined when none does. */
function meanOfPresent(values: readonly (number | undefined)[]): number | undefined {
  const present = values.filter((v): v is number => v !== undefined);
  return present.length === 0 ? undefined : mean(present);
}

/** Summarizes the valid repeats of one arm (fortio figures of each). */
export function summarizeRepeats(runs: readonly FortioFigures[]): RepeatSummary | undefined {
  if (runs.length === 0) return undefined;
  const repeatMeansMs = runs.map((r) => r.meanMs);
  const meanLatency = mean(repeatMeansMs);
  const spread =
    meanLatency > 0 ? Math.max(...repeatMeansMs.map((m) => Math.abs(m - meanLatency))) / meanLatency : 0;
  const p50 = meanOfPresent(runs.map((r) => r.p50Ms));
  const p90 = meanOfPresent(runs.map((r) => r.p90Ms));
  const p99 = meanOfPresent(runs.map((r) => r.p99Ms));
  return {
    repeats: runs.length,
    repeatMeansMs,
    meanMs: meanLatency,
    ...(p50 === undefined ? {} : { p50Ms: p50 }),
    ...(p90 === undefined ? {} : { p90Ms: p90 }),
    ...(p99 === undefined ? {} : { p99Ms: p99 }),
    actualQps: mean(runs.map((r) => r.actualQps)),
    spreadPercent: spread * 100,
  };
}

const ratio = (value: number | undefined, base: number | undefined): number | undefined =>
  value === undefined || base === undefined || base === 0 ? undefined : value / base;

function fortioRuns(
  usable: readonly UsableRun[],
  experiments: readonly ExperimentId[],
  mode: string,
  arm: LatencyArm,
): FortioFigures[] {
  return usable.flatMap((run) => {
    const { record, fortio } = run;
    if (!fortio || record.spec.kind !== 'fortio') return [];
    if (!experiments.includes(record.experiment)) return [];
    return record.spec.mode === mode && record.spec.arm === arm ? [fortio] : [];
  });
}

/** Arms in the order the lab names them (LATENCY_ARMS), limited to those the records hold. */
function armsOf(usable: readonly UsableRun[], experiments: readonly ExperimentId[]): LatencyArm[] {
  const order: LatencyArm[] = ['plain', 'mesh-mtls-off', 'mesh-mtls', 'mesh-l4', 'mesh-l7'];
  const present = new Set(
    usable.flatMap(({ record }) =>
      experiments.includes(record.experiment) && 'arm' in record.spec ? [record.spec.arm] : [],
    ),
  );
  return order.filter((arm) => present.has(arm));
}

const GROUPS: readonly { group: LatencyGroup; experiments: readonly ExperimentId[] }[] = [
  { group: 'E1', experiments: ['E1', 'E1s'] },
  { group: 'E3', experiments: ['E3'] },
  { group: 'E4', experiments: ['E4'] },
];

function latencyRows(cell: string, usable: readonly UsableRun[]): LatencyRow[] {
  return GROUPS.flatMap(({ group, experiments }) => {
    const arms = armsOf(usable, experiments);
    const summaries = arms.map((arm) => ({
      arm,
      fixed: summarizeRepeats(fortioRuns(usable, experiments, 'fixed-rate', arm)),
      saturation: summarizeRepeats(fortioRuns(usable, experiments, 'saturation', arm)),
    }));
    const plain = summaries.find((s) => s.arm === 'plain');
    return summaries
      .filter((s) => s.fixed || s.saturation)
      .map((s): LatencyRow => {
        const meanVsPlain = s.arm === 'plain' ? undefined : ratio(s.fixed?.meanMs, plain?.fixed?.meanMs);
        const saturationVsPlain =
          s.arm === 'plain' ? undefined : ratio(s.saturation?.actualQps, plain?.saturation?.actualQps);
        return {
          cell,
          group,
          arm: s.arm,
          ...(s.fixed ? { fixed: s.fixed } : {}),
          ...(s.saturation ? { saturation: s.saturation } : {}),
          ...(meanVsPlain === undefined ? {} : { meanVsPlain }),
          ...(saturationVsPlain === undefined ? {} : { saturationVsPlain }),
        };
      });
  });
}

function grpcRows(cell: string, usable: readonly UsableRun[]): GrpcRow[] {
  const arms = armsOf(usable, ['E5']);
  const rows = arms.flatMap((arm) => {
    const summary = summarizeRepeats(fortioRuns(usable, ['E5'], 'grpc', arm));
    return summary ? [{ cell, arm, summary }] : [];
  });
  const plain = rows.find((r) => r.arm === 'plain')?.summary.meanMs;
  return rows.map((r) => {
    const vs = r.arm === 'plain' ? undefined : ratio(r.summary.meanMs, plain);
    return { ...r, ...(vs === undefined ? {} : { meanVsPlain: vs }) };
  });
}

function downloadRows(cell: string, usable: readonly UsableRun[]): DownloadRow[] {
  const byArm = new Map<LatencyArm, { download: DownloadResult; bytes: number }[]>();
  for (const { record } of usable) {
    if (record.experiment !== 'E6' || record.spec.kind !== 'download' || record.result?.kind !== 'download')
      continue;
    byArm.set(record.spec.arm, [
      ...(byArm.get(record.spec.arm) ?? []),
      { download: record.result.download, bytes: record.spec.bytes },
    ]);
  }
  const rows = [...byArm.entries()].map(
    ([arm, runs]): DownloadRow => ({
      cell,
      arm,
      repeats: runs.length,
      meanSeconds: mean(runs.map((r) => r.download.timeTotalSeconds)),
      meanBytesPerSecond: mean(runs.map((r) => r.download.speedDownloadBytesPerSecond)),
      minSeconds: Math.min(...runs.map((r) => r.download.timeTotalSeconds)),
      maxSeconds: Math.max(...runs.map((r) => r.download.timeTotalSeconds)),
      minBytesPerSecond: Math.min(...runs.map((r) => r.download.speedDownloadBytesPerSecond)),
      maxBytesPerSecond: Math.max(...runs.map((r) => r.download.speedDownloadBytesPerSecond)),
      bytes: runs[0].bytes,
    }),
  );
  const plain = rows.find((r) => r.arm === 'plain')?.meanSeconds;
  return rows.map((r) => {
    const vs = r.arm === 'plain' ? undefined : ratio(r.meanSeconds, plain);
    return { ...r, ...(vs === undefined ? {} : { timeVsPlain: vs }) };
  });
}

function sseRows(cell: string, usable: readonly UsableRun[]): SseRow[] {
  const byArm = new Map<LatencyArm, { sse: SseClientResult; intervalMs: number }[]>();
  for (const { record } of usable) {
    if (record.experiment !== 'E7' || record.spec.kind !== 'sse' || record.result?.kind !== 'sse') continue;
    if (record.result.sse.gaps === null) continue;
    byArm.set(record.spec.arm, [
      ...(byArm.get(record.spec.arm) ?? []),
      { sse: record.result.sse, intervalMs: record.spec.intervalMs },
    ]);
  }
  return [...byArm.entries()].map(([arm, runs]): SseRow => {
    const gaps = runs.map((r) => r.sse.gaps).filter((g) => g !== null);
    return {
      cell,
      arm,
      repeats: runs.length,
      gapMedianMs: mean(gaps.map((g) => g.p50Ms)),
      gapP99Ms: mean(gaps.map((g) => g.p99Ms)),
      gapMaxMs: Math.max(...gaps.map((g) => g.maxMs)),
      intervalMs: runs[0].intervalMs,
      eventsReceived: runs.reduce((sum, r) => sum + r.sse.events, 0),
      eventsExpected: runs.reduce((sum, r) => sum + r.sse.expectedEvents, 0),
    };
  });
}

const sameOutcome = (a: CurlOutcome, b: CurlOutcome | null): boolean =>
  b !== null && a.httpCode === b.httpCode && a.curlExit === b.curlExit;

function mtlsRows(cell: string, usable: readonly UsableRun[]): MtlsRow[] {
  return usable.flatMap(({ record }) => {
    if (record.spec.kind !== 'mtls' || record.result?.kind !== 'mtls') return [];
    if (record.experiment !== 'E2' && record.experiment !== 'E8') return [];
    const experiment = record.experiment;
    const observed = new Map(record.result.cases.map((c) => [c.id, c.observed]));
    return record.spec.cases.map((c): MtlsRow => {
      const seen = observed.get(c.id) ?? null;
      return {
        cell,
        experiment,
        caseId: c.id,
        title: c.title,
        client: `${c.inMesh ? 'in mesh' : 'out of mesh'}, ${c.clientNamespace}/${c.serviceAccount}`,
        expected: c.expected,
        observed: seen,
        deviation: !sameOutcome(c.expected, seen),
      };
    });
  });
}

function flaggedRuns(study: NetworkStudyRecord, usable: readonly UsableRun[]): FlaggedRun[] {
  return usable.flatMap(({ record }) =>
    record.flags && record.flags.length > 0
      ? [{ cell: study.cell, runId: record.id, flags: record.flags }]
      : [],
  );
}

/** How the report is made: `baselineCell` names the cell every cell is compared with (`--baseline`). */
export interface NetworkReportOptions {
  readonly baselineCell?: string;
}

/**
 * Every table of the network report, for the cells' studies in the order given. Throws
 * `BaselineError` when `options.baselineCell` names no cell of the studies.
 */
export function networkReportTables(
  studies: readonly NetworkStudyRecord[],
  options: NetworkReportOptions = {},
): NetworkReportTables {
  const baseline = chooseBaseline(studies, options.baselineCell);
  const perCell = studies.map((study) => ({ study, ...selectRuns(study) }));
  const latency = perCell.flatMap(({ study, usable }) => latencyRows(study.cell, usable));
  const meshCells = perCell.filter(({ usable }) => usable.some((u) => u.record.experiment === 'E3'));
  const calibration = perCell.map(({ study, usable }) => {
    const summary = summarizeRepeats(fortioRuns(usable, ['C'], 'fixed-rate', 'plain'));
    return {
      cell: study.cell,
      datapath: study.datapath,
      mesh: study.mesh,
      host: study.host,
      ...(summary ? { summary } : {}),
    };
  });
  return {
    baseline,
    cells: perCell.map(({ study, usable }) => ({
      cell: study.cell,
      studyId: study.studyId,
      datapath: study.datapath,
      mesh: study.mesh,
      state: study.state,
      ...(study.error ? { error: study.error } : {}),
      startedAt: study.startedAt,
      ...(study.finishedAt ? { finishedAt: study.finishedAt } : {}),
      host: study.host,
      ...(study.datapathEvidence ? { datapathEvidence: study.datapathEvidence } : {}),
      runs: new Set(study.runs.map((r) => r.id)).size,
      validRuns: usable.length,
    })),
    latency,
    attribution: meshCells.map(({ study }) => attributionOf(study.cell, latency)),
    grpc: perCell.flatMap(({ study, usable }) => grpcRows(study.cell, usable)),
    downloads: perCell.flatMap(({ study, usable }) => downloadRows(study.cell, usable)),
    sse: perCell.flatMap(({ study, usable }) => sseRows(study.cell, usable)),
    mtls: perCell.flatMap(({ study, usable }) => mtlsRows(study.cell, usable)),
    scale: scaleVsBaseline(
      perCell.flatMap(({ study, usable }) => scaleRows(study, usable)),
      baseline,
    ),
    conntrack: conntrackVsBaseline(
      perCell.flatMap(({ study, usable }) => conntrackRows(study, usable)),
      baseline,
    ),
    calibration: calibrationVsBaseline(calibration, baseline),
    invalid: perCell.flatMap(({ invalid }) => invalid),
    flagged: perCell.flatMap(({ study, usable }) => flaggedRuns(study, usable)),
  };
}
