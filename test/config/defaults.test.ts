import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { partitionSeeds } from '../../lib/study/workload.ts';

// Every default against docs/facts.md §2-4: the defaults reproduce the published lab.
describe('LabConfig defaults', () => {
  const config = defaultLabConfig();

  it('describes the AWS testbed of docs/facts.md §2', () => {
    expect(config.stackName).toBe('LlmGatewayLab');
    expect(config.instance).toEqual({
      type: 'g6.12xlarge',
      gpus: 4,
      vcpus: 48,
      memoryGiB: 192,
      pricePerHourUsd: 4.6,
      amiParameter:
        '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id',
      rootVolumeGiB: 200,
      maxLifetimeHours: 8,
      readyTimeoutMinutes: 45,
      fallbackTypes: [],
      preferredAzs: [],
    });
    expect(config.k3s.version).toBe('v1.36.4+k3s1');
    expect(config.devicePlugin.image).toMatch(/^nvcr\.io\/nvidia\/k8s-device-plugin:v0\.17\.\d+$/);
  });

  it('serves Qwen3-0.6B-FP8 as qwen3 on vLLM v0.11.0 with the published flags (docs/facts.md §3.1)', () => {
    expect(config.namespace).toBe('vllm');
    expect(config.model).toEqual({ name: 'Qwen/Qwen3-0.6B-FP8', servedName: 'qwen3' });
    expect(config.vllm).toEqual({
      image: 'vllm/vllm-openai:v0.11.0',
      replicas: 2,
      maxModelLen: 8192,
      gpuMemoryUtilization: 0.85,
      blockSize: 16,
      maxNumBatchedTokens: 2048,
      maxNumSeqs: 256,
      kvCacheTokensPerReplica: 163_472,
    });
  });

  it('runs vllm-router 0.1.15 in three variants with the published thresholds (docs/facts.md §3.3)', () => {
    expect(config.router.version).toBe('0.1.15');
    expect(config.router.image).toBe(
      'python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36',
    );
    expect(config.router.variants).toEqual([
      { name: 'round-robin', policy: 'round_robin' },
      {
        name: 'cache-aware',
        policy: 'cache_aware',
        cacheThreshold: 0.3,
        balanceAbsThreshold: 64,
        balanceRelThreshold: 1.5,
        evictionIntervalSecs: 120,
        maxTreeSize: 67_108_864,
      },
      {
        name: 'cache-aware-tuned',
        policy: 'cache_aware',
        cacheThreshold: 0.3,
        balanceAbsThreshold: 4096,
        balanceRelThreshold: 100,
        evictionIntervalSecs: 3600,
        maxTreeSize: 67_108_864,
      },
    ]);
  });

  it('pins GAIE v1.0.1, its EPP and equal scorer weights, with the x3 prefix variant (docs/facts.md §3.4)', () => {
    expect(config.gaie).toEqual({
      version: 'v1.0.1',
      eppImage: 'registry.k8s.io/gateway-api-inference-extension/epp:v1.0.1',
      weights: { queue: 1, kvCacheUtilization: 1, prefixCache: 1 },
      prefixHeavyWeight: 3,
    });
  });

  it('pins a v1.35 Envoy with explicit concurrency and warn logging (docs/facts.md §3.5)', () => {
    expect(config.envoy.image).toMatch(/^envoyproxy\/envoy:v1\.35\.\d+$/);
    expect(config.envoy.concurrency).toBe(8);
    expect(config.envoy.logLevel).toBe('warn');
  });

  it('pairs AI Gateway v1.1.0 with the Envoy Gateway it was released against (docs/facts.md §3.6)', () => {
    expect(config.aiGateway).toEqual({ envoyGatewayVersion: 'v1.8.1', aiGatewayVersion: 'v1.1.0' });
  });

  it('version-matches llm-d to GAIE v1.0.1 with block size 64 and weights 3/2/2 (docs/facts.md §3.7)', () => {
    expect(config.llmd).toEqual({
      eppImage: 'ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2',
      blockSize: 64,
      hashSeed: '42',
      weights: { precisePrefixCache: 3, kvCacheUtilization: 2, queue: 2 },
    });
  });

  it('runs the published prefix workload with vllm bench serve (docs/facts.md §3.8, 4.1)', () => {
    expect(config.benchmark.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(config.benchmark.memoryLimitGi).toBe(12);
    expect(config.benchmark.sharegptPath).toMatch(/ShareGPT_V3_unfiltered_cleaned_split\.json$/);
    expect(config.workload).toEqual({
      prefixLen: 2048,
      suffixLen: 128,
      prefixes: 128,
      outputLen: 128,
      prompts: 1024,
      concurrency: 32,
      seed: 42,
      chatTemplateTokens: 10,
    });
    // The ideal partition's seeds derive from the seed: 42 and 4242, the published lab's.
    expect(partitionSeeds(config.workload, config.vllm.replicas)).toEqual([42, 4242]);
  });

  it('starts the study when the testbed is ready and leaves the instance running after it', () => {
    expect(config.runner).toEqual({
      image: 'node:22.20.0-bookworm-slim',
      autoStart: true,
      terminateWhenDone: false,
      stageNextRun: true,
      readyTimeoutMinutes: 10,
      retry: { attempts: 5, initialDelaySeconds: 1, maxDelaySeconds: 30, outageMinutes: 15 },
      // The lab's own host keeps the node folder its bootstrap uploads.
      results: { volume: 'node-folder', storageClassName: null, size: '20Gi', upload: null },
    });
  });

  it('plans the default study of docs/facts.md §4.2 with every optional arm off', () => {
    expect(config.study).toEqual({
      boundSweepPrefixes: [128, 64, 16, 8],
      sharegptControl: true,
      completionsArms: true,
      concurrencySweep: { levels: [4, 8], arms: ['kube-proxy', 'router-cache-aware'] },
      optionalArms: [],
      repeats: 1,
      predictionSeeds: 5,
      parallelism: 1,
      profile: 'full',
    });
  });
});
