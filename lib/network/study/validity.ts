import type { Datapath, MeshMode } from '../../config/network.ts';
import { type FortioResult, meanMs } from './fortio-result.ts';
import type {
  CellHostFacts,
  DatapathEvidence,
  FortioRunSpec,
  MtlsMetricEvidence,
  MtlsProof,
  NetworkJobOutcome,
  NetworkRun,
  NetworkRunRecord,
  NetworkRunResult,
  PodMeshEvidence,
} from './model.ts';
import { conntrackCheck, hostFactsCheck, type ScaleStep, serviceScaleCheck } from './validity-cell.ts';
import {
  fortioResultCheck,
  jobCheck,
  littlesLawCheck,
  REPEAT_SPREAD,
  rateReachedCheck,
  resolutionCheck,
  resultCodesCheck,
  socketCountCheck,
} from './validity-fortio.ts';
import {
  datapathCheck,
  downloadCheck,
  type MtlsVerdict,
  mtlsMatrixCheck,
  mtlsMatrixCompleteCheck,
  mtlsVerdict,
  sidecarCheck,
  sseCheck,
} from './validity-mesh.ts';

export * from './validity-cell.ts';
export * from './validity-fortio.ts';
export * from './validity-mesh.ts';

/**
 * The validity checks of docs/facts.md §N5. Each check is a pure function returning the reasons
 * a run is invalid, as sentences naming the numbers (empty when it passes); a run with any reason
 * is invalid and never compared. Two checks do not invalidate and return flags instead (a repeat
 * spread, an mTLS matrix deviation): they are shown beside the run. The runner gathers the
 * evidence, `judgeNetworkRun` judges one run, `judgeRepeats` the spread across an arm's repeats.
 */

const pct = (fraction: number) => `${(fraction * 100).toFixed(1)}%`;
const sum = (values: Iterable<number>) => [...values].reduce((total, value) => total + value, 0);

// ---- one run -------------------------------------------------------------------------------------

/** What the runner observed about one run (the draft record's fields and the cell's facts). */
export interface NetworkRunEvidence {
  readonly job: NetworkJobOutcome;
  readonly result?: NetworkRunResult;
  readonly pods: readonly PodMeshEvidence[];
  readonly mtlsMetrics?: MtlsMetricEvidence;
  readonly host?: CellHostFacts;
  readonly datapath?: DatapathEvidence;
  /** The cell's records so far (E9 compares a step's entries with the earlier steps'). */
  readonly earlier?: readonly NetworkRunRecord[];
  /** The runner's own findings (a precondition not met, a failed restore), kept as reasons. */
  readonly runnerReasons?: readonly string[];
}

/** The cell's settings the checks judge against. */
export interface NetworkJudgeConfig {
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  /** The node every pod of the cell must run on. */
  readonly node: string;
  readonly lbMapMax: number;
  /** Components whose version every run must record. */
  readonly requiredVersions: readonly string[];
  /** `-r` of fortio runs without their own spec (E9's new-connection run). */
  readonly resolutionSeconds: number;
  /** `-c` of those runs. */
  readonly connections: number;
}

export interface NetworkJudgment {
  readonly valid: boolean;
  readonly invalidReasons: string[];
  /** Findings that do not invalidate (an mTLS matrix deviation). */
  readonly flags: string[];
  /** Mesh arms: whether their encryption was proven (`mtlsVerdict`). */
  readonly mtlsProof?: MtlsProof;
}

/** Every check of a fortio result against its spec. */
export function fortioReasons(spec: FortioRunSpec, result: FortioResult): string[] {
  return [
    ...resultCodesCheck(result),
    ...rateReachedCheck(spec, result),
    ...resolutionCheck(spec.resolutionSeconds, result),
    ...littlesLawCheck(spec, result),
    ...socketCountCheck(spec, result),
  ];
}

/** The calls a run's server sidecar must have counted. */
function callsOf(result: NetworkRunResult, fortio: FortioResult | undefined): number {
  if (result.kind === 'fortio') return fortio?.DurationHistogram.Count ?? 0;
  return 1;
}

function scaleStepsBefore(earlier: readonly NetworkRunRecord[], id: string): ScaleStep[] {
  return earlier.flatMap((record) =>
    record.id !== id && record.valid && record.result?.kind === 'service-scale'
      ? [{ services: record.result.scale.servicesReady, entries: record.result.scale.entries }]
      : [],
  );
}

/** A run's kind-specific reasons, and the mesh arms' mTLS verdict. */
interface KindJudgment {
  readonly reasons: string[];
  readonly mtls?: MtlsVerdict;
}

function withMtls(reasons: string[], mtls: MtlsVerdict | undefined): KindJudgment {
  return mtls ? { reasons: [...reasons, ...mtls.reasons], mtls } : { reasons };
}

function kindReasons(
  run: NetworkRun,
  evidence: NetworkRunEvidence,
  config: NetworkJudgeConfig,
): KindJudgment {
  const { spec } = run;
  const result = evidence.result;
  if (result === undefined) return { reasons: [] };
  if (result.kind !== spec.kind)
    return { reasons: [`the run is a ${spec.kind} run but its result is a ${result.kind} result`] };
  switch (spec.kind) {
    case 'fortio': {
      const read = fortioResultCheck(result.kind === 'fortio' ? result.raw : undefined);
      if (!read.result) return { reasons: read.reasons };
      return withMtls(
        fortioReasons(spec, read.result),
        mtlsVerdict(spec.arm, config.mesh, evidence.mtlsMetrics, callsOf(result, read.result)),
      );
    }
    case 'download':
      return result.kind === 'download'
        ? withMtls(
            downloadCheck(spec, result.download),
            mtlsVerdict(spec.arm, config.mesh, evidence.mtlsMetrics, 1),
          )
        : { reasons: [] };
    case 'sse':
      return result.kind === 'sse'
        ? withMtls(sseCheck(spec, result.sse), mtlsVerdict(spec.arm, config.mesh, evidence.mtlsMetrics, 1))
        : { reasons: [] };
    case 'mtls':
      return { reasons: result.kind === 'mtls' ? mtlsMatrixCompleteCheck(spec, result.cases) : [] };
    case 'service-scale': {
      if (result.kind !== 'service-scale') return { reasons: [] };
      const steps = scaleStepsBefore(evidence.earlier ?? [], run.id);
      const reasons = serviceScaleCheck(spec, result.scale, steps, config.datapath, config.lbMapMax);
      const raw = result.scale.newConnection;
      if (raw === undefined) return { reasons };
      const read = fortioResultCheck(raw);
      if (!read.result)
        return { reasons: [...reasons, ...read.reasons.map((reason) => `new-connection run: ${reason}`)] };
      const newConnection = { mode: 'new-connection' as const, connections: config.connections };
      const checks = [
        ...resultCodesCheck(read.result),
        ...resolutionCheck(config.resolutionSeconds, read.result),
        ...socketCountCheck(newConnection, read.result),
      ];
      return { reasons: [...reasons, ...checks.map((reason) => `new-connection run: ${reason}`)] };
    }
    case 'conntrack':
      return { reasons: result.kind === 'conntrack' ? conntrackCheck(spec, result.conntrack) : [] };
  }
}

/**
 * Judges one run: the Job, the result against its spec, the pods (sidecars by arm; every kind on
 * the cell's node), the mesh evidence, the datapath and the host. The runner calls it before
 * writing the record. `runnerReasons` come first; a run without a result is judged on that alone.
 */
export function judgeNetworkRun(
  run: NetworkRun,
  evidence: NetworkRunEvidence,
  config: NetworkJudgeConfig,
): NetworkJudgment {
  const arm = 'arm' in run.spec ? run.spec.arm : undefined;
  const first = [...(evidence.runnerReasons ?? []), ...jobCheck(evidence.job)];
  // A run that left nothing to judge (it failed or never started) is invalid for that alone.
  if (evidence.result === undefined) {
    return { valid: false, invalidReasons: [...first, 'the run left no result'], flags: [] };
  }
  const kind = kindReasons(run, evidence, config);
  const invalidReasons = [
    ...first,
    ...kind.reasons,
    ...sidecarCheck(arm, config.mesh, evidence.pods, config.node),
    ...datapathCheck(config.datapath, evidence.datapath),
    ...hostFactsCheck(evidence.host, config.requiredVersions),
  ];
  const flags = evidence.result?.kind === 'mtls' ? mtlsMatrixCheck(evidence.result.cases) : [];
  return {
    valid: invalidReasons.length === 0,
    invalidReasons,
    flags,
    ...(kind.mtls ? { mtlsProof: kind.mtls.proof } : {}),
  };
}

// ---- across repeats ---------------------------------------------------------------------------------

/** Every repeat-spread flag starts with this, so a re-judgement can replace the previous ones. */
export const REPEAT_SPREAD_FLAG = 'repeat spread';

/** One repeat of an arm: its run id and its mean latency (ms). */
export interface RepeatLatency {
  readonly id: string;
  readonly meanMs: number;
}

/**
 * The repeats of one run (`label` names them in the flag) within +-3% of their mean latency, else
 * each repeat outside is FLAGGED (shown, not hidden, not invalid). Fewer than two repeats cannot
 * spread.
 */
export function repeatSpreadCheck(label: string, repeats: readonly RepeatLatency[]): Map<string, string> {
  const flags = new Map<string, string>();
  if (repeats.length < 2) return flags;
  const mean = sum(repeats.map((repeat) => repeat.meanMs)) / repeats.length;
  for (const repeat of repeats) {
    const off = (repeat.meanMs - mean) / mean;
    if (Math.abs(off) <= REPEAT_SPREAD) continue;
    flags.set(
      repeat.id,
      `${REPEAT_SPREAD_FLAG}: ${repeat.id} mean ${repeat.meanMs.toFixed(3)} ms is ${pct(Math.abs(off))} ${off > 0 ? 'above' : 'below'} the ${repeats.length} repeats' mean ${mean.toFixed(3)} ms of ${label} (allowed +-${pct(REPEAT_SPREAD)})`,
    );
  }
  return flags;
}

/**
 * The repeat-spread check over a cell's records: valid fortio runs grouped by the plan's repeat
 * group (`repeatGroup`), each group's repeats compared with their mean. Runs of one experiment,
 * arm and mode that the plan does not mark as repeats of one run (E9's new-connection runs at
 * different Service counts, or repeated runs at different loads) are never compared. Takes every
 * record of the cell and returns them with previous spread flags replaced by the current ones.
 */
export function judgeRepeats(records: readonly NetworkRunRecord[]): NetworkRunRecord[] {
  const groups = new Map<string, { readonly label: string; readonly repeats: RepeatLatency[] }>();
  for (const record of records) {
    const group = record.repeatGroup;
    if (group === undefined || !record.valid) continue;
    if (record.spec.kind !== 'fortio' || record.result?.kind !== 'fortio') continue;
    const read = fortioResultCheck(record.result.raw);
    if (!read.result) continue;
    const label = `${record.experiment} ${record.spec.arm} ${record.spec.mode} (repeats of ${group})`;
    const entry = groups.get(group) ?? { label, repeats: [] };
    entry.repeats.push({ id: record.id, meanMs: meanMs(read.result) });
    groups.set(group, entry);
  }
  const flags = new Map<string, string>();
  for (const { label, repeats } of groups.values())
    for (const [id, flag] of repeatSpreadCheck(label, repeats)) flags.set(id, flag);
  return records.map((record) => {
    const kept = (record.flags ?? []).filter((flag) => !flag.startsWith(REPEAT_SPREAD_FLAG));
    const flag = flags.get(record.id);
    const next = flag === undefined ? kept : [...kept, flag];
    // A record that never had a flag stays without the field (E9, E10 and the others judged here).
    return next.length === 0 && record.flags === undefined ? record : { ...record, flags: next };
  });
}
