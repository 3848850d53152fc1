import { describe, expect, it } from 'vitest';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { benchServeArgs, type ClientGate } from '../../lib/study/benchmark.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { armById, frontEnd, replicaHost, replicaUrls, targetBaseUrl } from '../../lib/study/topology.ts';

describe('topology', () => {
  const config = defaultLabConfig();

  it('addresses replicas by stable StatefulSet DNS names, never by pod IP', () => {
    expect(replicaHost(config, 'standard', 1)).toBe('qwen3-1.qwen3-headless.vllm.svc.cluster.local');
    expect(replicaUrls(config, 'kv-events')).toEqual([
      'http://qwen3-kv-0.qwen3-kv-headless.vllm.svc.cluster.local:8000',
      'http://qwen3-kv-1.qwen3-kv-headless.vllm.svc.cluster.local:8000',
    ]);
  });

  it('names the front end of each arm and what a run restarts', () => {
    expect(frontEnd(config, armById(config, 'kube-proxy'))).toEqual({
      service: 'qwen3-nodeport',
      namespace: 'vllm',
      port: 8000,
      restartDeployments: [],
    });
    // Both APIs of a router variant go through the same Deployment.
    expect(frontEnd(config, armById(config, 'router-cache-aware-completions'))).toEqual(
      frontEnd(config, armById(config, 'router-cache-aware')),
    );
    expect(frontEnd(config, armById(config, 'epp'))).toEqual({
      service: 'envoy-epp',
      namespace: 'vllm',
      port: 8081,
      restartDeployments: ['qwen3-epp'],
    });
  });

  it('follows the namespace and served name', () => {
    const other = parseLabConfig({ namespace: 'lab', model: { servedName: 'llama' } });
    expect(targetBaseUrl(other, { kind: 'replica', servers: 'standard', replica: 0 })).toBe(
      'http://llama-0.llama-headless.lab.svc.cluster.local:8000',
    );
    expect(targetBaseUrl(other, { kind: 'arm', arm: 'router-round-robin' })).toBe(
      'http://vllm-router-round-robin.lab.svc.cluster.local:8000',
    );
  });

  it('refuses an arm this study does not run', () => {
    expect(() => armById(config, 'ai-gateway')).toThrow('no arm "ai-gateway" in this study');
  });
});

describe('benchServeArgs (docs/facts.md §3.8)', () => {
  const config = defaultLabConfig();
  const plan = studyPlan(config);

  it('builds the published prefix workload for a chat arm', () => {
    expect(benchServeArgs(config, findRun(plan, 'arm-kube-proxy-prefix').benchmarks[0])).toEqual([
      'bench',
      'serve',
      '--base-url=http://qwen3-nodeport.vllm.svc.cluster.local:8000',
      '--backend=openai-chat',
      '--endpoint=/v1/chat/completions',
      '--model=Qwen/Qwen3-0.6B-FP8',
      '--served-model-name=qwen3',
      '--tokenizer=Qwen/Qwen3-0.6B-FP8',
      '--dataset-name=prefix_repetition',
      '--prefix-repetition-prefix-len=2048',
      '--prefix-repetition-suffix-len=128',
      '--prefix-repetition-num-prefixes=128',
      '--prefix-repetition-output-len=128',
      '--num-prompts=1024',
      '--max-concurrency=32',
      '--request-rate=inf',
      '--seed=42',
      '--ignore-eos',
      '--percentile-metrics=ttft,tpot,itl,e2el',
      '--save-result',
      '--result-dir=/out',
      '--result-filename=arm-kube-proxy-prefix.json',
    ]);
  });

  it('speaks /v1/completions to a completions arm', () => {
    const args = benchServeArgs(
      config,
      findRun(plan, 'arm-router-cache-aware-completions-prefix').benchmarks[0],
    );
    expect(args).toContain('--backend=openai');
    expect(args).toContain('--endpoint=/v1/completions');
    expect(args).toContain('--base-url=http://vllm-router-cache-aware.vllm.svc.cluster.local:8000');
  });

  it('reads ShareGPT from the shared cache for the control', () => {
    const args = benchServeArgs(config, findRun(plan, 'arm-epp-sharegpt').benchmarks[0]);
    expect(args).toContain('--dataset-name=sharegpt');
    expect(args).toContain(`--dataset-path=${config.benchmark.sharegptPath}`);
    expect(args.some((arg) => arg.startsWith('--prefix-repetition'))).toBe(false);
  });

  it('sends each partition client to its own replica with its own seed', () => {
    const [r0, r1] = findRun(plan, 'partition').benchmarks.map((b) => benchServeArgs(config, b));
    expect(r0).toContain('--base-url=http://qwen3-0.qwen3-headless.vllm.svc.cluster.local:8000');
    expect(r1).toContain('--base-url=http://qwen3-1.qwen3-headless.vllm.svc.cluster.local:8000');
    expect(r1).toContain('--seed=4242');
    expect(r1).toContain('--max-concurrency=16');
  });
});

describe('benchServeArgs of a staged client (lib/study/staging.ts)', () => {
  const config = defaultLabConfig();
  const plan = studyPlan(config);
  const spec = findRun(plan, 'arm-kube-proxy-prefix').benchmarks[0];
  const gate: ClientGate = {
    baseUrl: 'http://gate-arm-kube-proxy-prefix.vllm.svc.cluster.local:8000',
    readyCheckTimeoutSeconds: 1_799.2,
  };

  it('without a gate is the published command for every client, with no ready-check argument', () => {
    for (const s of plan.runs.flatMap((run) => run.benchmarks)) {
      const args = benchServeArgs(config, s);
      expect(benchServeArgs(config, s, undefined)).toEqual(args);
      expect(args, s.id).toContain(`--base-url=${targetBaseUrl(config, s.target)}`);
      expect(
        args.some((arg) => arg.startsWith('--ready-check')),
        s.id,
      ).toBe(false);
      expect(args.at(-1)).toBe(`--result-filename=${s.resultFile}`);
    }
  });

  it('aims at the gate and waits for it the whole (rounded up) time, the rest unchanged', () => {
    const published = benchServeArgs(config, spec);
    const staged = benchServeArgs(config, spec, gate);
    expect(staged).toEqual([
      ...published.map((arg) => (arg.startsWith('--base-url=') ? `--base-url=${gate.baseUrl}` : arg)),
      '--ready-check-timeout-sec=1800',
    ]);
    expect(staged.filter((arg) => arg.startsWith('--base-url='))).toEqual([
      '--base-url=http://gate-arm-kube-proxy-prefix.vllm.svc.cluster.local:8000',
    ]);
    expect(benchServeArgs(config, spec, { ...gate, readyCheckTimeoutSeconds: 900 }).at(-1)).toBe(
      '--ready-check-timeout-sec=900',
    );
  });
});
