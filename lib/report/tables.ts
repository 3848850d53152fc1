import { allArms } from '../study/arms.ts';
import { type StudyRun, studyPlan } from '../study/plan.ts';
import type { RunRecord, RunSummary, StudyRecord } from '../study/results.ts';
import { upperBound, workingSetTokens } from '../study/workload.ts';

/**
 * The tables of lab-spec 4.5, as numbers, from a study record. Pure: no I/O, no formatting.
 *
 * Only valid runs enter these tables and comparisons; every invalid run goes to `invalid` with its
 * reasons. Facts a run record does not carry (prefix count, concurrency, prompts) come from the
 * study plan rebuilt from the configuration recorded in the study's metadata.
 */

/** The measured numbers of one valid run. */
export interface RunNumbers {
  readonly runId: string;
  /** Requests served by each replica (delta of `request_success_total`), in replica order. */
  readonly requests: readonly number[];
  /** Hit rate of each replica, 0-1, null when the replica was not queried. */
  readonly replicaHitRates: readonly (number | null)[];
  /** Hits over queries summed over the replicas, 0-1. */
  readonly hitRate: number | null;
  readonly totalTokensPerSecond: number;
  readonly meanTtftMs: number;
  readonly p99TtftMs: number;
  readonly meanItlMs: number;
}

/** One front end (or the ideal partition) under one workload. */
export interface ArmRow extends RunNumbers {
  /** Arm id, or `partition` for the ideal partition. */
  readonly arm: string;
  readonly armTitle: string;
  /**
   * The arm's front end cannot read the prompt over its API at its pinned version (lib/study/arms.ts):
   * shown beside it everywhere, and never the best arm.
   */
  readonly promptBlind?: string;
  readonly concurrency: number | undefined;
}

/** One row of the single-replica upper-bound sweep (lab-spec 4.1). */
export interface BoundRow extends RunNumbers {
  readonly prefixes: number | undefined;
  readonly workingSetTokens: number | undefined;
  /** The formula's bound `(r - 1)/r x P / L`, 0-1, beside the measured hit rate. */
  readonly bound: number | undefined;
}

/** The ideal partition against the best arm, for one metric. */
export interface Shortfall {
  readonly metric: 'hitRate' | 'totalTokensPerSecond' | 'meanTtftMs' | 'p99TtftMs' | 'meanItlMs';
  readonly label: string;
  readonly bestArm: number;
  readonly ideal: number;
  /** Hit rate: ideal - best arm in percentage points. Others: (ideal - best arm) / best arm x 100. */
  readonly difference: number;
  readonly unit: 'points' | 'percent';
  /** Higher is better for hit rate and throughput, lower for latencies. */
  readonly higherIsBetter: boolean;
}

export type LeftOnTable =
  | { readonly available: true; readonly bestArm: ArmRow; readonly ideal: ArmRow; readonly rows: Shortfall[] }
  | { readonly available: false; readonly reason: string };

export interface InvalidRun {
  readonly runId: string;
  readonly title: string;
  readonly group: RunRecord['group'];
  readonly dataset: RunRecord['dataset'];
  readonly reasons: readonly string[];
}

export interface MetadataEntry {
  readonly label: string;
  readonly value: string;
}

export interface ReportTables {
  readonly metadata: readonly MetadataEntry[];
  /** Valid arm runs with the prefix workload at the study's concurrency, in study order. */
  readonly prefixArms: readonly ArmRow[];
  /** The valid ideal-partition run, the reference of the comparison. */
  readonly partition: ArmRow | undefined;
  /** The formula's single-replica bound of the study's prefix workload, 0-1. */
  readonly workloadBound: number;
  readonly bounds: readonly BoundRow[];
  readonly sharegpt: readonly ArmRow[];
  /** Concurrency sweep rows, with each swept arm's main run at the study's concurrency, by arm then level. */
  readonly sweep: readonly ArmRow[];
  readonly leftOnTable: LeftOnTable;
  readonly invalid: readonly InvalidRun[];
  /** Study-order run ids that the tables leave out because they are invalid, per table. */
  readonly omitted: {
    readonly prefixArms: readonly string[];
    readonly bounds: readonly string[];
    readonly sharegpt: readonly string[];
    readonly sweep: readonly string[];
    readonly partition: readonly string[];
  };
}

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
    };
  };

  const isArm = (dataset: RunRecord['dataset']) => (r: RunRecord) =>
    r.group === 'arm' && r.dataset === dataset;
  const prefixArms = validRuns
    .filter(({ record }) => isArm('prefix')(record))
    .map((v) => armRow(v.record, v.summary));
  const sharegpt = validRuns
    .filter(({ record }) => isArm('sharegpt')(record))
    .map((v) => armRow(v.record, v.summary));
  const partitionRun = validRuns.find(({ record }) => record.group === 'partition');
  const partition = partitionRun ? armRow(partitionRun.record, partitionRun.summary) : undefined;

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
    validRuns
      .filter(
        ({ record }) =>
          record.arm === arm &&
          (record.group === 'sweep' || (record.group === 'arm' && record.dataset === 'prefix')),
      )
      .map((v) => armRow(v.record, v.summary))
      .sort((a, b) => (a.concurrency ?? 0) - (b.concurrency ?? 0)),
  );

  return {
    metadata: metadataEntries(study),
    prefixArms,
    partition,
    workloadBound: upperBound(config.workload),
    bounds,
    sharegpt,
    sweep,
    leftOnTable: leftOnTable(prefixArms, partition),
    invalid,
    omitted: {
      prefixArms: invalidIds(isArm('prefix')),
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

/**
 * The valid prefix-workload arm with the highest hit rate; the first in study order on a tie. A
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

/** What the best arm leaves on the table against the ideal partition (lab-spec 4.5). */
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
  const relative = (
    metric: Exclude<Shortfall['metric'], 'hitRate'>,
    label: string,
    higherIsBetter: boolean,
  ): Shortfall => ({
    metric,
    label,
    bestArm: best[metric],
    ideal: partition[metric],
    difference: best[metric] === 0 ? Number.NaN : ((partition[metric] - best[metric]) / best[metric]) * 100,
    unit: 'percent',
    higherIsBetter,
  });
  return {
    available: true,
    bestArm: best,
    ideal: partition,
    rows: [
      {
        metric: 'hitRate',
        label: 'Hit rate',
        bestArm: best.hitRate,
        ideal: partition.hitRate,
        difference: (partition.hitRate - best.hitRate) * 100,
        unit: 'points',
        higherIsBetter: true,
      },
      relative('totalTokensPerSecond', 'Total tok/s', true),
      relative('meanTtftMs', 'Mean TTFT', false),
      relative('p99TtftMs', 'p99 TTFT', false),
      relative('meanItlMs', 'ITL', false),
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
    { label: 'K3s', value: m.k3sVersion ?? 'not recorded' },
  ];
  for (const [pod, uuid] of Object.entries(m.gpuUuids)) entries.push({ label: `GPU of ${pod}`, value: uuid });
  for (const [name, version] of Object.entries(m.versions)) entries.push({ label: name, value: version });
  return entries;
}

const count = (n: number) => n.toLocaleString('en-US');

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}
