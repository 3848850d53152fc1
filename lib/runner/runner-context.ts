import type { LabConfig } from '../config/schema.ts';
import type { StudyPlan } from '../study/plan.ts';
import type { PollOptions } from './poll.ts';
import type { Cluster, EndpointPickers, Replicas, RunnerDeps } from './ports.ts';
import type { ResolvedOptions } from './runner-options.ts';

/**
 * What every part of the first lab's runner works with: its I/O, with the Kubernetes API and the
 * replicas behind the error policy (retry.ts), its options, and its two ways to speak.
 */
export interface RunnerContext {
  readonly deps: RunnerDeps;
  readonly config: LabConfig;
  readonly plan: StudyPlan;
  readonly options: ResolvedOptions;
  /** The Kubernetes API through the error policy. */
  readonly cluster: Cluster;
  /** The replicas' /metrics and reset through the error policy. */
  readonly replicas: Replicas;
  /** The Endpoint Pickers' /metrics through the error policy. */
  readonly endpointPickers: EndpointPickers;
  /** A progress line (stdout and the study's runner.log; status.json's message). */
  say(line: string): Promise<void>;
  /** status.json on every poll, a progress line per run in progress every minute. */
  progress(): Promise<void>;
}

/** Poll options of a wait of the runner: its clock, status on every poll. */
export function waitOptions(
  ctx: RunnerContext,
  timeoutMs: number,
  extra: Partial<Omit<PollOptions, 'clock' | 'timeoutMs'>> = {},
): PollOptions {
  return {
    clock: ctx.deps.clock,
    timeoutMs,
    intervalMs: ctx.options.pollIntervalMs,
    onWait: () => ctx.progress(),
    ...extra,
  };
}
