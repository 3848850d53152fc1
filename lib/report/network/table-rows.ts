import type { Datapath, MeshMode } from '../../config/network.ts';
import type {
  CellHostFacts,
  CurlOutcome,
  DatapathEvidence,
  ExperimentId,
  LatencyArm,
  NetworkStudyRecord,
} from '../../network/study/model.ts';
import type { InvalidRunRow, RepeatedRow } from '../run-rows.ts';

/** The rows of the network report's tables (lib/report/network/tables.ts computes them). */

/** What the report reads from one valid fortio run (ms, calls per second). */
export interface FortioFigures {
  readonly meanMs: number;
  readonly p50Ms?: number;
  readonly p90Ms?: number;
  readonly p99Ms?: number;
  readonly actualQps: number;
}

/** The valid repeats of one arm, summarized: means over the repeats (ms), their spread. */
export interface RepeatSummary extends RepeatedRow {
  /** Each repeat's mean latency, in record order (ms). */
  readonly repeatMeansMs: readonly number[];
  readonly meanMs: number;
  readonly p50Ms?: number;
  readonly p90Ms?: number;
  readonly p99Ms?: number;
  readonly actualQps: number;
  /** Largest distance of a repeat's mean latency from the arms' mean, in percent of it. */
  readonly spreadPercent: number;
}

/** The experiments the latency table groups: E1 with its saturation runs E1s, E3 and E4. */
export type LatencyGroup = 'E1' | 'E3' | 'E4';

export interface LatencyRow {
  readonly cell: string;
  readonly group: LatencyGroup;
  readonly arm: LatencyArm;
  /** At the fixed rate (E1, E3 fixed, E4). */
  readonly fixed?: RepeatSummary;
  /** At saturation (`-qps 0`: E1s, E3 saturation): its QPS is the arm's capacity. */
  readonly saturation?: RepeatSummary;
  /** Mean latency over the plain arm's of the same group and cell. */
  readonly meanVsPlain?: number;
  /** Saturation QPS over the plain arm's. */
  readonly saturationVsPlain?: number;
}

export type AttributionComponent = 'proxy-hops' | 'http-parsing' | 'encryption';

/**
 * Where a part of the attribution lies given its arms' repeats (lib/report/network/attribution.ts
 * `intervalOf`): `no` when the interval holds zero (not distinguishable from no cost), `unknown`
 * when an arm has one repeat (no spread to judge by).
 */
export interface AttributionInterval {
  readonly lowMs: number;
  readonly highMs: number;
  readonly distinguishable: 'yes' | 'no' | 'unknown';
}

export interface AttributionPart {
  readonly component: AttributionComponent;
  readonly label: string;
  /** How the part is computed, in the arms' names. */
  readonly formula: string;
  readonly ms: number;
  /** Share of the total added latency (fraction; may be negative when a difference is noise). */
  readonly share: number;
  /** The part's interval over the repeats of its arms. */
  readonly interval: AttributionInterval;
}

export type Attribution =
  | {
      readonly cell: string;
      readonly available: true;
      readonly parts: readonly AttributionPart[];
      /** mesh-mtls - plain of E3's fixed-rate runs (ms). */
      readonly totalMs: number;
      readonly totalInterval: AttributionInterval;
      /** The arms' fixed-rate mean latencies the parts come from (ms). */
      readonly inputs: Readonly<
        Record<'plain' | 'mesh-mtls-off' | 'mesh-mtls' | 'mesh-l4' | 'mesh-l7', number>
      >;
      /** Valid repeats behind each input (count). */
      readonly repeats: Readonly<
        Record<'plain' | 'mesh-mtls-off' | 'mesh-mtls' | 'mesh-l4' | 'mesh-l7', number>
      >;
    }
  | { readonly cell: string; readonly available: false; readonly reason: string };

export interface GrpcRow {
  readonly cell: string;
  readonly arm: LatencyArm;
  readonly summary: RepeatSummary;
  readonly meanVsPlain?: number;
}

export interface DownloadRow {
  readonly cell: string;
  readonly arm: LatencyArm;
  readonly repeats: number;
  readonly meanSeconds: number;
  readonly meanBytesPerSecond: number;
  /** Range over the repeats: the fastest and slowest download (s), the lowest and highest speed. */
  readonly minSeconds: number;
  readonly maxSeconds: number;
  readonly minBytesPerSecond: number;
  readonly maxBytesPerSecond: number;
  readonly bytes: number;
  readonly timeVsPlain?: number;
}

export interface SseRow {
  readonly cell: string;
  readonly arm: LatencyArm;
  readonly repeats: number;
  /** Means over the repeats of each stream's gap median and p99 (ms); the largest gap of all. */
  readonly gapMedianMs: number;
  readonly gapP99Ms: number;
  readonly gapMaxMs: number;
  readonly intervalMs: number;
  readonly eventsReceived: number;
  readonly eventsExpected: number;
}

export interface MtlsRow {
  readonly cell: string;
  readonly experiment: 'E2' | 'E8';
  readonly caseId: string;
  readonly title: string;
  readonly client: string;
  readonly expected: CurlOutcome;
  readonly observed: CurlOutcome | null;
  /** Observed differs from expected: a finding, shown, never hidden. */
  readonly deviation: boolean;
}

export interface ScaleRow {
  readonly cell: string;
  readonly datapath: Datapath;
  readonly services: number;
  readonly servicesReady: number;
  readonly entries: number;
  readonly entriesCommand: string;
  readonly lbMapFull?: boolean;
  /** Prober: time until a new Service's ClusterIP connects (ms), over its connected samples. */
  readonly programmingMedianMs?: number;
  readonly programmingP90Ms?: number;
  readonly samplesConnected: number;
  readonly samplesFailed: number;
  readonly attemptTimeoutMs: number;
  /** E9's method: median attempts per sample since its Service's acceptance (absent: an older record). */
  readonly attemptsPerSample?: number;
  /** E9's method: the longest delay from an acceptance to the prober's next attempt (ms); one attempt at most when sound. */
  readonly firstAttemptDelayMaxMs?: number;
  /**
   * The step's new-connection fortio run (`-keepalive=false`): the plan's separate valid run, else
   * the one the step's result carries.
   */
  readonly newConnection?: FortioFigures;
  /**
   * Entries each Service added, measured: (entries - entries at 0 Services) / Services, against
   * the same cell's valid 0-Service step. Absent at 0 Services or without that step.
   */
  readonly entriesPerService?: number;
  /** What the pinned sources predict one Service adds (lib/network/study/planner.ts `ENTRY_MODELS`). */
  readonly predictedPerService?: {
    readonly entries: number;
    readonly formula: string;
    /** `estimate`: the shape is from the source, the exact listing at the pinned version unconfirmed. */
    readonly basis: 'derived' | 'estimate';
    readonly backendsPerService: number;
  };
  /** Programming median over the same cell's at 0 Services. */
  readonly programmingVsZero?: number;
  /** Over the baseline cell's at the same Service count. */
  readonly programmingVsBaseline?: number;
  readonly newConnectionVsBaseline?: number;
  readonly entriesVsBaseline?: number;
}

export interface ConntrackRow {
  readonly cell: string;
  readonly datapath: Datapath;
  readonly requestedLimit: number | 'default';
  readonly limit: number;
  readonly baseline: number;
  readonly connections: number;
  readonly succeeded?: number;
  readonly failed?: number;
  /** About one entry per loopback connection: min(connections, limit - baseline). */
  readonly expectedSuccesses: number;
  readonly connectP99Ms?: number;
  readonly connectMaxMs?: number;
  readonly limitBefore: number;
  readonly limitAfterRestore: number | null;
  /** The host default the step restored (absent: a record of an older runner, which restored `limitBefore`). */
  readonly restoredTo?: number;
  /** Failed connections by the driver's cause (`timeout`, `refused`, `reset`, `emfile`, `no-local-port`; counts). */
  readonly failures?: Readonly<Record<string, number>>;
  /** Established connections dropped while held (count). */
  readonly droppedDuringHold?: number;
  /** Succeeded minus the baseline cell's at the same requested limit. */
  readonly succeededVsBaseline?: number;
}

export interface CalibrationRow {
  readonly cell: string;
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  readonly host: CellHostFacts;
  readonly summary?: RepeatSummary;
  /** Mean latency over the baseline cell's calibration mean. */
  readonly vsBaseline?: number;
  /** Mean latency minus the baseline cell's (ms). */
  readonly diffVsBaselineMs?: number;
}

export interface InvalidRun extends InvalidRunRow {
  readonly cell: string;
  readonly experiment: ExperimentId;
  /** The record's attempt number, when it has one (a resumed run). */
  readonly attempt?: number;
  /** E9 steps: the step's Service count (charts leave a gap there). */
  readonly services?: number;
}

export interface FlaggedRun {
  readonly cell: string;
  readonly runId: string;
  readonly flags: readonly string[];
}

export interface CellRow {
  readonly cell: string;
  readonly studyId: string;
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  readonly state: NetworkStudyRecord['state'];
  readonly error?: string;
  readonly startedAt: string;
  readonly finishedAt?: string;
  readonly host: CellHostFacts;
  readonly datapathEvidence?: DatapathEvidence;
  readonly runs: number;
  readonly validRuns: number;
}

/**
 * The cell every cell's figures are compared with (lib/report/network/baseline.ts): named with
 * `--baseline`, or the default rule's; absent, with the reason, when no cell fits the rule.
 */
export type BaselineChoice =
  | {
      readonly cell: string;
      readonly datapath: Datapath;
      readonly mesh: MeshMode;
      readonly how: 'named' | 'default';
    }
  | { readonly cell?: undefined; readonly reason: string };

export interface NetworkReportTables {
  readonly baseline: BaselineChoice;
  readonly cells: readonly CellRow[];
  readonly latency: readonly LatencyRow[];
  readonly attribution: readonly Attribution[];
  readonly grpc: readonly GrpcRow[];
  readonly downloads: readonly DownloadRow[];
  readonly sse: readonly SseRow[];
  readonly mtls: readonly MtlsRow[];
  readonly scale: readonly ScaleRow[];
  readonly conntrack: readonly ConntrackRow[];
  readonly calibration: readonly CalibrationRow[];
  readonly invalid: readonly InvalidRun[];
  readonly flagged: readonly FlaggedRun[];
}
