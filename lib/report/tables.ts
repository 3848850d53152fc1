import type { StudyPredictions } from '../study/arm-predictions.ts';
import { allArms } from '../study/arms.ts';
import { type StudyRun, studyPlan } from '../study/plan.ts';
import { studyPredictions } from '../study/planner.ts';
import type { RunRecord, RunSummary, StudyRecord } from '../study/results.ts';
import { upperBound, workingSetTokens } from '../study/workload.ts';

/**
 * The tables of docs/facts.md §4.5, as numbers, from a study record. Pure: no I/O, no formatting.
 *
 * Only valid runs enter these tables and comparisons; every invalid run goes to `invalid` with its
 * reasons. Facts a run record does not carry (prefix count, concurrency, prompts) come from the
 * study plan rebuilt from the configuration recorded in the study's metadata.
 */

export type * from './table-rows.ts';

import type {
  ArmRow,
  BoundRow,
  ComparedMetric,
  Comparison,
  InvalidRun,
  LeftOnTable,
  MetadataEntry,
  NoiseSource,
  PredictionCheck,
  ReportTables,
  RunNumbers,
  Shortfall,
} from './table-rows.ts';

export function reportTables(study: StudyRecord): ReportTables {
  const { config } = study.metadata;
  const plan = new Map(studyPlan(config).runs.map((run) => [run.id, run]));
  const arms = new Map(allArms(config).map((arm) => [arm.id, arm]));

  const invalid: InvalidRun[] = [];
  // A resumed study may hold an invalid attempt and a later valid one of the same run: the last valid wins.
  const valid = new Map<string, { record: RunRecord; summary: RunSummary }>();
  for (const record of study.runs) {
    if (!record.valid) {
      invalid.push(invalidRun(record, record.invalidReasons));
    } else if (!record.summary) {
      invalid.push(
        invalidRun(record, ['recorded as valid but has no summary (a client has no result); left out']),
      );
    } else {
      valid.delete(record.id);
      valid.set(record.id, { record, summary: record.summary });
    }
  }
  const validRuns = [...valid.values()];
  const invalidIds = (pick: (r: RunRecord) => boolean) =>
    unique(study.runs.filter((r) => pick(r) && !valid.has(r.id)).map((r) => r.id));

  const predictions: StudyPredictions =
    study.metadata.predictions ?? studyPredictions(config, study.metadata.kvCacheTokens);
  const predicted = new Map(predictions.arms.map((p) => [p.arm, p]));

  const armRow = (record: RunRecord, summary: RunSummary): ArmRow => {
    const planned = plan.get(record.id);
    const arm = record.arm ?? (record.group === 'partition' ? 'partition' : record.id);
    const promptBlind = arms.get(arm)?.promptBlind;
    return {
      ...numbers(record, summary),
      arm,
      armTitle:
        record.group === 'partition'
          ? 'Ideal partition'
          : (arms.get(arm)?.title ?? record.arm ?? record.title),
      ...(promptBlind ? { promptBlind } : {}),
      concurrency: planned ? concurrencyOf(planned) : undefined,
      repeats: 1,
    };
  };

  const isArm = (dataset: RunRecord['dataset']) => (r: RunRecord) =>
    r.group === 'arm' && r.dataset === dataset;
  const withPrediction = (row: ArmRow): ArmRow => {
    const prediction = row.arm === 'partition' ? predictions.partition : predicted.get(row.arm);
    return prediction ? { ...row, prediction } : row;
  };
  // Tables list the arms in the lab's arm order, whatever order the plan ran them in (it keeps
  // arms on one front end apart: lib/study/plan.ts).
  const armOrder = [...arms.keys()];
  const inArmOrder = (rows: ArmRow[]) => rows.sort((a, b) => rank(armOrder, a.arm) - rank(armOrder, b.arm));
  const rawPrefixArms = inArmOrder(
    averageRepeats(
      validRuns.filter(({ record }) => isArm('prefix')(record)).map((v) => armRow(v.record, v.summary)),
    ),
  ).map(withPrediction);
  const baseline = rawPrefixArms.find((row) => row.arm === BASELINE_ARM);
  const prefixArms = rawPrefixArms.map((row) =>
    baseline && row !== baseline ? { ...row, vsBaseline: versusBaseline(row, baseline) } : row,
  );
  const sharegpt = inArmOrder(
    averageRepeats(
      validRuns.filter(({ record }) => isArm('sharegpt')(record)).map((v) => armRow(v.record, v.summary)),
    ),
  );
  const partitionRun = validRuns.find(({ record }) => record.group === 'partition');
  const partition = partitionRun
    ? withPrediction(armRow(partitionRun.record, partitionRun.summary))
    : undefined;

  const bounds = validRuns
    .filter(({ record }) => record.group === 'bound')
    .map(({ record, summary }): BoundRow => {
      const shape = plan.get(record.id)?.benchmarks[0];
      const prefixes = shape?.prefix?.prefixes;
      return {
        ...numbers(record, summary),
        prefixes,
        workingSetTokens:
          prefixes === undefined
            ? undefined
            : workingSetTokens({ prefixes, prefixLen: config.workload.prefixLen }),
        bound:
          prefixes === undefined || shape === undefined
            ? record.upperBound
            : upperBound({ ...config.workload, prefixes, prompts: shape.prompts }),
      };
    });

  const sweptArms = config.study.concurrencySweep.arms;
  const sweep = sweptArms.flatMap((arm) =>
    averageRepeats(
      validRuns
        .filter(
          ({ record }) =>
            record.arm === arm &&
            (record.group === 'sweep' || (record.group === 'arm' && record.dataset === 'prefix')),
        )
        .map((v) => armRow(v.record, v.summary)),
    ).sort((a, b) => (a.concurrency ?? 0) - (b.concurrency ?? 0)),
  );

  const omittedPrefixArms = invalidIds(isArm('prefix'));
  const shownArms = new Set(prefixArms.map((row) => row.arm));
  const invalidPrefixArms = unique(
    study.runs
      .filter((r) => isArm('prefix')(r) && r.arm !== undefined && !shownArms.has(r.arm))
      .map((r) => r.arm as string),
  ).map((arm) => ({ arm, armTitle: arms.get(arm)?.title ?? arm }));

  return {
    metadata: metadataEntries(study),
    prefixArms,
    partition,
    workloadBound: upperBound(config.workload),
    bounds,
    sharegpt,
    sweep,
    leftOnTable: leftOnTable(prefixArms, partition),
    predictionsSource: study.metadata.predictions ? 'study' : 'recomputed',
    predictionSeeds: predictions.seeds,
    predictionChecks: prefixArms.flatMap(predictionChecks),
    invalidPrefixArms,
    invalid,
    warnings: study.runs
      .filter((record) => (record.warnings?.length ?? 0) > 0)
      .map((record) => ({ runId: record.id, valid: record.valid, warnings: record.warnings ?? [] })),
    overlaps: study.runs
      .filter((record) => (record.overlappedWith?.length ?? 0) > 0)
      .map((record) => ({
        runId: record.id,
        title: record.title,
        valid: record.valid,
        overlappedWith: record.overlappedWith ?? [],
      })),
    omitted: {
      prefixArms: omittedPrefixArms,
      bounds: invalidIds((r) => r.group === 'bound'),
      sharegpt: invalidIds(isArm('sharegpt')),
      sweep: invalidIds(
        (r) =>
          r.arm !== undefined &&
          sweptArms.includes(r.arm) &&
          (r.group === 'sweep' || (r.group === 'arm' && r.dataset === 'prefix')),
      ),
      partition: invalidIds((r) => r.group === 'partition'),
    },
  };
}

/** The arm every other arm is judged against (docs/facts.md §3.2). */
export const BASELINE_ARM = 'kube-proxy';

/**
 * What the simulator is trusted to within, beyond its seed-to-seed spread: 5 points of hit rate (the
 * calibration tolerance against docs/facts.md §4.1's sweep, test/study/simulator.test.ts) and 15% of
 * throughput (the simulated single-replica throughput lands within a few percent of the calibration
 * runs). TTFT and ITL are shown beside the measurement but not flagged: the timing model places the
 * queueing delay less well than that.
 */
export const MODEL_TOLERANCE = { hitRate: 0.05, totalTokensPerSecondPercent: 15 } as const;

const COMPARED: readonly ComparedMetric[] = [
  'hitRate',
  'totalTokensPerSecond',
  'meanTtftMs',
  'p99TtftMs',
  'meanItlMs',
];

/** Rows of the same arm (repeats) merged into one: means of every figure, spreads over the repeats. */
export function averageRepeats(rows: readonly ArmRow[]): ArmRow[] {
  const groups = new Map<string, ArmRow[]>();
  for (const row of rows) {
    const key = `${row.arm}@${row.concurrency ?? ''}`;
    const group = groups.get(key);
    if (group) group.push(row);
    else groups.set(key, [row]);
  }
  return [...groups.values()].map((group) => {
    const first = group[0] as ArmRow;
    if (group.length === 1) return first;
    const mean = (pick: (r: ArmRow) => number) => group.reduce((t, r) => t + pick(r), 0) / group.length;
    const optionalMean = (pick: (r: ArmRow) => number | undefined) =>
      group.every((r) => pick(r) !== undefined) ? mean((r) => pick(r) as number) : undefined;
    const nullableMean = (pick: (r: ArmRow) => number | null) =>
      group.every((r) => pick(r) !== null) ? mean((r) => pick(r) as number) : null;
    const spread = Object.fromEntries(
      COMPARED.map((metric) => [metric, sampleSpread(group.map((r) => r[metric] ?? Number.NaN))]),
    ) as Record<ComparedMetric, number>;
    const requestsPerSecond = optionalMean((r) => r.requestsPerSecond);
    const medianTtftMs = optionalMean((r) => r.medianTtftMs);
    const meanTpotMs = optionalMean((r) => r.meanTpotMs);
    return {
      ...first,
      runId: group.map((r) => r.runId).join(', '),
      requests: first.requests.map((_, i) => Math.round(mean((r) => r.requests[i] ?? 0))),
      replicaHitRates: first.replicaHitRates.map((_, i) => nullableMean((r) => r.replicaHitRates[i] ?? null)),
      hitRate: nullableMean((r) => r.hitRate),
      totalTokensPerSecond: mean((r) => r.totalTokensPerSecond),
      outputTokensPerSecond: mean((r) => r.outputTokensPerSecond),
      meanTtftMs: mean((r) => r.meanTtftMs),
      p99TtftMs: mean((r) => r.p99TtftMs),
      meanItlMs: mean((r) => r.meanItlMs),
      ...(requestsPerSecond === undefined ? {} : { requestsPerSecond }),
      ...(medianTtftMs === undefined ? {} : { medianTtftMs }),
      ...(meanTpotMs === undefined ? {} : { meanTpotMs }),
      repeats: group.length,
      measuredSpread: spread,
    };
  });
}

function sampleSpread(values: readonly number[]): number {
  if (values.length < 2 || values.some((v) => !Number.isFinite(v))) return Number.NaN;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (values.length - 1));
}

/** Two estimates differ beyond noise when further apart than twice their combined spread. */
function combinedBand(a: number, b: number): number {
  return 2 * Math.sqrt(a * a + b * b);
}

/**
 * The noise band of a difference between two rows on one metric: from the repeats when both were
 * measured at least twice, else from the simulated spread of both predictions, else none.
 */
export function noiseBand(
  a: ArmRow,
  b: ArmRow,
  metric: 'hitRate' | 'totalTokensPerSecond',
): { band: number; noise: NoiseSource } | undefined {
  const ma = a.measuredSpread?.[metric];
  const mb = b.measuredSpread?.[metric];
  if (ma !== undefined && mb !== undefined && Number.isFinite(ma) && Number.isFinite(mb)) {
    return { band: combinedBand(ma, mb), noise: 'measured' };
  }
  if (a.prediction && b.prediction) {
    return {
      band: combinedBand(a.prediction[metric].spread, b.prediction[metric].spread),
      noise: 'simulated',
    };
  }
  return undefined;
}

/** An arm against the baseline on hit rate and total throughput, with a verdict where noise is known. */
export function versusBaseline(row: ArmRow, baseline: ArmRow): ArmRow['vsBaseline'] {
  const compare = (metric: 'hitRate' | 'totalTokensPerSecond'): Comparison | undefined => {
    const a = row[metric];
    const b = baseline[metric];
    const noise = noiseBand(row, baseline, metric);
    if (a === null || b === null || !noise) return undefined;
    const diff = a - b;
    // What the tables print is the least difference worth a verdict: 0.1 points, or 0.1%.
    const band = Math.max(noise.band, metric === 'hitRate' ? 0.001 : Math.abs(b) * 0.001);
    return {
      metric,
      difference: metric === 'hitRate' ? diff * 100 : b === 0 ? Number.NaN : (diff / b) * 100,
      unit: metric === 'hitRate' ? 'points' : 'percent',
      band: noise.band,
      noise: noise.noise,
      verdict: Math.abs(diff) <= band ? 'same within noise' : diff > 0 ? 'better' : 'worse',
    };
  };
  const hitRate = compare('hitRate');
  const totalTokensPerSecond = compare('totalTokensPerSecond');
  return {
    ...(hitRate ? { hitRate } : {}),
    ...(totalTokensPerSecond ? { totalTokensPerSecond } : {}),
  };
}

/** Hit rate and throughput of an arm against the band its prediction allows. */
function predictionChecks(row: ArmRow): PredictionCheck[] {
  const p = row.prediction;
  if (!p) return [];
  const checks: PredictionCheck[] = [];
  const base = {
    arm: row.arm,
    armTitle: row.armTitle,
    ...(row.promptBlind ? { promptBlind: row.promptBlind } : {}),
  };
  if (row.hitRate !== null) {
    const band = 2 * p.hitRate.spread + MODEL_TOLERANCE.hitRate;
    checks.push({
      ...base,
      metric: 'hitRate',
      measured: row.hitRate,
      predicted: p.hitRate,
      band,
      outside: Math.abs(row.hitRate - p.hitRate.mean) > band,
    });
  }
  const tps = p.totalTokensPerSecond;
  const band = 2 * tps.spread + (tps.mean * MODEL_TOLERANCE.totalTokensPerSecondPercent) / 100;
  checks.push({
    ...base,
    metric: 'totalTokensPerSecond',
    measured: row.totalTokensPerSecond,
    predicted: tps,
    band,
    outside: Math.abs(row.totalTokensPerSecond - tps.mean) > band,
  });
  return checks;
}

/**
 * The valid prefix-workload arm with the highest hit rate; the first in arm order on a tie. A
 * prompt-blind arm is a control: whatever it measured, it is not a prefix-aware result.
 */
export function bestArm(prefixArms: readonly ArmRow[]): ArmRow | undefined {
  let best: ArmRow | undefined;
  for (const row of prefixArms) {
    if (row.hitRate === null || row.promptBlind) continue;
    if (best === undefined || (best.hitRate ?? 0) < row.hitRate) best = row;
  }
  return best;
}

/**
 * What the arms leave on the table against the ideal partition (docs/facts.md §4.5): every arm that
 * cannot be told from the best hit rate within the noise, and per metric the best arm's value.
 */
export function leftOnTable(prefixArms: readonly ArmRow[], partition: ArmRow | undefined): LeftOnTable {
  if (!partition) return { available: false, reason: 'the ideal-partition run is missing or invalid' };
  if (partition.hitRate === null)
    return { available: false, reason: 'the ideal-partition run has no hit rate' };
  const best = bestArm(prefixArms);
  if (!best || best.hitRate === null) {
    return {
      available: false,
      reason: 'no valid prefix-workload arm run with a hit rate whose front end can see the prompt',
    };
  }
  const candidates = prefixArms.filter((row) => !row.promptBlind && row.hitRate !== null);
  let noise: NoiseSource | 'none' = 'none';
  const bestArms = candidates.filter((row) => {
    if (row === best) return true;
    const band = noiseBand(row, best, 'hitRate');
    if (!band) return false;
    if (noise !== 'measured') noise = band.noise;
    return (best.hitRate as number) - (row.hitRate as number) <= Math.max(band.band, 0.001);
  });
  const bestOf = (metric: ComparedMetric, higherIsBetter: boolean): ArmRow =>
    candidates.reduce((top, row) => {
      const v = row[metric] as number;
      const t = top[metric] as number;
      return (higherIsBetter ? v > t : v < t) ? row : top;
    });
  const shortfall = (metric: ComparedMetric, label: string, higherIsBetter: boolean): Shortfall => {
    const top = metric === 'hitRate' ? best : bestOf(metric, higherIsBetter);
    const value = top[metric] as number;
    const ideal = partition[metric] as number;
    return {
      metric,
      label,
      bestArmTitle: top.armTitle,
      bestArm: value,
      ideal,
      difference:
        metric === 'hitRate'
          ? (ideal - value) * 100
          : value === 0
            ? Number.NaN
            : ((ideal - value) / value) * 100,
      unit: metric === 'hitRate' ? 'points' : 'percent',
      higherIsBetter,
    };
  };
  return {
    available: true,
    bestArm: best,
    bestArms,
    noise,
    ideal: partition,
    rows: [
      shortfall('hitRate', 'Hit rate', true),
      shortfall('totalTokensPerSecond', 'Total tok/s', true),
      shortfall('meanTtftMs', 'Mean TTFT', false),
      shortfall('p99TtftMs', 'p99 TTFT', false),
      shortfall('meanItlMs', 'ITL', false),
    ],
  };
}

function numbers(record: RunRecord, summary: RunSummary): RunNumbers {
  const replicas = [...record.replicas].sort((a, b) => a.replica - b.replica);
  return {
    runId: record.id,
    requests: replicas.map((r) => r.requests),
    replicaHitRates: replicas.map((r) => r.hitRate),
    hitRate: summary.hitRate,
    totalTokensPerSecond: summary.totalTokenThroughput,
    meanTtftMs: summary.meanTtftMs,
    p99TtftMs: summary.p99TtftMs,
    meanItlMs: summary.meanItlMs,
    outputTokensPerSecond: summary.outputThroughput,
    ...(summary.requestThroughput === undefined ? {} : { requestsPerSecond: summary.requestThroughput }),
    ...(summary.medianTtftMs === undefined ? {} : { medianTtftMs: summary.medianTtftMs }),
    ...(summary.meanTpotMs === undefined ? {} : { meanTpotMs: summary.meanTpotMs }),
  };
}

/** Requests in flight of a planned run: the sum over its concurrent clients. */
function concurrencyOf(run: StudyRun): number {
  return run.benchmarks.reduce((total, b) => total + b.concurrency, 0);
}

function invalidRun(record: RunRecord, reasons: readonly string[]): InvalidRun {
  return {
    runId: record.id,
    title: record.title,
    group: record.group,
    dataset: record.dataset,
    reasons: reasons.length > 0 ? reasons : ['marked invalid without a recorded reason'],
  };
}

function metadataEntries(study: StudyRecord): MetadataEntry[] {
  const m = study.metadata;
  const w = m.config.workload;
  // The host reports K3s's version, and the versions of everything list it too: one row, unless
  // the two disagree (then both show).
  const k3sKey = Object.keys(m.versions).find((name) => name.toLowerCase() === 'k3s');
  const listedK3s = k3sKey === undefined ? undefined : m.versions[k3sKey];
  const k3sVersion = m.k3sVersion ?? listedK3s;
  const versions = Object.entries(m.versions).filter(([name, v]) => name !== k3sKey || v !== k3sVersion);
  const entries: MetadataEntry[] = [
    { label: 'Started', value: m.startedAt },
    { label: 'Finished', value: m.finishedAt ?? 'not finished' },
    {
      label: 'Workload',
      value:
        `${count(w.prefixes)} prefixes x ${count(w.prefixLen)} tokens (working set ` +
        `${count(workingSetTokens(w))} tokens), ${count(w.prompts)} prompts, concurrency ${w.concurrency}`,
    },
    { label: 'Replicas', value: String(m.config.vllm.replicas) },
    {
      label: 'Instance',
      value: [m.instanceType, m.availabilityZone].filter(Boolean).join(' in ') || 'not recorded',
    },
    {
      label: 'KV cache per replica',
      value: m.kvCacheTokens === undefined ? 'not recorded' : `${count(m.kvCacheTokens)} tokens`,
    },
    { label: 'K3s', value: k3sVersion ?? 'not recorded' },
    { label: 'Staged runs', value: stagingSummary(study) },
  ];
  for (const [pod, uuid] of Object.entries(m.gpuUuids)) entries.push({ label: `GPU of ${pod}`, value: uuid });
  for (const [name, version] of versions) entries.push({ label: name, value: version });
  return entries;
}

/**
 * How many runs started their clients behind a gate during the run before (lib/study/staging.ts):
 * their start shared the host's CPUs with that run. A fallback names its run and why.
 */
function stagingSummary(study: StudyRecord): string {
  const staged = study.runs.filter((r) => r.staging && !r.staging.fellBack).length;
  const fellBack = study.runs.find((r) => r.staging?.fellBack);
  const summary =
    staged > 0
      ? `${staged} of ${study.runs.length} (clients started behind a closed gate during the run before)`
      : 'none';
  return fellBack
    ? `${summary}; staging fell back at ${fellBack.id}: ${fellBack.staging?.fellBack}`
    : summary;
}

const count = (n: number) => n.toLocaleString('en-US');

/** Position of an arm id in the lab's arm order; unknown ids last. */
function rank(order: readonly string[], arm: string): number {
  const at = order.indexOf(arm);
  return at < 0 ? order.length : at;
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
