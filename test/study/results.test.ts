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
  it('adds throughput of concurrent clients, weights means by completed requests and keeps the worst p99', () => {
    const summary = summarizeRun(
      [
        client(
          clientResult({
            completed: 512,
            total_token_throughput: 6000,
            output_throughput: 400,
            mean_ttft_ms: 100,
            mean_itl_ms: 20,
            p99_ttft_ms: 300,
          }),
        ),
        client(
          clientResult({
            completed: 256,
            total_token_throughput: 5000,
            output_throughput: 300,
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
      totalTokenThroughput: 11_000,
      outputThroughput: 700,
      meanTtftMs: (512 * 100 + 256 * 400) / 768,
      meanItlMs: (512 * 20 + 256 * 50) / 768,
      p99TtftMs: 900,
      hitRate: 0.7,
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
