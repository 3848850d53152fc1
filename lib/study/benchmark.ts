import type { LabConfig } from '../config/schema.ts';
import type { BenchmarkSpec } from './plan.ts';
import { targetBaseUrl } from './topology.ts';

/** Where a benchmark client writes its saved JSON inside its pod. */
export const RESULT_DIR = '/out';

const ENDPOINTS = {
  chat: { backend: 'openai-chat', endpoint: '/v1/chat/completions' },
  completions: { backend: 'openai', endpoint: '/v1/completions' },
} as const;

/**
 * A client started before its run, aimed at a closed gate Service (lib/study/staging.ts) instead
 * of the front end's own Service.
 */
export interface ClientGate {
  /** The gate's base URL (`http://gate-<id>.<namespace>.svc.cluster.local:<port>`). */
  readonly baseUrl: string;
  /** `--ready-check-timeout-sec`: how long the client waits for the gate to open. */
  readonly readyCheckTimeoutSeconds: number;
}

/**
 * Arguments of `vllm bench serve` for one client (docs/facts.md §3.8). The served model name must equal
 * the replicas' `--served-model-name`, or every request is rejected. A staged client (`gate`)
 * aims at its gate and waits for it as long as the runner may take to open it; an unstaged one
 * keeps exactly the published command.
 */
export function benchServeArgs(config: LabConfig, spec: BenchmarkSpec, gate?: ClientGate): string[] {
  const { backend, endpoint } = ENDPOINTS[spec.api];
  const args = [
    'bench',
    'serve',
    `--base-url=${targetBaseUrl(config, spec.target)}`,
    `--backend=${backend}`,
    `--endpoint=${endpoint}`,
    `--model=${config.model.name}`,
    `--served-model-name=${config.model.servedName}`,
    `--tokenizer=${config.model.name}`,
  ];
  if (spec.prefix) {
    args.push(
      '--dataset-name=prefix_repetition',
      `--prefix-repetition-prefix-len=${spec.prefix.prefixLen}`,
      `--prefix-repetition-suffix-len=${spec.prefix.suffixLen}`,
      `--prefix-repetition-num-prefixes=${spec.prefix.prefixes}`,
      `--prefix-repetition-output-len=${spec.prefix.outputLen}`,
    );
  } else {
    args.push('--dataset-name=sharegpt', `--dataset-path=${config.benchmark.sharegptPath}`);
  }
  args.push(
    `--num-prompts=${spec.prompts}`,
    `--max-concurrency=${spec.concurrency}`,
    '--request-rate=inf',
    `--seed=${spec.seed}`,
    // Every request generates exactly its output length, so chat and completions arms do the same
    // work. Both backends are greedy: vLLM v0.11.0's async_request_openai_completions and
    // async_request_openai_chat_completions (vllm/benchmarks/lib/endpoint_request_func.py) both send
    // temperature 0.0 (docs/facts.md §3.8 records this).
    '--ignore-eos',
    '--percentile-metrics=ttft,tpot,itl,e2el',
    '--save-result',
    `--result-dir=${RESULT_DIR}`,
    `--result-filename=${spec.resultFile}`,
  );
  return gate ? (argsAimedAtGate(args, gate) ?? args) : args;
}

/**
 * A client's arguments aimed at its gate: its `--base-url` replaced by the gate's and the
 * ready-check timeout added; undefined when there is no `--base-url` to replace.
 */
function argsAimedAtGate(args: readonly string[], gate: ClientGate): string[] | undefined {
  const at = args.findIndex((a) => a.startsWith('--base-url='));
  if (at < 0) return undefined;
  const aimed = [...args];
  aimed[at] = `--base-url=${gate.baseUrl}`;
  aimed.push(`--ready-check-timeout-sec=${Math.ceil(gate.readyCheckTimeoutSeconds)}`);
  return aimed;
}

/** The parts of a client Job (charts/benchmark-job.ts) that `aimAtGate` reads. */
export interface ClientJob {
  readonly metadata: { readonly name: string };
  readonly spec: Readonly<Record<string, unknown>>;
}

/**
 * A client Job as the runner has it (the charts bake every Job into the runner's ConfigMap),
 * aimed at its gate instead: the `--base-url` of `benchServeArgs(config, spec, gate)` and its
 * ready-check timeout. Throws when the Job has no `--base-url` to replace, so a staged client can
 * never go straight to its front end.
 */
export function aimAtGate<J extends ClientJob>(job: J, gate: ClientGate): J {
  const template = job.spec.template as { spec: { containers: { args?: string[] }[] } };
  const containers = template.spec.containers.map((container) => {
    const aimed = argsAimedAtGate(container.args ?? [], gate);
    return aimed ? { ...container, args: aimed } : container;
  });
  if (containers.every((c, i) => c === template.spec.containers[i])) {
    throw new Error(`job/${job.metadata.name} has no --base-url argument to aim at a gate`);
  }
  return { ...job, spec: { ...job.spec, template: { ...template, spec: { ...template.spec, containers } } } };
}
