import type { LabConfig } from '../config/schema.ts';
import { runPrerequisites, type StudyPlan, type StudyRun } from './plan.ts';
import { armById, frontEnd } from './topology.ts';

/**
 * Staging the next run (issue 11). A client Job spends its first half minute on things that
 * measure nothing: the pod start, Python's imports, the tokenizer and the dataset. While a run's
 * load runs, the runner already creates the next run's clients, aimed at a gate: a ClusterIP
 * Service of the runner's own, a copy of the front end's Service without a selector, so it has no
 * endpoints and kube-proxy refuses every connection. `vllm bench serve` then waits in its ready
 * check, which retries a refused probe every 5 s (vllm/benchmarks/lib/ready_checker.py,
 * `wait_for_endpoint`). Once the earlier run has ended and this run's caches are reset and
 * verified, the runner gives the gate the front end's selector: the client's next probe passes
 * and is its warm-up request, and the load follows. The path is the one the front end's own
 * Service gives (kube-proxy's DNAT to the same pods, with the same ports and affinity).
 *
 * A front end the earlier run does not use is also restarted during that run, so that its index
 * is already empty when this run starts; the preflights then run once, before the study's first
 * run, so that no preflight request lands in a restarted index.
 *
 * Pure: which run is staged after which, and what a gate is called.
 */

/** Seconds between two ready-check probes of `vllm bench serve` (`wait_for_endpoint`, `retry_interval`). */
export const READY_CHECK_RETRY_SECONDS = 5;

/** Value of the component label of a gate Service. */
export const GATE_COMPONENT = 'gate';

/** A gate's Service name: `gate-<benchmark id>`, no longer than the client's Job name (`bench-<id>`). */
export function gateServiceName(benchmarkId: string): string {
  return `gate-${benchmarkId}`;
}

/**
 * Whether a run's clients can wait behind gates: every client aims at a front end whose Service
 * is in the lab's namespace (the runner's Role covers no other). The bound sweep and the
 * partition aim at replicas directly, and the AI Gateway's Service lives in Envoy Gateway's
 * namespace: they start their clients when they start.
 */
export function stageable(config: LabConfig, run: StudyRun): boolean {
  return (
    run.benchmarks.length > 0 &&
    run.benchmarks.every(
      (spec) =>
        spec.target.kind === 'arm' &&
        frontEnd(config, armById(config, spec.target.arm), spec.target.pair ?? 0).namespace ===
          config.namespace,
    )
  );
}

/** The run staged while another runs. */
export interface StagedRun {
  readonly run: StudyRun;
  /**
   * Its front end is restarted during the earlier run: it keeps a prefix index and the earlier
   * run uses none of its Deployments. Otherwise it is restarted after the reset, as unstaged.
   */
  readonly restartEarly: boolean;
}

/**
 * The run whose clients are staged while `current` runs: the first later run of the plan that
 * waits for `current` (`runPrerequisites`) and is not skipped (it has a valid record), when it is
 * stageable and `runner.stageNextRun` is on. The caller checks that the staged run's other
 * prerequisites have ended.
 */
export function stagedAfter(
  config: LabConfig,
  plan: StudyPlan,
  current: StudyRun,
  skipped: (run: StudyRun) => boolean = () => false,
  /** `runPrerequisites(plan)`, when the caller has it already. */
  after: ReadonlyMap<string, readonly string[]> = runPrerequisites(plan),
): StagedRun | undefined {
  if (!config.runner.stageNextRun) return undefined;
  const at = plan.runs.findIndex((r) => r.id === current.id);
  if (at < 0) return undefined;
  const next = plan.runs
    .slice(at + 1)
    .find((r) => !skipped(r) && (after.get(r.id) ?? []).includes(current.id));
  if (!next || !stageable(config, next)) return undefined;
  return { run: next, restartEarly: restartsEarly(config, current, next) };
}

/** Deployments and Services a run's traffic goes through (its front end), by name. */
function frontEndNames(config: LabConfig, run: StudyRun): Set<string> {
  if (!run.arm) return new Set();
  const fe = frontEnd(config, armById(config, run.arm), run.reset.pair ?? 0);
  return new Set([fe.service, ...fe.restartDeployments]);
}

function restartsEarly(config: LabConfig, current: StudyRun, next: StudyRun): boolean {
  if (!next.reset.restartFrontEndOf || !next.arm) return false;
  const busy = frontEndNames(config, current);
  const fe = frontEnd(config, armById(config, next.reset.restartFrontEndOf), next.reset.pair ?? 0);
  return fe.restartDeployments.every((name) => !busy.has(name));
}
