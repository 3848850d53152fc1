import { parseLabConfig } from '../../lib/config/load.ts';
import { type StudyRun, studyPlan } from '../../lib/study/plan.ts';
import {
  type ClientRecord,
  type ClientResult,
  type ReplicaRecord,
  type RunRecord,
  STUDY_SCHEMA_VERSION,
  type StudyRecord,
  summarizeRun,
} from '../../lib/study/results.ts';

/**
 * A realistic study record of the default study (docs/facts.md §4.1, 4.2): the runs come from
 * `studyPlan(defaultLabConfig())`, the numbers are in the spirit of the manual lab's and of what the
 * pinned front ends can see (docs/facts.md §3.3, 3.4): over /v1/chat/completions the cache-aware routers
 * and the EPP read no prompt, so they land near the kube-proxy baseline (the manual lab's "every
 * front end equals kube-proxy"), and only over /v1/completions do they reach toward the ideal
 * partition (`lab plan`: per-connection 40.8%, ideal partition 78.1%). Two runs are invalid: the
 * EPP's ShareGPT control lost its result file, and cache-aware-tuned over /v1/completions
 * completed fewer prompts than asked (with a hit rate above every valid arm, so mixing it in would
 * change the best arm).
 */

/** Tokens each request looks up: 2,048 + 128 + 10 (docs/facts.md §4.1). */
const LOOKED_UP = 2186;

/** What the client reports for one run (per client for the ideal partition). */
interface ClientNumbers {
  readonly tps: number;
  readonly ttft: number;
  readonly p99: number;
  readonly itl: number;
  readonly completed?: number;
}

interface RunNumbers {
  /** Requests and hit rate per replica, replica order. */
  readonly replicas: readonly (readonly [requests: number, hitRate: number])[];
  /** One per benchmark client of the planned run. */
  readonly clients: readonly ClientNumbers[];
  readonly invalid?: 'missing-result' | 'incomplete';
}

const arm = (r0: number, r1: number, c: ClientNumbers, split: [number, number] = [512, 513]): RunNumbers => ({
  replicas: [
    [split[0], r0],
    [split[1], r1],
  ],
  clients: [c],
});

const bound = (hit: number, c: ClientNumbers): RunNumbers => ({
  replicas: [
    [1025, hit],
    [0, 0],
  ],
  clients: [c],
});

export const FIXTURE_NUMBERS: Readonly<Record<string, RunNumbers>> = {
  'bound-p128': bound(0.444, { tps: 12_929, ttft: 215.7, p99: 598.2, itl: 42.82 }),
  'bound-p64': bound(0.776, { tps: 15_078, ttft: 207.9, p99: 541.6, itl: 36.77 }),
  'bound-p16': bound(0.909, { tps: 20_564, ttft: 185.4, p99: 470.3, itl: 27.07 }),
  'bound-p8': bound(0.923, { tps: 24_396, ttft: 231.4, p99: 512.8, itl: 22.09 }),
  partition: {
    replicas: [
      [513, 0.781],
      [513, 0.779],
    ],
    clients: [
      { tps: 11_020, ttft: 148.2, p99: 402.5, itl: 27.9 },
      { tps: 10_880, ttft: 152.6, p99: 418.9, itl: 28.3 },
    ],
  },
  'arm-kube-proxy-prefix': arm(0.421, 0.419, { tps: 19_658, ttft: 214.3, p99: 611.4, itl: 41.9 }),
  'arm-kube-proxy-sharegpt': arm(0.052, 0.049, { tps: 9_412, ttft: 96.4, p99: 288.1, itl: 30.2 }),
  'arm-router-round-robin-prefix': arm(
    0.424,
    0.418,
    { tps: 19_530, ttft: 218.9, p99: 624.7, itl: 42.3 },
    [513, 512],
  ),
  'arm-router-round-robin-sharegpt': arm(0.05, 0.051, { tps: 9_375, ttft: 98.1, p99: 291.6, itl: 30.4 }),
  // Prompt-blind: the routing text is empty, the match 0, so the low-match branch routes on load
  // alone: balanced, at a load-balancing hit rate.
  'arm-router-cache-aware-prefix': arm(
    0.423,
    0.417,
    { tps: 19_702, ttft: 212.8, p99: 603.5, itl: 41.8 },
    [512, 513],
  ),
  'arm-router-cache-aware-sharegpt': arm(0.061, 0.058, { tps: 9_290, ttft: 99.7, p99: 301.2, itl: 30.6 }),
  'arm-router-cache-aware-tuned-prefix': arm(
    0.419,
    0.421,
    { tps: 19_644, ttft: 214.9, p99: 611.0, itl: 42.0 },
    [513, 512],
  ),
  'arm-router-cache-aware-tuned-sharegpt': arm(0.063, 0.06, {
    tps: 9_301,
    ttft: 99.2,
    p99: 298.4,
    itl: 30.5,
  }),
  'arm-router-round-robin-completions-prefix': arm(0.423, 0.42, {
    tps: 19_815,
    ttft: 212.6,
    p99: 605.3,
    itl: 41.7,
  }),
  'arm-router-round-robin-completions-sharegpt': arm(0.051, 0.05, {
    tps: 9_398,
    ttft: 97.3,
    p99: 289.9,
    itl: 30.3,
  }),
  'arm-router-cache-aware-completions-prefix': arm(
    0.655,
    0.641,
    { tps: 22_400, ttft: 176.4, p99: 512.2, itl: 33.8 },
    [520, 505],
  ),
  'arm-router-cache-aware-completions-sharegpt': arm(0.06, 0.057, {
    tps: 9_310,
    ttft: 99.5,
    p99: 299.7,
    itl: 30.6,
  }),
  'arm-router-cache-aware-tuned-completions-prefix': {
    ...arm(0.792, 0.788, { tps: 23_000, ttft: 160.1, p99: 455.0, itl: 30.1, completed: 998 }, [500, 499]),
    invalid: 'incomplete',
  },
  'arm-router-cache-aware-tuned-completions-sharegpt': arm(0.062, 0.06, {
    tps: 9_305,
    ttft: 99.4,
    p99: 300.1,
    itl: 30.5,
  }),
  // Prompt-blind: the prefix scorer gives every pod 0; queue and KV-cache scorers decide.
  'arm-epp-prefix': arm(0.433, 0.426, { tps: 19_725, ttft: 212.8, p99: 603.5, itl: 41.6 }, [509, 516]),
  'arm-epp-sharegpt': {
    ...arm(0.064, 0.061, { tps: 0, ttft: 0, p99: 0, itl: 0 }),
    invalid: 'missing-result',
  },
  'arm-epp-completions-prefix': arm(
    0.741,
    0.733,
    { tps: 21_900, ttft: 168.9, p99: 478.6, itl: 31.6 },
    [509, 516],
  ),
  'arm-epp-completions-sharegpt': arm(0.063, 0.06, { tps: 9_320, ttft: 99.0, p99: 297.3, itl: 30.5 }),
  'sweep-c4-kube-proxy': arm(0.436, 0.431, { tps: 3_910, ttft: 92.4, p99: 160.3, itl: 9.8 }),
  'sweep-c4-router-cache-aware': arm(
    0.438,
    0.429,
    { tps: 3_905, ttft: 93.0, p99: 161.2, itl: 9.8 },
    [528, 497],
  ),
  'sweep-c8-kube-proxy': arm(0.43, 0.427, { tps: 6_880, ttft: 118.7, p99: 230.4, itl: 13.6 }),
  'sweep-c8-router-cache-aware': arm(
    0.432,
    0.425,
    { tps: 6_860, ttft: 119.3, p99: 232.0, itl: 13.7 },
    [530, 495],
  ),
};

export const MISSING_RESULT_REASON =
  'result file arm-epp-sharegpt.json is missing or empty (the Job failed: status.failed = 1)';
export const INCOMPLETE_REASONS = [
  'completed 998 of 1,024 prompts',
  'requests per replica add up to 999, expected 1,025 (1,024 prompts + 1 warm-up)',
];

function clientResult(c: ClientNumbers, prompts: number): ClientResult {
  const completed = c.completed ?? prompts;
  const duration = (completed * (2176 + 128)) / Math.max(c.tps, 1);
  return {
    completed,
    duration,
    total_input_tokens: completed * 2176,
    total_output_tokens: completed * 128,
    request_throughput: completed / duration,
    output_throughput: (c.tps * 128) / (2176 + 128),
    total_token_throughput: c.tps,
    mean_ttft_ms: c.ttft,
    median_ttft_ms: c.ttft * 0.93,
    p99_ttft_ms: c.p99,
    mean_tpot_ms: c.itl * 1.01,
    mean_itl_ms: c.itl,
    p99_itl_ms: c.itl * 2.4,
    mean_e2el_ms: c.ttft + 127 * c.itl,
  };
}

function replicaRecord(replica: number, requests: number, hitRate: number): ReplicaRecord {
  const queriedTokens = requests * LOOKED_UP;
  const hitTokens = Math.round(queriedTokens * hitRate);
  return {
    replica,
    pod: `qwen3-${replica}`,
    requests,
    queriedTokens,
    hitTokens,
    hitRate: queriedTokens === 0 ? null : hitTokens / queriedTokens,
    vllmSeries: 412,
  };
}

/**
 * Numbers of a repeat: the first run's, moved by a small deterministic step per repeat (hit rates by
 * 0.6 points, throughput by 1.5%, TTFT by 2%), as repeated runs of one arm differ in practice.
 */
function repeatNumbers(n: RunNumbers, repeat: number): RunNumbers {
  const step = [0, 1, -1, 2, -2][repeat - 1] ?? 0;
  return {
    ...n,
    replicas: n.replicas.map(([requests, hit]) => [requests, hit === 0 ? 0 : hit + step * 0.006] as const),
    clients: n.clients.map((c) => ({
      ...c,
      tps: c.tps * (1 + step * 0.015),
      ttft: c.ttft * (1 + step * 0.02),
    })),
  };
}

function runRecord(run: StudyRun, index: number): RunRecord {
  const base = FIXTURE_NUMBERS[run.id.replace(/-rep\d+$/, '')];
  if (!base) throw new Error(`fixture has no numbers for ${run.id}`);
  const n = repeatNumbers(base, run.repeat ?? 1);
  const clients: ClientRecord[] = run.benchmarks.map((b, i) => {
    const missing = n.invalid === 'missing-result';
    return {
      benchmarkId: b.id,
      resultFile: b.resultFile,
      prompts: b.prompts,
      job: missing ? 'failed' : 'succeeded',
      ...(missing ? {} : { result: clientResult(n.clients[i], b.prompts) }),
    };
  });
  const replicas = n.replicas.map(([requests, hit], i) => replicaRecord(i, requests, hit));
  const summary = summarizeRun(clients, replicas);
  const invalidReasons =
    n.invalid === 'missing-result'
      ? [MISSING_RESULT_REASON]
      : n.invalid === 'incomplete'
        ? INCOMPLETE_REASONS
        : [];
  const start = Date.parse('2025-11-03T09:12:00Z') + index * 4 * 60_000;
  return {
    id: run.id,
    group: run.group,
    title: run.title,
    ...(run.arm ? { arm: run.arm } : {}),
    dataset: run.dataset,
    startedAt: new Date(start).toISOString(),
    finishedAt: new Date(start + 3 * 60_000 + 20_000).toISOString(),
    reset: 'endpoint',
    clients,
    replicas,
    ...(summary ? { summary } : {}),
    ...(run.upperBound === undefined ? {} : { upperBound: run.upperBound }),
    valid: invalidReasons.length === 0,
    invalidReasons,
  };
}

/**
 * The default study with every run recorded, two of them invalid (with `repeats`, every repeat of
 * those two is invalid too).
 */
export function fixtureStudy(options: { repeats?: number } = {}): StudyRecord {
  const config = parseLabConfig({ study: { repeats: options.repeats ?? 1 } });
  const runs = studyPlan(config).runs.map(runRecord);
  return {
    schemaVersion: STUDY_SCHEMA_VERSION,
    metadata: {
      startedAt: '2025-11-03T09:10:41Z',
      finishedAt: '2025-11-03T10:55:02Z',
      config,
      versions: {
        vllm: 'vllm/vllm-openai:v0.11.0',
        'vllm-router': '0.1.15',
        gaie: 'v1.0.1',
        envoy: 'envoyproxy/envoy:v1.35.3',
        k3s: 'v1.33.5+k3s1',
      },
      instanceType: 'g6.12xlarge',
      availabilityZone: 'us-east-1b',
      gpuUuids: {
        'qwen3-0': 'GPU-3f1c2a9e-7b44-4d0e-9a51-0c6e2d8b1f17',
        'qwen3-1': 'GPU-a82d5e10-4c3b-47f2-b6d9-91e0f4c7a325',
      },
      gpuTopology: 'GPU0\tX\tPHB\nGPU1\tPHB\tX',
      kvCacheTokens: 163_472,
      k3sVersion: 'v1.33.5+k3s1',
    },
    runs,
  };
}
