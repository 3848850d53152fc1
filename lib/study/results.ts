import type { LabConfig } from '../config/schema.ts';
import type { StudyPredictions } from './arm-predictions.ts';
import type { Dataset, RunGroup } from './plan.ts';
import type { PreciseScorerEvidence } from './precise-evidence.ts';

/**
 * The result model of a study (docs/facts.md §4.3, 4.5): what the runner records per run and per study,
 * and what the report reads. The study JSON (`study.json`) is the source of truth; reports are
 * derived from it.
 */

/** Keys of the benchmark client's saved JSON that the study uses (docs/facts.md §3.8). */
export const CLIENT_RESULT_KEYS = [
  'completed',
  'duration',
  'total_input_tokens',
  'total_output_tokens',
  'request_throughput',
  'output_throughput',
  'total_token_throughput',
  'mean_ttft_ms',
  'median_ttft_ms',
  'p99_ttft_ms',
  'mean_tpot_ms',
  'mean_itl_ms',
  'p99_itl_ms',
  'mean_e2el_ms',
] as const;

export type ClientResultKey = (typeof CLIENT_RESULT_KEYS)[number];
export type ClientResult = Readonly<Record<ClientResultKey, number>>;

/** How a benchmark Job ended, judged by `status.succeeded` / `status.failed` (docs/facts.md §4.4). */
/** How a client's Job ended; `unschedulable`: no node could take its pod, so it was deleted. */
export type JobOutcome = 'succeeded' | 'failed' | 'timed-out' | 'unschedulable';

/** One benchmark client of a run. */
export interface ClientRecord {
  readonly benchmarkId: string;
  readonly resultFile: string;
  /** Prompts the client was asked to send. */
  readonly prompts: number;
  readonly job: JobOutcome;
  /** The saved JSON's used keys; absent when the file is missing, empty or unreadable. */
  readonly result?: ClientResult;
}

/** Per-replica evidence of a run: deltas of vLLM's counters between the snapshots around it. */
export interface ReplicaRecord {
  readonly replica: number;
  readonly pod: string;
  /** Delta of `vllm:request_success_total` (all finished reasons). */
  readonly requests: number;
  /** Delta of `vllm:prefix_cache_queries_total` (tokens). */
  readonly queriedTokens: number;
  /** Delta of `vllm:prefix_cache_hits_total` (tokens). */
  readonly hitTokens: number;
  /** hits / queries, or null when nothing was queried. */
  readonly hitRate: number | null;
  /** Number of `vllm:` series on /metrics after the run; 0 means metrics are missing. */
  readonly vllmSeries: number;
}

/** The numbers the report compares, aggregated over a run's clients and replicas. */
export interface RunSummary {
  readonly completed: number;
  /** Prompts asked minus completed, over all clients. */
  readonly failed: number;
  /**
   * Tokens per second over the whole run. One client: its own figures. Concurrent clients (the
   * ideal partition): (sum of input + output tokens) / longest duration, and sum of output tokens /
   * longest duration; adding the clients' own rates would overstate the reference, since each rate
   * is over that client's shorter duration.
   */
  readonly totalTokenThroughput: number;
  readonly outputThroughput: number;
  /** Completed requests per second, over the whole run as the token rates (absent in older records). */
  readonly requestThroughput?: number;
  /** Median TTFT: one client's own; for concurrent clients the completed-weighted mean of their medians. */
  readonly medianTtftMs?: number;
  /** Mean time per output token, weighted by each client's output tokens (absent in older records). */
  readonly meanTpotMs?: number;
  /** Mean TTFT weighted by each client's completed requests. */
  readonly meanTtftMs: number;
  /** Mean ITL weighted by each client's output tokens (it is a per-token mean). */
  readonly meanItlMs: number;
  /** The highest client p99: exact for one client, an upper estimate for the ideal partition. */
  readonly p99TtftMs: number;
  /** Sum of replica hits / sum of replica queries, or null without queries. */
  readonly hitRate: number | null;
}

/**
 * How a replica's prefix-cache reset was proven (docs/facts.md §4.4): `log-confirmed` when vLLM logged
 * a successful reset after the runner's POST /reset_prefix_cache, `pod-restart` when the pod was
 * replaced (a fresh process has an empty cache), `unverified` when neither could be shown.
 */
export type ResetVerification = 'log-confirmed' | 'pod-restart' | 'unverified';

/** One replica's reset before a run, as recorded. */
export interface ReplicaResetRecord {
  readonly replica: number;
  readonly pod: string;
  readonly verifiedBy: ResetVerification;
  /** What proved it, or why it could not be proven (names the log line, the wait, the restart). */
  readonly detail: string;
}

/**
 * Whether the front end's own metrics show it read the prompts of a run: `seen`, `not-seen`
 * (the run is invalid), or `unavailable` when the pinned component exports no such evidence.
 */
export type PromptEvidenceStatus = 'seen' | 'not-seen' | 'unavailable';

/** The front end's evidence that it saw the prompts of a prefix run over /v1/completions. */
export interface PromptEvidence {
  readonly status: PromptEvidenceStatus;
  /** The component whose metrics were read, with its version (`GAIE v1.0.1 EPP`, ...). */
  readonly component: string;
  /** The metric values read after the run, by metric name. */
  readonly metrics: Readonly<Record<string, number>>;
  /** In words: what the values show, or why there is no evidence. */
  readonly detail: string;
}

export interface RunRecord {
  readonly id: string;
  readonly group: RunGroup;
  readonly title: string;
  readonly arm?: string;
  readonly dataset: Dataset;
  readonly startedAt: string;
  readonly finishedAt: string;
  /** How the prefix caches were reset before the run. */
  readonly reset: 'endpoint' | 'pod-restart';
  /** Per replica, how the reset was verified (absent in records of runner versions before it). */
  readonly resets?: readonly ReplicaResetRecord[];
  /** The arm's preflight (one request through the front end) when this run was its first. */
  readonly preflight?: PreflightRecord;
  /** EPP-family prefix runs over /v1/completions: the front end's evidence that it saw prompts. */
  readonly promptEvidence?: PromptEvidence;
  /**
   * llm-d prefix runs over /v1/completions: whether the precise scorer's look-ups ever found blocks
   * on a pod, from the EPP's "Got pod scores" log lines (lib/study/precise-evidence.ts).
   */
  readonly scorerEvidence?: PreciseScorerEvidence;
  readonly clients: readonly ClientRecord[];
  readonly replicas: readonly ReplicaRecord[];
  /** Present when every client has a result. */
  readonly summary?: RunSummary;
  readonly upperBound?: number;
  /** A run that fails any validity check is invalid and never enters a comparison. */
  readonly valid: boolean;
  readonly invalidReasons: readonly string[];
  /** What could not be checked, said so rather than assumed (absent when nothing was). */
  readonly warnings?: readonly string[];
  /**
   * Runs that executed at the same time as this one, on other replicas (the bound sweep runs one
   * run per replica at once). They shared the host's CPUs and PCIe, not a GPU or a cache.
   */
  readonly overlappedWith?: readonly string[];
  /** Present when this run's clients were staged during an earlier run (lib/study/staging.ts). */
  readonly staging?: StagingRecord;
  /** Which attempt of the run this record is (1 when absent). */
  readonly attempt?: number;
  /**
   * The run's earlier attempts, oldest first, each as it was recorded (without its own
   * `attempts`): an attempt retried because a replica restarted during it, or an invalid record
   * of an earlier runner that a resumed study ran again. Nothing recorded is ever dropped.
   */
  readonly attempts?: readonly RunAttempt[];
}

/** An earlier attempt of a run, and why another one followed. */
export type RunAttempt = Omit<RunRecord, 'attempts'> & {
  /** Why the run was attempted again (`replica qwen3-1 restarted during the run`, `resumed study`). */
  readonly retriedBecause: string;
};

/** Why a study stopped early: a check proved the rest of it could not be valid (issue 11). */
export interface StudyStop {
  readonly at: string;
  /** What the check found. */
  readonly reason: string;
  /** What to change before running the study again. */
  readonly change: string;
}

/** The outcome of an arm's preflight: one request through its front end reached a replica. */
export interface PreflightRecord {
  readonly ok: boolean;
  readonly detail: string;
}

/** Recorded once per study (docs/facts.md §4.3). */
export interface StudyMetadata {
  /** The study's id (`studies/<id>/` in the results folder and in S3); absent before ids existed. */
  readonly studyId?: string;
  readonly startedAt: string;
  readonly finishedAt?: string;
  readonly config: LabConfig;
  /** Versions of everything that ran: images, K3s, router, GAIE, ... */
  readonly versions: Readonly<Record<string, string>>;
  readonly instanceType?: string;
  readonly availabilityZone?: string;
  /** GPU UUID per replica pod. */
  readonly gpuUuids: Readonly<Record<string, string>>;
  /** `nvidia-smi topo -m`, as saved by the bootstrap. */
  readonly gpuTopology?: string;
  /** "GPU KV cache size" read from a replica's log. */
  readonly kvCacheTokens?: number;
  readonly k3sVersion?: string;
  /** What could not be recorded, and why (a missing bootstrap file, a log line not found, ...). */
  readonly notes?: readonly string[];
  /**
   * What the simulator predicted for every arm when the study started (lib/study/arm-predictions.ts);
   * absent in records of runner versions before it, when the report computes them from the config.
   */
  readonly predictions?: StudyPredictions;
  /** Set when a study-level check stopped the study before its end. */
  readonly stopped?: StudyStop;
  /** `smoke`: a smoke study (lib/study/smoke.ts), never resumed and never reported as the study. */
  readonly profile?: 'smoke';
  /** A full study's smoke checks before its first long run: the smoke study that ran them and its verdict. */
  readonly checks?: StudyChecks;
}

/** The outcome of a full study's smoke checks (docs/first-run.md). */
export interface StudyChecks {
  readonly smokeStudyId: string;
  readonly passed: boolean;
  /** Each failed proof as `<arm>: <proof>: <evidence>`. */
  readonly failures: readonly string[];
}

export const STUDY_SCHEMA_VERSION = 1;

export interface StudyRecord {
  readonly schemaVersion: typeof STUDY_SCHEMA_VERSION;
  readonly metadata: StudyMetadata;
  readonly runs: readonly RunRecord[];
}

/** Aggregates a run's clients and replicas; undefined when a client has no result. */
export function summarizeRun(
  clients: readonly ClientRecord[],
  replicas: readonly ReplicaRecord[],
): RunSummary | undefined {
  const results = clients.map((c) => c.result);
  if (results.length === 0 || results.some((r) => r === undefined)) return undefined;
  const done = results as ClientResult[];
  const completed = sum(done.map((r) => r.completed));
  const queried = sum(replicas.map((r) => r.queriedTokens));
  const combined = done.length === 1 ? ownFigures(done[0]) : combine(done);
  return {
    completed,
    failed: sum(clients.map((c, i) => c.prompts - done[i].completed)),
    ...combined,
    p99TtftMs: Math.max(...done.map((r) => r.p99_ttft_ms)),
    hitRate: queried === 0 ? null : sum(replicas.map((r) => r.hitTokens)) / queried,
  };
}

type CombinedFigures = Pick<
  RunSummary,
  | 'totalTokenThroughput'
  | 'outputThroughput'
  | 'requestThroughput'
  | 'medianTtftMs'
  | 'meanTpotMs'
  | 'meanTtftMs'
  | 'meanItlMs'
>;

function ownFigures(r: ClientResult): CombinedFigures {
  return {
    totalTokenThroughput: r.total_token_throughput,
    outputThroughput: r.output_throughput,
    requestThroughput: r.request_throughput,
    medianTtftMs: r.median_ttft_ms,
    meanTpotMs: r.mean_tpot_ms,
    meanTtftMs: r.mean_ttft_ms,
    meanItlMs: r.mean_itl_ms,
  };
}

/** Combines concurrent clients: tokens over the longest duration, means weighted per request / per token. */
function combine(done: readonly ClientResult[]): CombinedFigures {
  const duration = Math.max(...done.map((r) => r.duration));
  const inputTokens = sum(done.map((r) => r.total_input_tokens));
  const outputTokens = sum(done.map((r) => r.total_output_tokens));
  const weighted = (key: ClientResultKey, weight: ClientResultKey) => {
    const total = sum(done.map((r) => r[weight]));
    return total === 0 ? 0 : sum(done.map((r) => r[key] * r[weight])) / total;
  };
  return {
    totalTokenThroughput: duration > 0 ? (inputTokens + outputTokens) / duration : 0,
    outputThroughput: duration > 0 ? outputTokens / duration : 0,
    requestThroughput: duration > 0 ? sum(done.map((r) => r.completed)) / duration : 0,
    medianTtftMs: weighted('median_ttft_ms', 'completed'),
    meanTpotMs: weighted('mean_tpot_ms', 'total_output_tokens'),
    meanTtftMs: weighted('mean_ttft_ms', 'completed'),
    meanItlMs: weighted('mean_itl_ms', 'total_output_tokens'),
  };
}

/** Picks the used keys from a client's saved JSON; undefined when one is missing or not a number. */
export function parseClientResult(json: unknown): ClientResult | undefined {
  if (json === null || typeof json !== 'object') return undefined;
  const record = json as Record<string, unknown>;
  const picked: Partial<Record<ClientResultKey, number>> = {};
  for (const key of CLIENT_RESULT_KEYS) {
    const value = record[key];
    if (typeof value !== 'number' || !Number.isFinite(value)) return undefined;
    picked[key] = value;
  }
  return picked as ClientResult;
}

function sum(values: readonly number[]): number {
  return values.reduce((total, v) => total + v, 0);
}

/**
 * How a staged run started (lib/study/staging.ts): its clients were created during an earlier
 * run's load behind closed gates, and the gates opened after this run's caches were reset.
 */
export interface StagingRecord {
  /** The run during whose load the clients were created. */
  readonly during: string;
  readonly clientsCreatedAt: string;
  /** When the gates got their front end's selector; absent when the run fell back. */
  readonly gatesOpenedAt?: string;
  /** Gate Service name to the front-end Service whose spec it copies. */
  readonly gates: Readonly<Record<string, string>>;
  /** When the front end was restarted during the earlier run (else after this run's reset). */
  readonly frontEndRestartedAt?: string;
  /**
   * Why the staged clients were not used and the run started its own as usual (a client that
   * ended before its gate opened, a gate that could not be made); staging is off after it.
   */
  readonly fellBack?: string;
}
