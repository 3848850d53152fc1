import type { Api, FrontEndKind } from './arms.ts';
import {
  counterDeltas,
  type EppSnapshot,
  KV_INDEX_ADMISSIONS,
  KV_INDEX_LOOKUPS,
  PREFIX_INDEXER_SIZE,
  type VllmSnapshot,
} from './metrics.ts';
import type { Dataset, StudyRun } from './plan.ts';
import { type PreciseScorerEvidence, preciseScorerReasons } from './precise-evidence.ts';
import {
  CLIENT_RESULT_KEYS,
  type ClientRecord,
  type ClientResult,
  type JobOutcome,
  type PromptEvidence,
  parseClientResult,
  type ReplicaRecord,
  type ReplicaResetRecord,
  type ResetVerification,
  type RunRecord,
} from './results.ts';
import { workingSetTokens } from './workload.ts';

/**
 * The validity checks of docs/facts.md §4.4. Each check is a pure function that returns the reasons a
 * run is invalid (empty when it passes); a run with any reason is marked invalid and never enters
 * a comparison. The runner gathers the evidence, these functions judge it.
 */

// ---- The client's result file ---------------------------------------------------------------

/** A client's saved JSON as read from the results folder: its text, or undefined when missing. */
export interface ResultFileReading {
  readonly benchmarkId: string;
  readonly resultFile: string;
  readonly text: string | undefined;
}

/** The used keys of a result file, or the reason it cannot be used. */
export function readResultFile(
  reading: ResultFileReading,
): { readonly result: ClientResult } | { readonly problem: string } {
  const where = `client ${reading.benchmarkId}: result file ${reading.resultFile}`;
  if (reading.text === undefined) return { problem: `${where} is missing` };
  if (reading.text.trim() === '') return { problem: `${where} is empty` };
  let json: unknown;
  try {
    json = JSON.parse(reading.text);
  } catch (error) {
    return { problem: `${where} is not valid JSON (${(error as Error).message})` };
  }
  const result = parseClientResult(json);
  if (!result) {
    const record = (json ?? {}) as Record<string, unknown>;
    const bad = CLIENT_RESULT_KEYS.filter((key) => typeof record[key] !== 'number');
    return { problem: `${where} lacks numeric ${bad.join(', ')}` };
  }
  return { result };
}

/** Lab-spec 4.4: every client's result file exists, is non-empty and parses. */
export function resultFileReasons(readings: readonly ResultFileReading[]): string[] {
  return readings.flatMap((reading) => {
    const read = readResultFile(reading);
    return 'problem' in read ? [read.problem] : [];
  });
}

/** Lab-spec 4.4: `completed` equals the prompt count, per client. */
export function completedReasons(clients: readonly ClientRecord[]): string[] {
  return clients.flatMap((client) =>
    client.result && client.result.completed !== client.prompts
      ? [
          `client ${client.benchmarkId}: completed ${client.result.completed} of ${client.prompts} prompts (${client.prompts - client.result.completed} failed)`,
        ]
      : [],
  );
}

// ---- The Job ---------------------------------------------------------------------------------

/** The counts of a Job's status that say whether it finished. */
export interface JobCounts {
  readonly succeeded?: number;
  readonly failed?: number;
  readonly active?: number;
}

/**
 * How a Job ended, judged by `status.succeeded` / `status.failed` (docs/facts.md §4.4, lesson 7), or
 * undefined while it runs. Never by `conditions[0]`: on current Job APIs the first condition is
 * not the one you expect. With `backoffLimit: 0` one failed pod is final.
 */
export function jobOutcome(status: JobCounts | undefined): 'succeeded' | 'failed' | undefined {
  if ((status?.succeeded ?? 0) > 0) return 'succeeded';
  if ((status?.failed ?? 0) > 0) return 'failed';
  return undefined;
}

/** Lab-spec 4.4: every client's Job succeeded. */
export function jobReasons(clients: readonly Pick<ClientRecord, 'benchmarkId' | 'job'>[]): string[] {
  const why: Record<Exclude<JobOutcome, 'succeeded'>, string> = {
    failed: 'failed (status.failed > 0)',
    'timed-out': 'did not finish before the timeout (neither status.succeeded nor status.failed)',
    unschedulable:
      "never started: no node could take its pod (PodScheduled False, Unschedulable); the scheduler's message is in the client's log",
  };
  return clients.flatMap((client) =>
    client.job === 'succeeded' ? [] : [`client ${client.benchmarkId}: Job ${why[client.job]}`],
  );
}

// ---- Cache reset ------------------------------------------------------------------------------

/** How one replica's prefix cache was reset before a run, and how that was proven. */
export interface ReplicaReset {
  readonly replica: number;
  readonly pod: string;
  /** `endpoint`: POST /reset_prefix_cache confirmed in the log; `pod-restart`: the pod was replaced. */
  readonly method: 'endpoint' | 'pod-restart';
  /** HTTP status of POST /reset_prefix_cache, when it was called and answered. */
  readonly status?: number;
  readonly verifiedBy: ResetVerification;
  /** What proved the reset, or why nothing could. */
  readonly detail: string;
}

/**
 * Lab-spec 4.4, lesson 9: caches were reset before the run, and the reset is verified, not
 * assumed (POST /reset_prefix_cache answers 200 also when vLLM refused). A reset confirmed by
 * vLLM's log counts; a pod restart counts when the fresh replica's queries counter is 0 in the
 * snapshot before the run (nothing was looked up between the reset and the run); an unverified
 * reset never counts.
 */
export function cacheResetReasons(
  resets: readonly ReplicaReset[],
  before: ReadonlyMap<number, VllmSnapshot | undefined>,
): string[] {
  return resets.flatMap((reset) => {
    const who = `replica ${reset.pod}`;
    if (reset.verifiedBy === 'unverified')
      return [`${who}: prefix cache reset not verified: ${reset.detail}`];
    if (reset.verifiedBy === 'log-confirmed') return [];
    const queries = before.get(reset.replica)?.prefixCacheQueries;
    if (queries === 0) return [];
    return [
      `${who}: restarted to reset its cache, but its prefix-cache queries counter was ${queries ?? 'absent'} before the run, not 0`,
    ];
  });
}

/** The per-replica record of how each reset was verified. */
export function resetRecords(resets: readonly ReplicaReset[]): ReplicaResetRecord[] {
  return resets.map(({ replica, pod, verifiedBy, detail }) => ({ replica, pod, verifiedBy, detail }));
}

// ---- Prompt visibility at the front end ------------------------------------------------------

/** Where an EPP-family front end keeps the evidence that it read prompts. */
export type PromptEvidenceSource = 'gaie-prefix-indexer' | 'llmd-kv-index';

/**
 * Which evidence a run must show: prefix runs over /v1/completions through an EPP-family front
 * end (the GAIE EPP, the AI Gateway's EPP, llm-d's scheduler). Their chat runs are prompt-blind
 * controls (GAIE v1.0.1 reads no parts-array content) and prove nothing either way; ShareGPT
 * controls are not about prefixes.
 */
export function promptEvidenceSource(
  frontEnd: FrontEndKind,
  api: Api,
  dataset: Dataset,
): PromptEvidenceSource | undefined {
  if (api !== 'completions' || dataset !== 'prefix') return undefined;
  switch (frontEnd) {
    case 'epp':
    case 'ai-gateway':
      return 'gaie-prefix-indexer';
    case 'llmd':
      return 'llmd-kv-index';
    default:
      return undefined;
  }
}

/** The EPP's /metrics after a run: its snapshot, or the error of the scrape. */
export interface EppScrape {
  readonly snapshot?: EppSnapshot;
  readonly error?: string;
}

/**
 * The front end's evidence that it saw the prompts of a run. GAIE's prefix-cache-scorer (the EPP
 * arms, and the AI Gateway's EPP) must have indexed something; llm-d's precise scorer must have
 * looked up block keys of a tokenized prompt in an index its replicas' KV events filled. The
 * llm-d counters exist only with `kvBlockIndexConfig.enableMetrics`; without them the evidence is
 * `unavailable`, said as such, never assumed.
 */
export function promptEvidence(
  source: PromptEvidenceSource,
  component: string,
  scrape: EppScrape,
): PromptEvidence {
  if (!scrape.snapshot) {
    return {
      status: 'not-seen',
      component,
      metrics: {},
      detail: `the EPP's /metrics could not be read (${scrape.error ?? 'no answer'})`,
    };
  }
  const s = scrape.snapshot;
  if (source === 'gaie-prefix-indexer') {
    const size = s.prefixIndexerSize;
    if (size === undefined) {
      return {
        status: 'not-seen',
        component,
        metrics: {},
        detail: `the EPP's /metrics has no ${PREFIX_INDEXER_SIZE} (is prefix-cache-scorer in its scheduler config?)`,
      };
    }
    const metrics = { [PREFIX_INDEXER_SIZE]: size };
    return size > 0
      ? { status: 'seen', component, metrics, detail: `${PREFIX_INDEXER_SIZE} is ${size} after the run` }
      : {
          status: 'not-seen',
          component,
          metrics,
          detail: `${PREFIX_INDEXER_SIZE} is ${size} after the run: the EPP indexed no prompt, so its prefix-cache-scorer scored every pod 0`,
        };
  }
  const lookups = s.kvIndexLookups;
  const admissions = s.kvIndexAdmissions;
  if (lookups === undefined || admissions === undefined) {
    return {
      status: 'unavailable',
      component,
      metrics: {},
      detail: `the EPP's /metrics has no ${KV_INDEX_LOOKUPS} / ${KV_INDEX_ADMISSIONS}: llm-d-kv-cache-manager v0.3.2 exports them only with indexerConfig.kvBlockIndexConfig.enableMetrics: true, and llm-d's precise scorer does not report GAIE's ${PREFIX_INDEXER_SIZE}`,
    };
  }
  const metrics = { [KV_INDEX_LOOKUPS]: lookups, [KV_INDEX_ADMISSIONS]: admissions };
  const missing = [
    ...(lookups > 0 ? [] : [`${KV_INDEX_LOOKUPS} is 0 (no prompt was tokenized into block keys)`]),
    ...(admissions > 0
      ? []
      : [`${KV_INDEX_ADMISSIONS} is 0 (no KV event from the replicas reached the index)`]),
  ];
  return missing.length === 0
    ? {
        status: 'seen',
        component,
        metrics,
        detail: `the KV-block index was looked up ${lookups} times and admitted ${admissions} blocks during the run`,
      }
    : { status: 'not-seen', component, metrics, detail: `${missing.join('; ')} after the run` };
}

/** A run whose front end shows it saw no prompt is invalid; unavailable evidence is recorded, not judged. */
export function promptEvidenceReasons(evidence: PromptEvidence | undefined): string[] {
  if (evidence?.status !== 'not-seen') return [];
  return [`front end did not see the prompts (${evidence.component}): ${evidence.detail}`];
}

// ---- Metrics ----------------------------------------------------------------------------------

/** One replica's /metrics around a run: a snapshot, or the error of the scrape. */
export interface ReplicaScrapes {
  readonly replica: number;
  readonly pod: string;
  readonly before?: VllmSnapshot;
  readonly beforeError?: string;
  readonly after?: VllmSnapshot;
  readonly afterError?: string;
}

const COUNTERS = [
  ['requestSuccess', 'vllm:request_success_total'],
  ['prefixCacheQueries', 'vllm:prefix_cache_queries_total'],
  ['prefixCacheHits', 'vllm:prefix_cache_hits_total'],
] as const;

/**
 * Lab-spec 4.4: metrics exist on every replica before and after the run (`vllm:` series > 0,
 * else `--disable-log-stats` is set or the scrape hit the wrong port), the study's counters are
 * there, and none went backwards (a replica that restarted mid-run loses its counts).
 */
export function metricsReasons(scrapes: readonly ReplicaScrapes[]): string[] {
  return scrapes.flatMap((s) => {
    const who = `replica ${s.pod}`;
    const found: string[] = [];
    for (const [when, snapshot, error] of [
      ['before', s.before, s.beforeError],
      ['after', s.after, s.afterError],
    ] as const) {
      if (!snapshot) {
        found.push(`${who}: /metrics could not be read ${when} the run (${error ?? 'no answer'})`);
      } else if (snapshot.vllmSeries === 0) {
        found.push(
          `${who}: /metrics has no vllm: series ${when} the run (vLLM started with --disable-log-stats, or the scrape hit the wrong port)`,
        );
      } else {
        const missing = COUNTERS.filter(([key]) => snapshot[key] === undefined).map(([, name]) => name);
        if (missing.length > 0) found.push(`${who}: /metrics lacks ${missing.join(', ')} ${when} the run`);
      }
    }
    if (found.length === 0 && s.before && s.after && !counterDeltas(s.before, s.after)) {
      found.push(`${who}: a counter went backwards during the run (the replica restarted)`);
    }
    return found;
  });
}

// ---- Requests per replica ---------------------------------------------------------------------

/**
 * Requests each replica must serve in a run aimed at replicas directly (bound and partition
 * runs: every prompt of a client plus its warm-up on its replica, nothing elsewhere); undefined
 * for a front-end run, where only the total is known.
 */
export function expectedRequestsPerReplica(run: StudyRun, replicas: number): number[] | undefined {
  const targets = run.benchmarks.map((spec) => (spec.target.kind === 'replica' ? spec.target.replica : -1));
  if (targets.includes(-1)) return undefined;
  // A bound run is judged on its own replica, which may have any index.
  const expected = Array.from({ length: Math.max(replicas, ...targets.map((t) => t + 1)) }, () => 0);
  run.benchmarks.forEach((spec, i) => {
    expected[targets[i]] += spec.prompts + 1;
  });
  return expected;
}

/**
 * Lab-spec 4.4: the replicas' request counts add up to `run.expectedRequests` (every prompt plus
 * one warm-up per client); for a run aimed at replicas directly, each replica's count too.
 */
export function requestReasons(run: StudyRun, replicas: readonly ReplicaRecord[]): string[] {
  const total = replicas.reduce((sum, r) => sum + r.requests, 0);
  const found: string[] = [];
  if (total !== run.expectedRequests) {
    const split = replicas.map((r) => `${r.pod} ${r.requests}`).join(', ');
    found.push(
      `replicas served ${total} requests (${split}), expected ${run.expectedRequests} (prompts plus one warm-up per client)`,
    );
  }
  const perReplica = expectedRequestsPerReplica(run, replicas.length);
  if (perReplica) {
    for (const r of replicas) {
      const expected = perReplica[r.replica];
      if (expected !== undefined && r.requests !== expected) {
        found.push(
          `replica ${r.pod} served ${r.requests} requests, expected ${expected} for this run's target`,
        );
      }
    }
  }
  return found;
}

/**
 * Every client runs with `--ignore-eos` (docs/facts.md §3.8), so every request ends because it reached its
 * output length: vLLM counts it as `request_success_total{finished_reason="length"}`. A request that
 * ended on `stop` (EOS or a stop string) generated less than asked, and the arms' throughputs would
 * not compare. Judged only when both scrapes of every replica exist (metricsReasons covers the rest).
 */
export function outputLengthReasons(scrapes: readonly ReplicaScrapes[]): string[] {
  let stopped = 0;
  for (const s of scrapes) {
    if (!s.before || !s.after) return [];
    const delta = (s.after.requestSuccessByReason.stop ?? 0) - (s.before.requestSuccessByReason.stop ?? 0);
    stopped += Math.max(0, delta);
  }
  return stopped === 0
    ? []
    : [
        `${stopped} request(s) finished with reason "stop" before their output length: --ignore-eos was not in effect, so the run did less work than the others`,
      ];
}

// ---- Distinct prefixes (across runs) ----------------------------------------------------------

/** How far below the fewest-prefix bound run the most-prefix one must hit: 5 percentage points. */
export const DISTINCT_PREFIX_MIN_GAP = 0.05;

/** Every reason of the distinct-prefix check starts with this, so it can be re-evaluated. */
export const IDENTICAL_PREFIXES_REASON =
  'the dataset generator produced identical prefixes (known v0.11 prefix_repetition bug)';

/**
 * Lab-spec 4.4: the workload had distinct prefixes. Of the upper-bound sweep, the run with the
 * most prefixes must hit clearly (at least `DISTINCT_PREFIX_MIN_GAP`) below the run with the
 * fewest. The check applies when the two should differ: their theoretical bounds are at least
 * that far apart, or the larger working set overflows the KV cache. It judges only from bound
 * runs that are otherwise valid: when either of the two has an invalid reason other than this
 * check's own (a failed Job, a cache not reset, missing metrics, ...), its hit rate is no
 * evidence about the generator and nothing is marked. When it fails, the client's
 * generator is broken, and since every prefix run uses the same generator, every prefix run of
 * the study is invalid. Returns the reason per run id that fails it.
 */
export function identicalPrefixReasons(
  runs: readonly StudyRun[],
  records: readonly RunRecord[],
  kvCacheTokensPerReplica: number,
): Map<string, string> {
  const recorded = new Map(records.map((r) => [r.id, r]));
  const bounds = runs
    .flatMap((run) => {
      const shape = run.group === 'bound' ? run.benchmarks[0]?.prefix : undefined;
      return shape ? [{ run, record: recorded.get(run.id), shape }] : [];
    })
    .sort((a, b) => a.shape.prefixes - b.shape.prefixes);
  const reasons = new Map<string, string>();
  if (bounds.length < 2) return reasons;
  const few = bounds[0];
  const many = bounds[bounds.length - 1];
  if (few.shape.prefixes === many.shape.prefixes) return reasons;
  if (!otherwiseValid(few.record) || !otherwiseValid(many.record)) return reasons;
  const manyRate = many.record?.summary?.hitRate;
  const fewRate = few.record?.summary?.hitRate;
  if (manyRate == null || fewRate == null) return reasons;
  const boundGap = (few.run.upperBound ?? 0) - (many.run.upperBound ?? 0);
  const overflows = workingSetTokens(many.shape) > kvCacheTokensPerReplica;
  if (boundGap < DISTINCT_PREFIX_MIN_GAP && !overflows) return reasons;
  if (manyRate <= fewRate - DISTINCT_PREFIX_MIN_GAP) return reasons;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const reason =
    `${IDENTICAL_PREFIXES_REASON}: ${many.run.id} hit ${pct(manyRate)}, not at least ` +
    `${DISTINCT_PREFIX_MIN_GAP * 100} points below ${few.run.id} (${pct(fewRate)})`;
  for (const record of records) {
    if (record.dataset === 'prefix') reasons.set(record.id, reason);
  }
  return reasons;
}

/** A record with no invalid reason other than the distinct-prefix check's own. */
function otherwiseValid(record: RunRecord | undefined): boolean {
  return record?.invalidReasons.every((r) => r.startsWith(IDENTICAL_PREFIXES_REASON)) ?? false;
}

/**
 * Records with the study-wide distinct-prefix check applied afresh: a previous verdict of that
 * check is dropped, the current one added, `valid` recomputed.
 */
export function withStudyChecks(
  runs: readonly StudyRun[],
  records: readonly RunRecord[],
  kvCacheTokensPerReplica: number,
): RunRecord[] {
  const own = records.map((record) => ({
    ...record,
    invalidReasons: record.invalidReasons.filter((r) => !r.startsWith(IDENTICAL_PREFIXES_REASON)),
  }));
  const crossRun = identicalPrefixReasons(runs, own, kvCacheTokensPerReplica);
  return own.map((record) => {
    const extra = crossRun.get(record.id);
    const invalidReasons = extra ? [...record.invalidReasons, extra] : record.invalidReasons;
    return { ...record, invalidReasons, valid: invalidReasons.length === 0 };
  });
}

// ---- One run ----------------------------------------------------------------------------------

/** Everything the runner observed about one run. */
export interface RunEvidence {
  readonly run: StudyRun;
  readonly readings: readonly ResultFileReading[];
  readonly clients: readonly ClientRecord[];
  readonly resets: readonly ReplicaReset[];
  readonly scrapes: readonly ReplicaScrapes[];
  readonly replicas: readonly ReplicaRecord[];
  /** EPP-family prefix runs over /v1/completions: the front end's evidence that it saw prompts. */
  readonly promptEvidence?: PromptEvidence;
  /** llm-d prefix runs over /v1/completions: whether the precise scorer ever found blocks. */
  readonly scorerEvidence?: PreciseScorerEvidence;
}

/** Every per-run check of docs/facts.md §4.4, in the order the spec lists them. */
export function runReasons(evidence: RunEvidence): string[] {
  const before = new Map(evidence.scrapes.map((s) => [s.replica, s.before]));
  const metrics = metricsReasons(evidence.scrapes);
  return [
    ...resultFileReasons(evidence.readings),
    ...completedReasons(evidence.clients),
    ...jobReasons(evidence.clients),
    ...cacheResetReasons(evidence.resets, before),
    ...metrics,
    // Request counts are only meaningful when every replica's counters were read.
    ...(metrics.length === 0 ? requestReasons(evidence.run, evidence.replicas) : []),
    ...outputLengthReasons(evidence.scrapes),
    ...promptEvidenceReasons(evidence.promptEvidence),
    ...preciseScorerReasons(evidence.scorerEvidence),
  ];
}

// ---- Faults during a run and study-level stops (issue 11) --------------------------------------

/** Every reason of this kind names a replica that restarted while the run's clients were sending. */
export const REPLICA_RESTARTED_REASON = 'restarted during the run';

/**
 * A replica whose pod changed (new uid, or gone) between just before the clients started and
 * just after they finished lost its cache and its counters in the middle of the run: the run
 * measured a cold cache and its counts are incomplete. `uids` map pod name to uid; a pod missing
 * from `before` could not be seen and is not judged.
 */
export function replicaRestartReasons(
  pods: readonly string[],
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): string[] {
  return pods.flatMap((pod) => {
    const was = before.get(pod);
    if (was === undefined) return [];
    const now = after.get(pod);
    if (now === was) return [];
    return [
      `replica ${pod}: ${REPLICA_RESTARTED_REASON} (${now === undefined ? 'its pod was gone after the run' : 'its pod has a new uid'}): its cache and counters started again mid-run`,
    ];
  });
}

/** Whether a record's reasons say a replica restarted during the run (worth one more attempt). */
export function replicaRestarted(record: Pick<RunRecord, 'invalidReasons'>): boolean {
  return record.invalidReasons.some((r) => r.includes(REPLICA_RESTARTED_REASON));
}

/** A study-level check that proves the rest of the study cannot be valid. */
export interface StudyStopVerdict {
  readonly reason: string;
  readonly change: string;
}

/**
 * Identical prefixes: once the distinct-prefix check has failed, every later prefix run is
 * invalid by the same rule, so running them only spends GPU time. Undefined while no run
 * carries that reason or no prefix run remains.
 */
export function identicalPrefixStop(
  records: readonly RunRecord[],
  remaining: readonly StudyRun[],
  clientImage: string,
): StudyStopVerdict | undefined {
  const failed = records.find((r) => r.invalidReasons.some((x) => x.startsWith(IDENTICAL_PREFIXES_REASON)));
  if (!failed || !remaining.some((run) => run.dataset === 'prefix')) return undefined;
  const reason = failed.invalidReasons.find((x) => x.startsWith(IDENTICAL_PREFIXES_REASON)) as string;
  return {
    reason: `${reason}; the ${remaining.filter((r) => r.dataset === 'prefix').length} prefix run(s) left would all be invalid`,
    change: `use a benchmark client whose prefix_repetition generator makes distinct prefixes (benchmark.image is ${clientImage}), then start a new study (lab run --new)`,
  };
}

/**
 * No metrics on any replica: with no `vllm:` series on every replica of the set just before a
 * run, no run can be judged (hit rates, request counts and output lengths all come from there).
 */
export function noMetricsStop(
  before: readonly { readonly pod: string; readonly snapshot?: VllmSnapshot }[],
): StudyStopVerdict | undefined {
  if (before.length === 0 || before.some((s) => !s.snapshot || s.snapshot.vllmSeries > 0)) return undefined;
  return {
    reason: `no replica exposes vLLM metrics: /metrics of ${before.map((s) => s.pod).join(', ')} has no vllm: series`,
    change:
      'start vLLM without --disable-log-stats and make sure the runner scrapes the server port (vllm.* settings, charts/model-servers.ts), then run the study again',
  };
}
