import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { type VllmSnapshot, vllmSnapshot } from '../../lib/study/metrics.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import {
  CLIENT_RESULT_KEYS,
  type ClientRecord,
  type ClientResult,
  type ReplicaRecord,
  type RunRecord,
} from '../../lib/study/results.ts';
import {
  cacheResetReasons,
  completedReasons,
  DISTINCT_PREFIX_MIN_GAP,
  expectedRequestsPerReplica,
  IDENTICAL_PREFIXES_REASON,
  identicalPrefixReasons,
  jobOutcome,
  jobReasons,
  metricsReasons,
  outputLengthReasons,
  promptEvidence,
  promptEvidenceReasons,
  promptEvidenceSource,
  readResultFile,
  requestReasons,
  resetRecords,
  resultFileReasons,
  runReasons,
  withStudyChecks,
} from '../../lib/study/validity.ts';

const config = defaultLabConfig();
const plan = studyPlan(config);
const KV = config.vllm.kvCacheTokensPerReplica;

function resultJson(overrides: Partial<ClientResult> = {}): ClientResult {
  const base = Object.fromEntries(CLIENT_RESULT_KEYS.map((key) => [key, 10])) as Record<string, number>;
  return { ...base, completed: 1024, ...overrides } as ClientResult;
}

function client(overrides: Partial<ClientRecord> = {}): ClientRecord {
  return {
    benchmarkId: 'arm-epp-prefix',
    resultFile: 'arm-epp-prefix.json',
    prompts: 1024,
    job: 'succeeded',
    result: resultJson(),
    ...overrides,
  };
}

function replica(index: number, requests: number): ReplicaRecord {
  return {
    replica: index,
    pod: `qwen3-${index}`,
    requests,
    queriedTokens: requests * 2186,
    hitTokens: requests * 1000,
    hitRate: 1000 / 2186,
    vllmSeries: 330,
  };
}

function snapshot(requests: number, queries: number, hits: number): VllmSnapshot {
  return vllmSnapshot(
    [
      `vllm:request_success_total{finished_reason="length",model_name="qwen3"} ${requests}`,
      `vllm:prefix_cache_queries_total{model_name="qwen3"} ${queries}`,
      `vllm:prefix_cache_hits_total{model_name="qwen3"} ${hits}`,
    ].join('\n'),
  );
}

describe('result file', () => {
  const reading = (text: string | undefined) => ({
    benchmarkId: 'bound-p8',
    resultFile: 'bound-p8.json',
    text,
  });

  it('accepts a saved JSON with every used key', () => {
    const read = readResultFile(reading(JSON.stringify({ ...resultJson(), extra: 'ignored' })));
    expect(read).toEqual({ result: resultJson() });
    expect(resultFileReasons([reading(JSON.stringify(resultJson()))])).toEqual([]);
  });

  it('says missing, empty, unparseable and incomplete apart', () => {
    expect(resultFileReasons([reading(undefined)])).toEqual([
      'client bound-p8: result file bound-p8.json is missing',
    ]);
    expect(resultFileReasons([reading('  \n')])).toEqual([
      'client bound-p8: result file bound-p8.json is empty',
    ]);
    expect(resultFileReasons([reading('{"completed": 10')])[0]).toMatch(
      /^client bound-p8: result file bound-p8\.json is not valid JSON \(/,
    );
    const { mean_itl_ms: _dropped, ...partial } = resultJson();
    expect(resultFileReasons([reading(JSON.stringify({ ...partial, p99_ttft_ms: 'n/a' }))])).toEqual([
      'client bound-p8: result file bound-p8.json lacks numeric p99_ttft_ms, mean_itl_ms',
    ]);
  });
});

describe('completed equals the prompt count', () => {
  it('passes when every client completed every prompt', () => {
    expect(completedReasons([client()])).toEqual([]);
  });

  it('names the client that fell short, per client', () => {
    const clients = [
      client({ benchmarkId: 'partition-r0', prompts: 512, result: resultJson({ completed: 512 }) }),
      client({ benchmarkId: 'partition-r1', prompts: 512, result: resultJson({ completed: 500 }) }),
    ];
    expect(completedReasons(clients)).toEqual([
      'client partition-r1: completed 500 of 512 prompts (12 failed)',
    ]);
  });

  it('leaves a client without a result to the result-file check', () => {
    expect(completedReasons([client({ result: undefined })])).toEqual([]);
  });
});

describe('Job outcome', () => {
  it('is judged by status.succeeded and status.failed, not by conditions', () => {
    expect(jobOutcome({ succeeded: 1 })).toBe('succeeded');
    expect(jobOutcome({ failed: 1 })).toBe('failed');
    expect(jobOutcome({ active: 1 })).toBeUndefined();
    expect(jobOutcome({})).toBeUndefined();
    expect(jobOutcome(undefined)).toBeUndefined();
    // A status whose first condition is not the terminal one still reads as failed.
    const status = {
      failed: 1,
      conditions: [{ type: 'FailureTarget', status: 'True' }, { type: 'Failed' }],
    };
    expect(jobOutcome(status)).toBe('failed');
  });

  it('makes a failed or timed-out Job a reason', () => {
    expect(jobReasons([client()])).toEqual([]);
    expect(jobReasons([client({ job: 'failed' }), client({ benchmarkId: 'x', job: 'timed-out' })])).toEqual([
      'client arm-epp-prefix: Job failed (status.failed > 0)',
      'client x: Job did not finish before the timeout (neither status.succeeded nor status.failed)',
    ]);
  });
});

describe('caches reset', () => {
  const before = new Map([
    [0, snapshot(0, 0, 0)],
    [1, snapshot(900, 5000, 200)],
  ]);

  it("passes when vLLM's log confirmed the reset on every replica", () => {
    const resets = [0, 1].map((replica) => ({
      replica,
      pod: `qwen3-${replica}`,
      method: 'endpoint' as const,
      status: 200,
      verifiedBy: 'log-confirmed' as const,
      detail: 'confirmed',
    }));
    expect(cacheResetReasons(resets, before)).toEqual([]);
    expect(resetRecords(resets)).toEqual([
      { replica: 0, pod: 'qwen3-0', verifiedBy: 'log-confirmed', detail: 'confirmed' },
      { replica: 1, pod: 'qwen3-1', verifiedBy: 'log-confirmed', detail: 'confirmed' },
    ]);
  });

  it('fails a reset nothing could verify, naming why', () => {
    const reasons = cacheResetReasons(
      [
        {
          replica: 0,
          pod: 'qwen3-0',
          method: 'pod-restart',
          status: 200,
          verifiedBy: 'unverified',
          detail: 'vLLM refused the reset; restarting the pod failed: not Ready within 30m',
        },
      ],
      before,
    );
    expect(reasons).toEqual([
      'replica qwen3-0: prefix cache reset not verified: vLLM refused the reset; restarting the pod failed: not Ready within 30m',
    ]);
  });

  it('accepts a pod restart only when the fresh queries counter is 0 before the run', () => {
    const resets = [0, 1].map((replica) => ({
      replica,
      pod: `qwen3-${replica}`,
      method: 'pod-restart' as const,
      status: 404,
      verifiedBy: 'pod-restart' as const,
      detail: 'replaced',
    }));
    expect(cacheResetReasons(resets, before)).toEqual([
      'replica qwen3-1: restarted to reset its cache, but its prefix-cache queries counter was 5000 before the run, not 0',
    ]);
  });
});

describe('metrics exist', () => {
  it('passes with vllm series and counters on both sides', () => {
    expect(
      metricsReasons([{ replica: 0, pod: 'qwen3-0', before: snapshot(1, 10, 1), after: snapshot(2, 20, 2) }]),
    ).toEqual([]);
  });

  it('blames --disable-log-stats or a wrong port when no vllm series exist', () => {
    const empty = vllmSnapshot('process_cpu_seconds_total 1');
    expect(
      metricsReasons([{ replica: 1, pod: 'qwen3-1', before: snapshot(1, 10, 1), after: empty }]),
    ).toEqual([
      'replica qwen3-1: /metrics has no vllm: series after the run (vLLM started with --disable-log-stats, or the scrape hit the wrong port)',
    ]);
  });

  it('reports failed scrapes, missing counters and counters going backwards', () => {
    const noHits = vllmSnapshot('vllm:request_success_total 1\nvllm:prefix_cache_queries_total 3');
    expect(
      metricsReasons([
        { replica: 0, pod: 'qwen3-0', beforeError: 'HTTP 503', after: noHits },
        { replica: 1, pod: 'qwen3-1', before: snapshot(100, 1000, 10), after: snapshot(5, 50, 1) },
      ]),
    ).toEqual([
      'replica qwen3-0: /metrics could not be read before the run (HTTP 503)',
      'replica qwen3-0: /metrics lacks vllm:prefix_cache_hits_total after the run',
      'replica qwen3-1: a counter went backwards during the run (the replica restarted)',
    ]);
  });
});

describe('requests per replica', () => {
  it('knows the per-replica split of runs aimed at replicas, not of front-end runs', () => {
    expect(expectedRequestsPerReplica(findRun(plan, 'bound-p128'), 2)).toEqual([1025, 0]);
    expect(expectedRequestsPerReplica(findRun(plan, 'partition'), 2)).toEqual([513, 513]);
    expect(expectedRequestsPerReplica(findRun(plan, 'arm-kube-proxy-prefix'), 2)).toBeUndefined();
  });

  it('passes when the replicas add up to prompts plus one warm-up per client', () => {
    expect(requestReasons(findRun(plan, 'arm-epp-prefix'), [replica(0, 600), replica(1, 425)])).toEqual([]);
    expect(requestReasons(findRun(plan, 'partition'), [replica(0, 513), replica(1, 513)])).toEqual([]);
  });

  it('fails a total that does not add up', () => {
    expect(requestReasons(findRun(plan, 'arm-epp-prefix'), [replica(0, 600), replica(1, 424)])).toEqual([
      'replicas served 1024 requests (qwen3-0 600, qwen3-1 424), expected 1025 (prompts plus one warm-up per client)',
    ]);
  });

  it('fails a direct run whose requests reached the wrong replica', () => {
    expect(requestReasons(findRun(plan, 'bound-p16'), [replica(0, 1000), replica(1, 25)])).toEqual([
      "replica qwen3-0 served 1000 requests, expected 1025 for this run's target",
      "replica qwen3-1 served 25 requests, expected 0 for this run's target",
    ]);
    // A bound run on replica 1 is judged on that replica alone.
    expect(requestReasons(findRun(plan, 'bound-p8'), [replica(1, 1025)])).toEqual([]);
    expect(requestReasons(findRun(plan, 'bound-p8'), [replica(1, 1000)])).toEqual([
      'replicas served 1000 requests (qwen3-1 1000), expected 1025 (prompts plus one warm-up per client)',
      "replica qwen3-1 served 1000 requests, expected 1025 for this run's target",
    ]);
  });
});

function record(id: string, hitRate: number | null, dataset: 'prefix' | 'sharegpt' = 'prefix'): RunRecord {
  const run = findRun(plan, id);
  return {
    id,
    group: run.group,
    title: run.title,
    dataset,
    startedAt: '2025-10-14T10:00:00.000Z',
    finishedAt: '2025-10-14T10:02:00.000Z',
    reset: 'endpoint',
    clients: [],
    replicas: [],
    summary: {
      completed: 1024,
      failed: 0,
      totalTokenThroughput: 1,
      outputThroughput: 1,
      meanTtftMs: 1,
      meanItlMs: 1,
      p99TtftMs: 1,
      hitRate,
    },
    valid: true,
    invalidReasons: [],
  };
}

describe('outputs run to their length (--ignore-eos)', () => {
  const withReasons = (stop: number, length: number) =>
    vllmSnapshot(
      [
        `vllm:request_success_total{finished_reason="stop",model_name="qwen3"} ${stop}`,
        `vllm:request_success_total{finished_reason="length",model_name="qwen3"} ${length}`,
      ].join('\n'),
    );
  const scrape = (replica: number, before: VllmSnapshot, after: VllmSnapshot) => ({
    replica,
    pod: `qwen3-${replica}`,
    before,
    after,
  });

  it('passes when every request ended at its output length', () => {
    expect(
      outputLengthReasons([
        scrape(0, withReasons(3, 100), withReasons(3, 613)),
        scrape(1, withReasons(0, 0), withReasons(0, 512)),
      ]),
    ).toEqual([]);
  });

  it('fails a run in which requests stopped early, counting them over the replicas', () => {
    expect(
      outputLengthReasons([
        scrape(0, withReasons(0, 0), withReasons(7, 506)),
        scrape(1, withReasons(2, 0), withReasons(5, 510)),
      ]),
    ).toEqual([
      '10 request(s) finished with reason "stop" before their output length: --ignore-eos was not in effect, so the run did less work than the others',
    ]);
  });

  it('leaves a missing scrape to the metrics check', () => {
    expect(outputLengthReasons([{ replica: 0, pod: 'qwen3-0', after: withReasons(9, 0) }])).toEqual([]);
  });
});

describe('distinct prefixes (across runs)', () => {
  it('passes when 128 prefixes hit clearly below 8 prefixes (the calibration numbers)', () => {
    const records = [record('bound-p128', 0.444), record('bound-p64', 0.776), record('bound-p8', 0.923)];
    expect(identicalPrefixReasons(plan.runs, records, KV).size).toBe(0);
  });

  it('marks every prefix run invalid when 128 prefixes hit as much as 8', () => {
    const records = [
      record('bound-p128', 0.93),
      record('bound-p8', 0.923),
      record('arm-epp-prefix', 0.93),
      record('arm-epp-sharegpt', 0.1, 'sharegpt'),
    ];
    const reasons = identicalPrefixReasons(plan.runs, records, KV);
    expect([...reasons.keys()]).toEqual(['bound-p128', 'bound-p8', 'arm-epp-prefix']);
    expect(reasons.get('bound-p8')).toBe(
      `${IDENTICAL_PREFIXES_REASON}: bound-p128 hit 93.0%, not at least 5 points below bound-p8 (92.3%)`,
    );
  });

  it('draws the line at 5 points', () => {
    expect(DISTINCT_PREFIX_MIN_GAP).toBe(0.05);
    const at = (p128: number) =>
      identicalPrefixReasons(plan.runs, [record('bound-p128', p128), record('bound-p8', 0.9)], KV).size;
    expect(at(0.85)).toBe(0);
    expect(at(0.8501)).toBe(2);
  });

  it('waits until both ends of the sweep are recorded', () => {
    expect(identicalPrefixReasons(plan.runs, [record('bound-p128', 0.93)], KV).size).toBe(0);
    expect(
      identicalPrefixReasons(plan.runs, [record('bound-p128', null), record('bound-p8', 0.9)], KV).size,
    ).toBe(0);
  });

  it('judges only from bound runs that are otherwise valid', () => {
    const invalid = (r: RunRecord, reason: string): RunRecord => ({
      ...r,
      valid: false,
      invalidReasons: [reason],
    });
    const broken = [record('bound-p128', 0.93), record('bound-p8', 0.923), record('arm-epp-prefix', 0.93)];
    expect(identicalPrefixReasons(plan.runs, broken, KV).size).toBe(3);
    // Either needed bound run invalid for another reason: nothing is marked on that basis.
    for (const i of [0, 1]) {
      const records = broken.map((r, j) =>
        j === i ? invalid(r, 'client bound: Job did not finish before the timeout') : r,
      );
      expect(identicalPrefixReasons(plan.runs, records, KV).size, records[i].id).toBe(0);
      expect(
        withStudyChecks(plan.runs, records, KV).map((r) => r.invalidReasons.length),
        records[i].id,
      ).toEqual(records.map((r) => r.invalidReasons.length));
    }
    // The check's own earlier verdict does not count against a bound run.
    const judgedBefore = broken.map((r) => invalid(r, `${IDENTICAL_PREFIXES_REASON}: earlier verdict`));
    expect(identicalPrefixReasons(plan.runs, judgedBefore, KV).size).toBe(3);
    // An invalid bound run in between (64 prefixes) is not needed.
    const middle = invalid(record('bound-p64', 0.93), 'cache of qwen3-0 was not reset');
    expect(identicalPrefixReasons(plan.runs, [...broken, middle], KV).size).toBe(4);
  });

  it('does not apply when both ends of the sweep should hit alike (everything fits, bounds close)', () => {
    const small = studyPlan({ ...config, study: { ...config.study, boundSweepPrefixes: [16, 8] } });
    const records = [record('bound-p16', 0.909), record('bound-p8', 0.923)];
    expect(identicalPrefixReasons(small.runs, records, KV).size).toBe(0);
  });

  it('withStudyChecks re-evaluates the verdict without duplicating it', () => {
    const broken = [record('bound-p128', 0.93), record('bound-p8', 0.923)];
    const once = withStudyChecks(plan.runs, broken, KV);
    const twice = withStudyChecks(plan.runs, once, KV);
    expect(twice[0].valid).toBe(false);
    expect(twice[0].invalidReasons).toHaveLength(1);
    const fixed = withStudyChecks(
      plan.runs,
      [{ ...twice[0], summary: record('bound-p128', 0.44).summary }, twice[1]],
      KV,
    );
    expect(fixed.map((r) => r.valid)).toEqual([true, true]);
    expect(fixed[0].invalidReasons).toEqual([]);
  });
});

describe('runReasons', () => {
  const run = findRun(plan, 'arm-epp-prefix');
  const scrapes = [
    { replica: 0, pod: 'qwen3-0', before: snapshot(0, 0, 0), after: snapshot(600, 600 * 2186, 600 * 1000) },
    { replica: 1, pod: 'qwen3-1', before: snapshot(0, 0, 0), after: snapshot(425, 425 * 2186, 425 * 1000) },
  ];
  const resets = [0, 1].map((i) => ({
    replica: i,
    pod: `qwen3-${i}`,
    method: 'endpoint' as const,
    status: 200,
    verifiedBy: 'log-confirmed' as const,
    detail: 'confirmed',
  }));
  const base = {
    run,
    readings: [{ benchmarkId: run.id, resultFile: `${run.id}.json`, text: JSON.stringify(resultJson()) }],
    clients: [client()],
    resets,
    scrapes,
    replicas: [replica(0, 600), replica(1, 425)],
  };

  it('is empty for a good run', () => {
    expect(runReasons(base)).toEqual([]);
  });

  it('collects every failed check', () => {
    const reasons = runReasons({
      ...base,
      readings: [{ ...base.readings[0], text: undefined }],
      clients: [client({ job: 'failed', result: undefined })],
      replicas: [replica(0, 600), replica(1, 0)],
    });
    expect(reasons).toEqual([
      'client arm-epp-prefix: result file arm-epp-prefix.json is missing',
      'client arm-epp-prefix: Job failed (status.failed > 0)',
      'replicas served 600 requests (qwen3-0 600, qwen3-1 0), expected 1025 (prompts plus one warm-up per client)',
    ]);
  });

  it('skips the request count when metrics are missing (it would only repeat that)', () => {
    const empty = vllmSnapshot('');
    const reasons = runReasons({ ...base, scrapes: [scrapes[0], { ...scrapes[1], after: empty }] });
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/qwen3-1: \/metrics has no vllm: series after the run/);
  });
});

describe('prompt evidence of EPP-family front ends', () => {
  const gaie = 'GAIE v1.0.1 EPP';

  it('is required of prefix runs over /v1/completions through an EPP, the AI Gateway or llm-d only', () => {
    expect(promptEvidenceSource('epp', 'completions', 'prefix')).toBe('gaie-prefix-indexer');
    expect(promptEvidenceSource('ai-gateway', 'completions', 'prefix')).toBe('gaie-prefix-indexer');
    expect(promptEvidenceSource('llmd', 'completions', 'prefix')).toBe('llmd-kv-index');
    expect(promptEvidenceSource('epp', 'chat', 'prefix')).toBeUndefined();
    expect(promptEvidenceSource('epp', 'completions', 'sharegpt')).toBeUndefined();
    expect(promptEvidenceSource('router', 'completions', 'prefix')).toBeUndefined();
    expect(promptEvidenceSource('service', 'chat', 'prefix')).toBeUndefined();
  });

  it('sees prompts when the prefix indexer has entries', () => {
    const evidence = promptEvidence('gaie-prefix-indexer', gaie, { snapshot: { prefixIndexerSize: 4096 } });
    expect(evidence).toEqual({
      status: 'seen',
      component: gaie,
      metrics: { inference_extension_prefix_indexer_size: 4096 },
      detail: 'inference_extension_prefix_indexer_size is 4096 after the run',
    });
    expect(promptEvidenceReasons(evidence)).toEqual([]);
  });

  it('makes the run invalid when the indexer is empty, absent, or the metrics cannot be read', () => {
    const empty = promptEvidence('gaie-prefix-indexer', gaie, { snapshot: { prefixIndexerSize: 0 } });
    expect(promptEvidenceReasons(empty)).toEqual([
      'front end did not see the prompts (GAIE v1.0.1 EPP): inference_extension_prefix_indexer_size is 0 after the run: the EPP indexed no prompt, so its prefix-cache-scorer scored every pod 0',
    ]);
    const absent = promptEvidence('gaie-prefix-indexer', gaie, { snapshot: {} });
    expect(absent.status).toBe('not-seen');
    expect(absent.detail).toMatch(/has no inference_extension_prefix_indexer_size/);
    const unread = promptEvidence('gaie-prefix-indexer', gaie, {
      error: 'GET http://x/metrics answered HTTP 403',
    });
    expect(promptEvidenceReasons(unread)).toEqual([
      "front end did not see the prompts (GAIE v1.0.1 EPP): the EPP's /metrics could not be read (GET http://x/metrics answered HTTP 403)",
    ]);
  });

  it('judges llm-d by its KV-block index lookups and admissions, and says when they are not exported', () => {
    const llmd = 'llm-d inference scheduler v0.3.2';
    const seen = promptEvidence('llmd-kv-index', llmd, {
      snapshot: { kvIndexLookups: 1025, kvIndexAdmissions: 18432 },
    });
    expect(seen.status).toBe('seen');
    expect(seen.metrics).toEqual({
      kvcache_index_lookup_requests_total: 1025,
      kvcache_index_admissions_total: 18432,
    });
    const blind = promptEvidence('llmd-kv-index', llmd, {
      snapshot: { kvIndexLookups: 0, kvIndexAdmissions: 0 },
    });
    expect(promptEvidenceReasons(blind)).toEqual([
      'front end did not see the prompts (llm-d inference scheduler v0.3.2): kvcache_index_lookup_requests_total is 0 (no prompt was tokenized into block keys); kvcache_index_admissions_total is 0 (no KV event from the replicas reached the index) after the run',
    ]);
    const unavailable = promptEvidence('llmd-kv-index', llmd, { snapshot: { prefixIndexerSize: 0 } });
    expect(unavailable.status).toBe('unavailable');
    expect(unavailable.detail).toMatch(/enableMetrics: true/);
    expect(promptEvidenceReasons(unavailable)).toEqual([]);
  });

  it('is one of the run reasons', () => {
    const run = findRun(plan, 'arm-epp-prefix');
    const reasons = runReasons({
      run,
      readings: [],
      clients: [],
      resets: [],
      scrapes: [],
      replicas: [],
      promptEvidence: promptEvidence('gaie-prefix-indexer', gaie, { snapshot: { prefixIndexerSize: 0 } }),
    });
    expect(reasons.some((r) => r.startsWith('front end did not see the prompts'))).toBe(true);
  });
});
