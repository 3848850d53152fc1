import { describe, expect, it } from 'vitest';
import {
  counterDeltas,
  eppSnapshot,
  kvCacheTokensFromLog,
  parsePrometheusText,
  replicaIdle,
  resetLogCounts,
  vllmSnapshot,
} from '../../lib/study/metrics.ts';

/** A replica's /metrics in the shape vLLM 0.11 writes it (prometheus_client text format). */
const METRICS = `# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen3"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen3"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen3"} 0.4375
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen3"} 2.240650e+06
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="qwen3"} 994848.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="qwen3"} 12.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="qwen3"} 1013.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="qwen3"} 0.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="qwen3"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="qwen3"} 1025.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="qwen3"} 1025.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="qwen3"} 4321.5
`;

describe('parsePrometheusText', () => {
  it('reads names, labels and values, skipping comments and blank lines', () => {
    const samples = parsePrometheusText(METRICS);
    expect(samples).toHaveLength(13);
    expect(samples[0]).toEqual({
      name: 'python_gc_objects_collected_total',
      labels: { generation: '0' },
      value: 12345,
    });
    expect(samples.find((s) => s.name === 'vllm:prefix_cache_queries_total')?.value).toBe(2_240_650);
    expect(samples.find((s) => s.labels.le === '+Inf')?.value).toBe(1025);
  });

  it('handles escaped label values, special values, timestamps and samples without labels', () => {
    const samples = parsePrometheusText(
      [
        'plain 3',
        'with_ts{a="x"} 1.5 1712345678000',
        'escaped{path="C:\\\\dir",msg="say \\"hi\\", then\\nbye",comma="a,b}"} 2',
        'nan_value NaN',
        'up{} +Inf',
        'down -Inf',
        'spaced{ a = "1" , b="2", } 7',
      ].join('\n'),
    );
    expect(samples.map((s) => s.value)).toEqual([
      3,
      1.5,
      2,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      7,
    ]);
    expect(samples[2].labels).toEqual({ path: 'C:\\dir', msg: 'say "hi", then\nbye', comma: 'a,b}' });
    expect(samples[6].labels).toEqual({ a: '1', b: '2' });
  });

  it('names the line it cannot parse', () => {
    expect(() => parsePrometheusText('ok 1\nbroken{a="1" 2')).toThrow(/metrics line 2 .*broken/);
    expect(() => parsePrometheusText('novalue')).toThrow(/line 1.*expected a value/);
    expect(() => parsePrometheusText('x abc')).toThrow(/"abc" is not a number/);
  });
});

describe('vllmSnapshot', () => {
  it('reads the study counters, summing over finished reasons and label sets', () => {
    const snapshot = vllmSnapshot(METRICS);
    expect(snapshot).toEqual({
      vllmSeries: 12,
      prefixCacheQueries: 2_240_650,
      prefixCacheHits: 994_848,
      requestSuccess: 1025,
      requestSuccessByReason: { stop: 12, length: 1013, abort: 0 },
      requestsRunning: 3,
      requestsWaiting: 1,
      kvCacheUsage: 0.4375,
    });
  });

  it('sums counters over several model_name label sets', () => {
    const text = [
      'vllm:prefix_cache_queries_total{model_name="a"} 100',
      'vllm:prefix_cache_queries_total{model_name="b"} 50',
      'vllm:request_success_total{finished_reason="stop",model_name="a"} 3',
      'vllm:request_success_total{finished_reason="stop",model_name="b"} 4',
    ].join('\n');
    const snapshot = vllmSnapshot(text);
    expect(snapshot.prefixCacheQueries).toBe(150);
    expect(snapshot.requestSuccess).toBe(7);
    expect(snapshot.requestSuccessByReason).toEqual({ stop: 7 });
  });

  it('sees no vllm series when vLLM runs with --disable-log-stats (only process metrics)', () => {
    const snapshot = vllmSnapshot(
      '# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n',
    );
    expect(snapshot.vllmSeries).toBe(0);
    expect(snapshot.prefixCacheQueries).toBeUndefined();
    expect(snapshot.requestSuccess).toBeUndefined();
    expect(snapshot.kvCacheUsage).toBeUndefined();
  });
});

describe('counterDeltas', () => {
  const at = (requests: number, queries: number, hits: number) =>
    vllmSnapshot(
      [
        `vllm:request_success_total{finished_reason="length"} ${requests}`,
        `vllm:prefix_cache_queries_total ${queries}`,
        `vllm:prefix_cache_hits_total ${hits}`,
      ].join('\n'),
    );

  it('subtracts the snapshot before from the one after', () => {
    expect(counterDeltas(at(10, 1000, 100), at(1035, 2_241_650, 995_848))).toEqual({
      requests: 1025,
      queriedTokens: 2_240_650,
      hitTokens: 995_748,
      hitRate: 995_748 / 2_240_650,
    });
  });

  it('has a null hit rate when nothing was queried', () => {
    expect(counterDeltas(at(5, 10, 0), at(5, 10, 0))?.hitRate).toBeNull();
  });

  it('is undefined when a counter went backwards or is absent', () => {
    expect(counterDeltas(at(100, 5000, 100), at(3, 200, 10))).toBeUndefined();
    expect(counterDeltas(vllmSnapshot(''), at(3, 200, 10))).toBeUndefined();
  });
});

describe('kvCacheTokensFromLog', () => {
  it('reads the KV cache size vLLM logs at start-up', () => {
    const log = [
      'INFO 10-14 09:12:01 [gpu_worker.py:298] Available KV cache memory: 17.47 GiB',
      '(EngineCore_DP0 pid=212) INFO 10-14 09:12:01 [kv_cache_utils.py:1087] GPU KV cache size: 163,472 tokens',
      'INFO 10-14 09:12:01 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 19.96x',
    ].join('\n');
    expect(kvCacheTokensFromLog(log)).toBe(163_472);
    expect(kvCacheTokensFromLog('GPU KV cache size: 4096 tokens')).toBe(4096);
  });

  it('is undefined when the line is absent', () => {
    expect(kvCacheTokensFromLog('INFO Started server process')).toBeUndefined();
  });
});

describe('replicaIdle', () => {
  const text = (running: number, waiting: number) =>
    `vllm:num_requests_running{engine="0"} ${running}\nvllm:num_requests_waiting{engine="0"} ${waiting}\n`;

  it('is true only with nothing running and nothing waiting', () => {
    expect(replicaIdle(vllmSnapshot(text(0, 0)))).toBe(true);
    expect(replicaIdle(vllmSnapshot(text(2, 0)))).toBe(false);
    expect(replicaIdle(vllmSnapshot(text(0, 5)))).toBe(false);
  });

  it('is undefined when a gauge is absent', () => {
    expect(replicaIdle(vllmSnapshot('vllm:num_requests_running 0\n'))).toBeUndefined();
  });
});

describe('resetLogCounts', () => {
  it("counts BlockPool.reset_prefix_cache's success and refusal lines", () => {
    const log = [
      'INFO 10-14 09:02:00 [api_server.py:1020] Resetting prefix cache with specific None...',
      '(EngineCore_DP0 pid=212) INFO 10-14 09:02:00 [block_pool.py:332] Successfully reset prefix cache',
      'INFO:     10.42.0.9:51234 - "POST /reset_prefix_cache HTTP/1.1" 200 OK',
      '(EngineCore_DP0 pid=212) WARNING 10-14 09:07:00 [block_pool.py:321] Failed to reset prefix cache because some blocks (34) are not freed yet',
      '(EngineCore_DP0 pid=212) INFO 10-14 09:09:00 [block_pool.py:332] Successfully reset prefix cache',
    ].join('\n');
    expect(resetLogCounts(log)).toEqual({
      succeeded: 2,
      refused: 1,
      lastRefusal:
        '(EngineCore_DP0 pid=212) WARNING 10-14 09:07:00 [block_pool.py:321] Failed to reset prefix cache because some blocks (34) are not freed yet',
    });
  });

  it('finds nothing in a log without resets (the route line alone proves nothing)', () => {
    expect(resetLogCounts('INFO Resetting prefix cache with specific None...\n')).toEqual({
      succeeded: 0,
      refused: 0,
    });
  });
});

describe('eppSnapshot', () => {
  it("reads GAIE's prefix indexer gauge and llm-d's KV-block index counters", () => {
    const text = [
      '# HELP inference_extension_prefix_indexer_size [ALPHA] Size of the prefix indexer.',
      '# TYPE inference_extension_prefix_indexer_size gauge',
      'inference_extension_prefix_indexer_size 2048',
      'kvcache_index_admissions_total 18432',
      'kvcache_index_lookup_requests_total 1025',
      'kvcache_index_lookup_hits_total 0',
    ].join('\n');
    expect(eppSnapshot(text)).toEqual({
      prefixIndexerSize: 2048,
      kvIndexLookups: 1025,
      kvIndexAdmissions: 18432,
    });
  });

  it('leaves absent series undefined', () => {
    expect(eppSnapshot('inference_extension_info{commit="abc"} 1\n')).toEqual({
      prefixIndexerSize: undefined,
      kvIndexLookups: undefined,
      kvIndexAdmissions: undefined,
    });
  });
});
