import { benchmarkJob } from '../../charts/benchmark-job.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { FileResultStore } from '../../lib/runner/file-store.ts';
import { HttpEndpointPickers, HttpFrontEnds } from '../../lib/runner/http-front-ends.ts';
import { HttpReplicas } from '../../lib/runner/http-replicas.ts';
import type { Clock, Cluster, RunnerDeps } from '../../lib/runner/ports.ts';
import type { BenchmarkSpec, StudyPlan } from '../../lib/study/plan.ts';
import type { FakeEppScorer } from './fake-epp.ts';
import type { FakeClock, FakeReplica } from './fake-servers.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';

/**
 * How a rehearsal sets up the fake cluster (what it breaks on purpose, FakeClusterOptions) and
 * the runner's I/O around it (rehearsalDeps). The cluster itself is fakes.ts.
 */

/** What the scheduler says of a pod no node can take (the fake cluster's one GPU node). */
export const UNSCHEDULABLE_MESSAGE =
  '0/1 nodes are available: 1 Insufficient memory. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.';

/**
 * The rehearsals' runner: the real HTTP clients against the loopback replicas, front ends and
 * EPPs, the real results folder, and the given fake cluster and clock.
 */
export function rehearsalDeps(
  config: LabConfig,
  parts: { cluster: Cluster; clock: Clock; dir: string; tokenFile: string; lines: string[] },
): RunnerDeps {
  // On a shared clock, time stands still while real I/O is in flight (the loopback HTTP, the files).
  const real = <T extends object>(io: T): T =>
    parts.clock instanceof SharedFakeClock ? parts.clock.outsideTime(io) : io;
  return {
    cluster: parts.cluster,
    replicas: real(new HttpReplicas(5_000)),
    frontEnds: real(new HttpFrontEnds(5_000)),
    endpointPickers: real(new HttpEndpointPickers(parts.tokenFile, 5_000)),
    store: real(new FileResultStore(parts.dir)),
    clock: parts.clock,
    jobManifest: (spec, gate) => benchmarkJob(config, spec, gate),
    log: (line) => parts.lines.push(line),
  };
}

/** What the fake cluster does to one client's Job. */
export interface ClientBehaviour {
  /** Requests completed (default: every prompt). The replicas serve these plus the warm-up. */
  readonly completed?: number;
  /** The Job fails after this many seconds, having served nothing. */
  readonly failAfterSeconds?: number;
  /** The Job never finishes. */
  readonly hangs?: boolean;
  /** The client writes no result file. */
  readonly noResultFile?: boolean;
  /** The replicas show no vllm: series in the scrape after the run. */
  readonly metricsVanish?: boolean;
}

export interface FakeClusterOptions {
  readonly config: LabConfig;
  readonly plan: StudyPlan;
  readonly replicas: readonly FakeReplica[];
  readonly resultsDir: string;
  readonly clock: FakeClock;
  /** Hit rate the replicas serve for a client's requests. */
  readonly hitRate: (spec: BenchmarkSpec) => number;
  /** How long a Job runs. @default 120 */
  readonly jobSeconds?: number;
  readonly behaviour?: Readonly<Record<string, ClientBehaviour>>;
  /** Throws from createJob for this run id: an interrupted runner. */
  readonly throwAtRun?: string;
  /**
   * A replica outage that begins `afterSeconds` after this run's client started its load and lasts
   * `seconds` (the replica restarts: its cache and counters start again).
   */
  readonly outageAtRun?: {
    readonly run: string;
    readonly replica: number;
    readonly afterSeconds: number;
    readonly seconds: number;
    /** The engine crashed and its container restarted: the pod, and its uid, stay. */
    readonly keepsUid?: boolean;
  };
  /** The first this-many Job polls after a Job was created answer HTTP 500, as an overloaded API server. */
  readonly pollErrorsAfterCreate?: number;
  /** Every Job poll answers this HTTP status (a wrong request: not retried). */
  readonly pollStatus?: number;
  /**
   * Seconds a deleted Job and its pods take to disappear (foreground propagation: the Job object
   * stays until its pods are gone). @default 0
   */
  readonly jobDeleteSeconds?: number;
  /** `status` of custom resources by `<plural>/<name>`; others do not exist. */
  readonly statuses?: Readonly<Record<string, Record<string, unknown>>>;
  /** createJob creates this run's Job (which then never finishes) and throws: a runner killed mid-run. */
  readonly leaveJobAtRun?: string;
  /**
   * Seconds from a Job's creation to its client's first request: pod start, imports, tokenizer
   * and dataset. A staged client spends them at its closed gate. @default 0
   */
  readonly jobStartSeconds?: number;
  /**
   * A staged client ends (status.failed) when its start is done instead of waiting at its closed
   * gate: a client image whose `vllm bench serve` has no ready check.
   */
  readonly stagedClientsEnd?: boolean;
  /** Gates (Services) a killed runner left behind. */
  readonly leftoverGates?: readonly string[];
  /** This run's client pods find no node with room: they stay Pending, Unschedulable. */
  readonly unschedulableAtRun?: string;
  /** llm-d's scorer: whether its hashes match and its `--v` (default: the chart's). */
  readonly eppScorer?: FakeEppScorer;
}
