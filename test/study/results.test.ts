import { describe, expect, it } from 'vitest';
import {
  CLIENT_RESULT_KEYS,
  type ClientRecord,
  type ClientResult,
  parseClientResult,
  type ReplicaRecord,
  summarizeRun,
} from '../../lib/study/results.ts';

function clientResult(overrides: Partial<ClientResult> = {}): ClientResult {
  const base = Object.fromEntries(CLIENT_RESULT_KEYS.map((key) => [key, 1])) as Record<string, number>;
  return { ...base, ...overrides } as ClientResult;
}

function client(result: ClientResult | undefined, prompts = 512): ClientRecord {
  return { benchmarkId: 'b', resultFile: 'b.json', prompts, job: 'succeeded', ...(result ? { result } : {}) };
}

function replica(replicaIndex: number, queriedTokens: number, hitTokens: number): ReplicaRecord {
  return {
    replica: replicaIndex,
    pod: `qwen3-${replicaIndex}`,
    requests: 513,
    queriedTokens,
    hitTokens,
    hitRate: queriedTokens ? hitTokens / queriedTokens : null,
    vllmSeries: 330,
  };
}

describe('summarizeRun', () => {
  it('combines concurrent clients: tokens over the longest duration, TTFT per request, ITL per output token, worst p99', () => {
    const summary = summarizeRun(
      [
        client(
          clientResult({
            completed: 512,
            duration: 100,
            total_input_tokens: 500_000,
            total_output_tokens: 60_000,
            total_token_throughput: 5600,
            output_throughput: 600,
            mean_ttft_ms: 100,
            mean_itl_ms: 20,
            p99_ttft_ms: 300,
          }),
        ),
        client(
          clientResult({
            completed: 256,
            duration: 80,
            total_input_tokens: 250_000,
            total_output_tokens: 20_000,
            total_token_throughput: 3375,
            output_throughput: 250,
            mean_ttft_ms: 400,
            mean_itl_ms: 50,
            p99_ttft_ms: 900,
          }),
        ),
      ],
      [replica(0, 1000, 800), replica(1, 1000, 600)],
    );
    expect(summary).toEqual({
      completed: 768,
      failed: 256,
      // (750,000 + 80,000) / 100 s, not 5600 + 3375 = 8975
      totalTokenThroughput: 8300,
      // 80,000 / 100 s, not 600 + 250 = 850
      outputThroughput: 800,
      meanTtftMs: (512 * 100 + 256 * 400) / 768,
      meanItlMs: (60_000 * 20 + 20_000 * 50) / 80_000,
      p99TtftMs: 900,
      hitRate: 0.7,
      // 768 completed / 100 s; median TTFT and TPOT weighted like the means (both clients report 1 here).
      requestThroughput: 7.68,
      medianTtftMs: 1,
      meanTpotMs: 1,
    });
  });

  it('keeps a single client exactly its own figures', () => {
    const own = clientResult({
      completed: 1024,
      duration: 97.3,
      total_input_tokens: 2_228_224,
      total_output_tokens: 131_072,
      total_token_throughput: 12_929,
      output_throughput: 640,
      mean_ttft_ms: 215.7,
      mean_itl_ms: 42.82,
      p99_ttft_ms: 812.5,
      request_throughput: 10.52,
      median_ttft_ms: 199.1,
      mean_tpot_ms: 43.1,
    });
    expect(summarizeRun([client(own, 1024)], [replica(0, 1000, 444)])).toEqual({
      completed: 1024,
      failed: 0,
      totalTokenThroughput: 12_929,
      outputThroughput: 640,
      meanTtftMs: 215.7,
      meanItlMs: 42.82,
      p99TtftMs: 812.5,
      hitRate: 0.444,
      requestThroughput: 10.52,
      medianTtftMs: 199.1,
      meanTpotMs: 43.1,
    });
  });

  it('has no summary when a client has no result, and no hit rate without queries', () => {
    expect(summarizeRun([client(clientResult()), client(undefined)], [])).toBeUndefined();
    expect(summarizeRun([], [])).toBeUndefined();
    expect(summarizeRun([client(clientResult({ completed: 512 }))], [replica(0, 0, 0)])?.hitRate).toBeNull();
  });
});

describe('parseClientResult', () => {
  it('keeps exactly the keys the study uses', () => {
    const saved = { ...clientResult({ completed: 1024 }), backend: 'openai-chat', ttfts: [1, 2] };
    expect(parseClientResult(saved)).toEqual(clientResult({ completed: 1024 }));
  });

  it('rejects a result with a key missing or not a number', () => {
    const { completed: _, ...withoutCompleted } = clientResult();
    expect(parseClientResult(withoutCompleted)).toBeUndefined();
    expect(parseClientResult({ ...clientResult(), p99_ttft_ms: 'n/a' })).toBeUndefined();
    expect(parseClientResult(null)).toBeUndefined();
    expect(parseClientResult([1, 2])).toBeUndefined();
  });
});
