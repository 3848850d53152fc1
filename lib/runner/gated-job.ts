import type { LabConfig } from '../config/schema.ts';
import { benchServeArgs, type ClientGate } from '../study/benchmark.ts';
import type { BenchmarkSpec } from '../study/plan.ts';
import type { JobObject } from './ports.ts';

/** The client container of a benchmark Job (charts/benchmark-job.ts). */
const CLIENT_CONTAINER = 'bench';

interface ContainerJson {
  readonly name: string;
  readonly args?: readonly string[];
}

interface TemplateJson {
  readonly spec: { readonly containers: readonly ContainerJson[] };
}

/**
 * A client's Job, from the runner ConfigMap's `jobs.json`, staged behind `gate`: the same Job
 * with the client arguments of `benchServeArgs(config, spec, gate)`, which is what
 * `benchmarkJob(config, spec, gate)` builds. The runner cannot call `benchmarkJob` itself: that
 * module brings cdk8s, megabytes over the ConfigMap's limit. Without a gate, the Job as it is.
 * Refuses a Job whose client does not run the published command of `spec`: the ConfigMap and
 * the configuration would disagree.
 */
export function gatedJob(
  job: JobObject,
  config: LabConfig,
  spec: BenchmarkSpec,
  gate?: ClientGate,
): JobObject {
  if (!gate) return job;
  const template = job.spec.template as TemplateJson;
  const containers = template?.spec?.containers ?? [];
  const client = containers.find((c) => c.name === CLIENT_CONTAINER);
  const published = benchServeArgs(config, spec);
  if (!client || JSON.stringify(client.args) !== JSON.stringify(published)) {
    throw new Error(
      `job/${job.metadata.name}: its container "${CLIENT_CONTAINER}" does not run the published client of benchmark ${spec.id}, so it cannot be staged; the runner's jobs.json and configuration disagree`,
    );
  }
  const args = benchServeArgs(config, spec, gate);
  return {
    ...job,
    spec: {
      ...job.spec,
      template: {
        ...template,
        spec: {
          ...template.spec,
          containers: containers.map((c) => (c === client ? { ...c, args } : c)),
        },
      },
    },
  };
}
