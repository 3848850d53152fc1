/**
 * The labels the lab puts on its objects, without cdk8s: the study runner bundles what it
 * imports into its ConfigMap (lib/runner/bundle.ts, at most 1 MiB), and a module that imports
 * cdk8s-plus-34 would add megabytes. charts/common.ts and charts/benchmark-job.ts re-export them.
 */

/** Labels on every object of the lab, so `kubectl delete -l` can find them all. */
export function labLabels(): Record<string, string> {
  return { 'app.kubernetes.io/part-of': 'llm-gateway-lab' };
}

/** Label key naming the lab component of an object (model-servers, router, epp, envoy, benchmark). */
export const COMPONENT_LABEL = 'app.kubernetes.io/component';

/** Label carrying the benchmark id, so the runner finds a Job's pods and results. */
export const BENCHMARK_LABEL = 'lab.llm-gateway/benchmark';
