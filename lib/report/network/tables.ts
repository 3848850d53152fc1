import type { SseClientResult } from '../../network/probes/sse.ts';
import { meanMs, parseFortioResult, percentileMs } from '../../network/study/fortio-result.ts';
import type {
  ConntrackResult,
  CurlOutcome,
  DownloadResult,
  ExperimentId,
  LatencyArm,
  NetworkRunRecord,
  NetworkStudyRecord,
  ServiceScaleResult,
} from '../../network/study/model.ts';

/**
 * The network report's tables (docs/facts.md §N6) from the cells' study records. Pure. Only
 * valid runs enter a table, a comparison or a chart; invalid runs are listed with their reasons.
 */

/** Repeat spread beyond which an arm is flagged (docs/facts.md §N5: within +-3% of the mean). */
export const REPEAT_SPREAD_LIMIT_PERCENT = 3;

export type {
  Attribution,
  AttributionComponent,
  AttributionPart,
  CalibrationRow,
  CellRow,
  ConntrackRow,
  DownloadRow,
  FlaggedRun,
  FortioFigures,
  GrpcRow,
  InvalidRun,
  LatencyGroup,
  LatencyRow,
  MtlsRow,
  NetworkReportTables,
  RepeatSummary,
  ScaleRow,
  SseRow,
} from './table-rows.ts';

import type {
  Attribution,
  AttributionComponent,
  AttributionPart,
  ConntrackRow,
  DownloadRow,
  FlaggedRun,
  FortioFigures,
  GrpcRow,
  InvalidRun,
  LatencyGroup,
  LatencyRow,
  MtlsRow,
  NetworkReportTables,
  RepeatSummary,
  ScaleRow,
  SseRow,
} from './table-rows.ts';

// ---- run selection ---------------------------------------------------------------------------

/** A valid run and what the report read from it. */
interface UsableRun {
  readonly record: NetworkRunRecord;
  /** Present for fortio runs. */
  readonly fortio?: FortioFigures;
}

/** What fortio's JSON says (lib/network/study/fortio-result.ts reads it). */
export function fortioFigures(raw: string): FortioFigures {
  const result = parseFortioResult(raw);
  const p50 = percentileMs(result, 50);
  const p90 = percentileMs(result, 90);
  const p99 = percentileMs(result, 99);
  return {
    meanMs: meanMs(result),
    ...(p50 === undefined ? {} : { p50Ms: p50 }),
    ...(p90 === undefined ? {} : { p90Ms: p90 }),
    ...(p99 === undefined ? {} : { p99Ms: p99 }),
    actualQps: result.ActualQPS,
  };
}

/**
 * Splits a cell's records: per run id, the last valid attempt is used; every invalid attempt is
 * listed. A valid run whose result the report cannot read (a fortio file that does not parse, a
 * result of another kind than its spec) is listed as invalid with that reason rather than dropped.
 */
function selectRuns(study: NetworkStudyRecord): { usable: UsableRun[]; invalid: InvalidRun[] } {
  const invalid: InvalidRun[] = [];
  const chosen = new Map<string, UsableRun>();
  const listInvalid = (record: NetworkRunRecord, reasons: readonly string[]) =>
    invalid.push({
      cell: study.cell,
      runId: record.id,
      experiment: record.experiment,
      title: record.title,
      ...(record.attempt === undefined ? {} : { attempt: record.attempt }),
      reasons,
    });
  for (const record of study.runs) {
    if (!record.valid) {
      listInvalid(record, record.invalidReasons.length > 0 ? record.invalidReasons : ['marked invalid']);
      continue;
    }
    const problem = resultProblem(record);
    if (problem) {
      listInvalid(record, [problem]);
      continue;
    }
    let fortio: FortioFigures | undefined;
    if (record.result?.kind === 'fortio') {
      try {
        fortio = fortioFigures(record.result.raw);
      } catch (error) {
        listInvalid(record, [`the report cannot read its fortio result: ${(error as Error).message}`]);
        continue;
      }
    }
    chosen.set(record.id, { record, ...(fortio ? { fortio } : {}) });
  }
  // Record order is execution order; a map keeps each id's first insertion position.
  const usable = study.runs.flatMap((r) => {
    const run = chosen.get(r.id);
    return run && run.record === r ? [run] : [];
  });
  return { usable, invalid };
}

function resultProblem(record: NetworkRunRecord): string | undefined {
  if (!record.result) return 'marked valid but holds no result';
  if (record.result.kind !== record.spec.kind) {
    return `its result is of kind ${record.result.kind}, its spec of kind ${record.spec.kind}`;
  }
  return undefined;
}

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

/**
 * The added latency of the mesh, split from E3's and E4's fixed-rate means (docs/facts.md §N3):
 * - encryption = mesh-mtls - mesh-mtls-off (E3: the same sidecars and port, mTLS on against off);
 * - HTTP parsing = mesh-l7 - mesh-l4 (E4: the same sidecars, the `http-` port parsed, the `tcp-`
 *   port relayed);
 * - proxy hops = (mesh-mtls-off - plain) - HTTP parsing. mesh-mtls-off already goes through both
 *   sidecars on the `http-` port, so its difference to plain holds the hops AND the parsing;
 *   subtracting E4's parsing leaves the relay through two proxies, and the three parts add up to
 *   the total mesh-mtls - plain without counting the parsing twice.
 * E3 and E4 run at the same rate (E4 for 20 s instead of 25 s); the shares are of the total.
 */
export function attributionOf(cell: string, latency: readonly LatencyRow[]): Attribution {
  const fixed = (group: LatencyGroup, arm: LatencyArm) =>
    latency.find((r) => r.cell === cell && r.group === group && r.arm === arm)?.fixed?.meanMs;
  const inputs = {
    plain: fixed('E3', 'plain'),
    'mesh-mtls-off': fixed('E3', 'mesh-mtls-off'),
    'mesh-mtls': fixed('E3', 'mesh-mtls'),
    'mesh-l4': fixed('E4', 'mesh-l4'),
    'mesh-l7': fixed('E4', 'mesh-l7'),
  };
  const missing = Object.entries(inputs)
    .filter(([, v]) => v === undefined)
    .map(([arm]) => `${arm.startsWith('mesh-l') ? 'E4' : 'E3'} ${arm}`);
  if (missing.length > 0) {
    return {
      cell,
      available: false,
      reason: `no valid fixed-rate run of ${missing.join(', ')}`,
    };
  }
  const v = inputs as Record<keyof typeof inputs, number>;
  const totalMs = v['mesh-mtls'] - v.plain;
  const parsing = v['mesh-l7'] - v['mesh-l4'];
  const part = (
    component: AttributionComponent,
    label: string,
    formula: string,
    ms: number,
  ): AttributionPart => ({
    component,
    label,
    formula,
    ms,
    share: totalMs === 0 ? Number.NaN : ms / totalMs,
  });
  const parts = [
    part(
      'proxy-hops',
      'Proxy hops (two sidecars relaying)',
      '(E3 mesh-mtls-off - E3 plain) - (E4 mesh-l7 - E4 mesh-l4)',
      v['mesh-mtls-off'] - v.plain - parsing,
    ),
    part('http-parsing', 'HTTP parsing', 'E4 mesh-l7 - E4 mesh-l4', parsing),
    part(
      'encryption',
      'Encryption (mTLS)',
      'E3 mesh-mtls - E3 mesh-mtls-off',
      v['mesh-mtls'] - v['mesh-mtls-off'],
    ),
  ];
  return { cell, available: true, parts, totalMs, inputs: v };
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

/** The plan's id of a step's new-connection run (lib/network/study/plan.ts `serviceScaleRuns`). */
export const newConnectionRunId = (services: number): string => `e9-new-connection-${services}`;

/** A step may carry its new-connection run's fortio JSON itself (`ServiceScaleResult.newConnection`). */
function stepNewConnection(raw: string | undefined): FortioFigures | undefined {
  if (raw === undefined) return undefined;
  try {
    return fortioFigures(raw);
  } catch {
    // The step's judgment read this file; if it cannot be read here, the column stays empty.
    return undefined;
  }
}

/** Attempts per sample (median) and the longest first-attempt delay, from the samples. */
function methodColumns(
  scale: ServiceScaleResult,
): Pick<ScaleRow, 'attemptsPerSample' | 'firstAttemptDelayMaxMs'> {
  const samples = (scale.prober?.samples ?? []).filter(
    (s) => s.connected && s.attemptsAfterStart !== undefined,
  );
  if (samples.length === 0) return {};
  const attempts = samples.map((s) => s.attemptsAfterStart as number).sort((a, b) => a - b);
  return {
    attemptsPerSample: attempts[Math.floor((attempts.length - 1) / 2)],
    firstAttemptDelayMaxMs: Math.max(...samples.map((s) => s.firstAttemptAfterMs)),
  };
}

function scaleRows(study: NetworkStudyRecord, usable: readonly UsableRun[]): ScaleRow[] {
  const byId = new Map(usable.map((u) => [u.record.id, u]));
  return usable.flatMap(({ record }) => {
    if (record.spec.kind !== 'service-scale' || record.result?.kind !== 'service-scale') return [];
    const scale: ServiceScaleResult = record.result.scale;
    const latency = scale.prober?.latency ?? null;
    const newConnection =
      byId.get(newConnectionRunId(record.spec.services))?.fortio ?? stepNewConnection(scale.newConnection);
    return [
      {
        cell: study.cell,
        datapath: study.datapath,
        services: record.spec.services,
        servicesReady: scale.servicesReady,
        entries: scale.entries,
        entriesCommand: scale.entriesCommand,
        ...(scale.lbMapFull === undefined ? {} : { lbMapFull: scale.lbMapFull }),
        ...(latency ? { programmingMedianMs: latency.p50Ms, programmingP90Ms: latency.p90Ms } : {}),
        ...methodColumns(scale),
        samplesConnected: scale.prober?.connected ?? 0,
        samplesFailed: scale.prober?.failed ?? 0,
        attemptTimeoutMs: record.spec.attemptTimeoutMs,
        ...(newConnection ? { newConnection } : {}),
      },
    ];
  });
}

function conntrackRows(study: NetworkStudyRecord, usable: readonly UsableRun[]): ConntrackRow[] {
  return usable.flatMap(({ record }) => {
    if (record.spec.kind !== 'conntrack' || record.result?.kind !== 'conntrack') return [];
    const c: ConntrackResult = record.result.conntrack;
    const driver = c.driver;
    return [
      {
        cell: study.cell,
        datapath: study.datapath,
        requestedLimit: record.spec.limit,
        limit: c.limit,
        baseline: c.baseline,
        connections: record.spec.connections,
        ...(driver ? { succeeded: driver.succeeded, failed: driver.failed } : {}),
        expectedSuccesses: Math.max(0, Math.min(record.spec.connections, c.limit - c.baseline)),
        ...(driver?.connect
          ? { connectP99Ms: driver.connect.p99Ms, connectMaxMs: driver.connect.maxMs }
          : {}),
        limitBefore: c.limitBefore,
        limitAfterRestore: c.limitAfterRestore,
      },
    ];
  });
}

function flaggedRuns(study: NetworkStudyRecord, usable: readonly UsableRun[]): FlaggedRun[] {
  return usable.flatMap(({ record }) =>
    record.flags && record.flags.length > 0
      ? [{ cell: study.cell, runId: record.id, flags: record.flags }]
      : [],
  );
}

/** Every table of the network report, for the cells' studies in the order given. */
export function networkReportTables(studies: readonly NetworkStudyRecord[]): NetworkReportTables {
  const perCell = studies.map((study) => ({ study, ...selectRuns(study) }));
  const latency = perCell.flatMap(({ study, usable }) => latencyRows(study.cell, usable));
  const meshCells = perCell.filter(({ usable }) => usable.some((u) => u.record.experiment === 'E3'));
  const calibrationBase = perCell.map(({ study, usable }) => ({
    study,
    summary: summarizeRepeats(fortioRuns(usable, ['C'], 'fixed-rate', 'plain')),
  }));
  const first = calibrationBase.find((c) => c.summary)?.summary?.meanMs;
  return {
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
    scale: perCell.flatMap(({ study, usable }) => scaleRows(study, usable)),
    conntrack: perCell.flatMap(({ study, usable }) => conntrackRows(study, usable)),
    calibration: calibrationBase.map(({ study, summary }) => {
      const vsFirst = ratio(summary?.meanMs, first);
      return {
        cell: study.cell,
        datapath: study.datapath,
        mesh: study.mesh,
        host: study.host,
        ...(summary ? { summary } : {}),
        ...(vsFirst === undefined ? {} : { vsFirst }),
      };
    }),
    invalid: perCell.flatMap(({ invalid }) => invalid),
    flagged: perCell.flatMap(({ study, usable }) => flaggedRuns(study, usable)),
  };
}
