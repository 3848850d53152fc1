import { ApiObject, App, Chart, YamlOutputType } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { labPlacement } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { benchServeArgs, type ClientGate, RESULT_DIR } from '../lib/study/benchmark.ts';
import type { BenchmarkSpec, StudyPlan } from '../lib/study/plan.ts';
import { benchmarkRequests } from '../lib/study/resources.ts';
import {
  COMPONENT_LABEL,
  containerResources,
  envVars,
  gpuRuntime,
  labLabels,
  MODEL_CACHE_MOUNT,
  modelCacheMount,
  modelCacheVolume,
  podPlacement,
} from './common.ts';
import { BENCHMARK_LABEL } from './labels.ts';
import { resultsMount, resultsVolume } from './results-store.ts';

// Defined beside the other labels (labels.ts, free of cdk8s), for the runner's bundle.
export { BENCHMARK_LABEL };

/** A Job manifest as plain JSON, ready for `kubectl create` or the Kubernetes API. */
export interface JobManifest {
  readonly apiVersion: 'batch/v1';
  readonly kind: 'Job';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly spec: Readonly<Record<string, unknown>>;
}

/** Job name of a benchmark client: `bench-<id>`, a DNS-1123 label. */
export function benchmarkJobName(spec: Pick<BenchmarkSpec, 'id'>): string {
  const name = `bench-${spec.id}`;
  if (name.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    throw new Error(
      `benchmark "${spec.id}": Job name "${name}" is not a DNS-1123 label of at most 63 characters`,
    );
  }
  return name;
}

/**
 * The `vllm bench serve` client of one benchmark as a Job (docs/facts.md §3.8). Pure: the runner
 * creates these at run time, and the charts wrap the same object. With `gate`, the client is
 * staged: aimed at its closed gate, it waits there (lib/study/staging.ts).
 */
export function benchmarkJob(config: LabConfig, spec: BenchmarkSpec, gate?: ClientGate): JobManifest {
  const name = benchmarkJobName(spec);
  const placement = labPlacement(config);
  const labels = { ...labLabels(), [COMPONENT_LABEL]: 'benchmark', [BENCHMARK_LABEL]: spec.id };
  const props: k8s.KubeJobProps = {
    metadata: { name, namespace: config.namespace, labels },
    spec: {
      // A retry would meet the first attempt's warm cache and inflate the hit rate.
      backoffLimit: 0,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          // The CLI builds an engine config and dies ("Failed to infer device type") without a
          // visible GPU, yet it must not take one from the replicas: runtime class and env, no
          // nvidia.com/gpu request. Hence a GPU node too (vLLM issue 23967); the runner further
          // pins each Job to its own node, whose results folder it reads (pinToRunnerNode).
          ...gpuRuntime(placement.gpuRuntimeClass),
          ...podPlacement(placement.clients),
          containers: [
            {
              name: 'bench',
              image: config.benchmark.image,
              command: ['vllm'],
              args: benchServeArgs(config, spec, gate),
              env: envVars({
                NVIDIA_VISIBLE_DEVICES: 'all',
                NVIDIA_DRIVER_CAPABILITIES: 'compute,utility',
                HF_HOME: MODEL_CACHE_MOUNT,
              }),
              resources: containerResources(benchmarkRequests(config)),
              securityContext: {
                runAsNonRoot: false,
                readOnlyRootFilesystem: false,
                allowPrivilegeEscalation: false,
              },
              volumeMounts: [modelCacheMount(), resultsMount(config, RESULT_DIR, spec.id)],
            },
          ],
          volumes: [modelCacheVolume(), resultsVolume(config, spec.id)],
        },
      },
    },
  };
  return k8s.KubeJob.manifest(props) as JobManifest;
}

export interface BenchmarkJobProps {
  readonly config: LabConfig;
  readonly spec: BenchmarkSpec;
}

/** A benchmark client Job in a chart; exactly the object `benchmarkJob` returns. */
export class BenchmarkJob extends Construct {
  public readonly manifest: JobManifest;

  constructor(scope: Construct, id: string, props: BenchmarkJobProps) {
    super(scope, id);
    this.manifest = benchmarkJob(props.config, props.spec);
    const { apiVersion, kind, metadata, spec } = this.manifest;
    new ApiObject(this, 'job', { apiVersion, kind, metadata: { ...metadata }, spec });
  }
}

/**
 * A separate app with one file per run of the plan (`<run-id>.yaml`, every client of the run),
 * for running the study by hand with `kubectl create -f`. It is not part of the apply order:
 * the Jobs start load as soon as they exist.
 */
export function buildBenchmarkJobsApp(config: LabConfig, plan: StudyPlan, outdir: string): App {
  const app = new App({
    outdir,
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
    outputFileExtension: '.yaml',
  });
  for (const run of plan.runs) {
    const chart = new Chart(app, run.id);
    for (const spec of run.benchmarks) new BenchmarkJob(chart, spec.id, { config, spec });
  }
  return app;
}
