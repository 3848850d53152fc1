import type { Datapath, MeshMode } from '../../config/network.ts';
import type { StudyChecks } from '../../study/results.ts';
import type { ConntrackDriverResult } from '../probes/conntrack-driver.ts';
import type { ServiceProberResult } from '../probes/service-prober.ts';
import type { SseClientResult } from '../probes/sse.ts';

/**
 * The network study's shared vocabulary (docs/facts.md §N3, N5, N6): what the plan produces, what
 * the runner records and what the report reads. Types only; the plan is `plan.ts`, the checks
 * `validity.ts`, the fortio result model `fortio-result.ts`.
 */

/** The experiments of docs/facts.md §N3; `C` is the calibration run of every cell. */
export const EXPERIMENTS = ['C', 'E1', 'E1s', 'E2', 'E3', 'E4', 'E5', 'E6', 'E7', 'E8', 'E9', 'E10'] as const;
export type ExperimentId = (typeof EXPERIMENTS)[number];

/**
 * The client/server pairings of the latency experiments. `plain`: out-of-mesh client to the plain
 * server. The others run in the mesh namespace (sidecar or ambient, as the cell's mesh):
 * `mesh-mtls` (mTLS on, the `http-` port), `mesh-mtls-off` (DestinationRule DISABLE on the
 * permissive server's exception port), `mesh-l4` (the `tcp-` port: relayed, not parsed),
 * `mesh-l7` (the `http-` port at E4's load; same path as `mesh-mtls`).
 */
export const LATENCY_ARMS = ['plain', 'mesh-mtls', 'mesh-mtls-off', 'mesh-l4', 'mesh-l7'] as const;
export type LatencyArm = (typeof LATENCY_ARMS)[number];

/** How a fortio run loads its target (docs/facts.md §N3, fortio flags). */
export type FortioMode = 'fixed-rate' | 'saturation' | 'grpc' | 'new-connection';

/** What must hold before a run starts; the runner establishes or waits for each, in order. */
export type Precondition =
  /** The mesh namespace carries the cell's Istio label (`meshNamespaceLabels`). */
  | { readonly kind: 'namespace-labelled'; readonly namespace: string }
  /** Every pod of the namespace was created after the label (restarted otherwise). */
  | { readonly kind: 'pods-restarted-after-label'; readonly namespace: string }
  /** Exactly `count` runner-made E9 Services exist, each with a ready endpoint. */
  | { readonly kind: 'services-ready'; readonly count: number }
  /** Fewer than `max` conntrack entries on the host before the step. */
  | { readonly kind: 'conntrack-baseline-below'; readonly max: number };

/** One fortio load Job (E1, E1s, E3, E4, E5, the calibration, E9's new-connection latency). */
export interface FortioRunSpec {
  readonly kind: 'fortio';
  readonly arm: LatencyArm;
  readonly mode: FortioMode;
  /** Namespace of the client pod (`plain` or `mesh`). */
  readonly clientNamespace: string;
  readonly url: string;
  /** `-qps`; 0 at saturation. */
  readonly qps: number;
  readonly seconds: number;
  readonly connections: number;
  readonly resolutionSeconds: number;
}

/** E6: one download of `bytes` through `url` (curl's speed and time). */
export interface DownloadRunSpec {
  readonly kind: 'download';
  readonly arm: LatencyArm;
  readonly clientNamespace: string;
  readonly url: string;
  readonly bytes: number;
}

/** E7: one SSE stream (`events` every `intervalMs`) read by the lab's sse-client probe. */
export interface SseRunSpec {
  readonly kind: 'sse';
  readonly arm: LatencyArm;
  readonly clientNamespace: string;
  readonly url: string;
  readonly events: number;
  readonly intervalMs: number;
}

/** One row of the mTLS matrix (E2) or of E8: a curl from a client identity, expected outcome. */
export interface MtlsCase {
  /** Stable within the experiment: `no-policy-out-of-mesh`, `strict-in-mesh`, `authz-denied`, ... */
  readonly id: string;
  readonly title: string;
  readonly clientNamespace: string;
  /** Service account of the client pod (`default` when not named otherwise). */
  readonly serviceAccount: string;
  /** Whether the client pod has a sidecar (in-mesh) or not. */
  readonly inMesh: boolean;
  readonly url: string;
  readonly expected: CurlOutcome;
}

/** What one curl ended with: HTTP code (`000` when none arrived) and curl's exit code. */
export interface CurlOutcome {
  readonly httpCode: string;
  readonly curlExit: number;
}

export interface MtlsRunSpec {
  readonly kind: 'mtls';
  readonly cases: readonly MtlsCase[];
}

/** One E9 step: N Services, then entries, programming latency and new-connection latency. */
export interface ServiceScaleRunSpec {
  readonly kind: 'service-scale';
  readonly services: number;
  readonly samples: number;
  readonly attemptTimeoutMs: number;
  readonly createConcurrency: number;
  readonly backendsPerService: number;
}

/** One E10 step: `limit` (`default` keeps the host's) and the connections driven against it. */
export interface ConntrackRunSpec {
  readonly kind: 'conntrack';
  readonly limit: number | 'default';
  readonly connections: number;
  readonly connectTimeoutSeconds: number;
  readonly baselineMax: number;
}

export type NetworkRunSpec =
  | FortioRunSpec
  | DownloadRunSpec
  | SseRunSpec
  | MtlsRunSpec
  | ServiceScaleRunSpec
  | ConntrackRunSpec;

export type NetworkRunKind = NetworkRunSpec['kind'];

/** One run of a cell's study. */
export interface NetworkRun {
  /** Stable and unique in the cell: `e1-plain-r1`, `e9-services-1000`, `e10-limit-2048`, `c-r2`, ... */
  readonly id: string;
  readonly cell: string;
  readonly experiment: ExperimentId;
  readonly title: string;
  /** Which repeat of its arm this is, from 1 (repeated experiments only). */
  readonly repeat?: number;
  /**
   * The run this one repeats, set with `repeat`: runs of one group (`e1-plain`: `e1-plain-r1` ...
   * `-r5`; `c`: the calibration) share their experiment, arm and load, and only they are compared
   * by the repeat-spread check. Runs without one (E9's steps, E10's limits) repeat nothing.
   */
  readonly repeatGroup?: string;
  readonly spec: NetworkRunSpec;
  readonly preconditions: readonly Precondition[];
}

/** A cell's study: its runs in execution order (arms interleaved A B A B within an experiment). */
export interface NetworkStudyPlan {
  readonly cell: string;
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  readonly runs: readonly NetworkRun[];
}

// ---- records (what the runner writes, what the report reads) ----

/** The host a cell's study ran on (docs/facts.md §N5: every run records it). */
export interface CellHostFacts {
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly kernel: string;
  /** CPU flags that matter for encryption cost, as found in /proc/cpuinfo (`aes`, `vaes`, ...). */
  readonly cpuFlags: readonly string[];
  /** Every pinned version, by component (`k3s`, `cilium`, `istio`, `fortio`, `netshoot`, ...). */
  readonly versions: Readonly<Record<string, string>>;
}

/** What the datapath of the cell really is, as read on the host (docs/facts.md §N5). */
export interface DatapathEvidence {
  /** Cilium cells: `KubeProxyReplacement` from `cilium-dbg status`; null elsewhere. */
  readonly kubeProxyReplacement: boolean | null;
  /** `KUBE-SVC` chains in `iptables-save -t nat` (count). */
  readonly kubeSvcChains: number;
  /** Whether the `kube-proxy` nft table exists. */
  readonly nftKubeProxyTable: boolean;
  /** Virtual services in `ipvsadm -Ln` (count). */
  readonly ipvsServices: number;
}

/** Sidecar evidence of a run's pods (docs/facts.md §N5). */
export interface PodMeshEvidence {
  readonly pod: string;
  readonly namespace: string;
  readonly node: string;
  /** `istio-proxy` is among the init containers with `restartPolicy: Always` (native sidecar). */
  readonly hasSidecar: boolean;
}

/**
 * Deltas of the destination side's Istio counters over a run (docs/facts.md §N3, mTLS evidence):
 * the server's sidecar, or on an ambient cell the node's ztunnel (only connections into the
 * server's namespace).
 */
export interface MtlsMetricEvidence {
  /** `istio_requests_total{reporter="destination"}` by `connection_security_policy` label value. */
  readonly requestsBySecurityPolicy: Readonly<Record<string, number>>;
  /** `istio_tcp_connections_opened_total{reporter="destination"}`. */
  readonly tcpConnectionsOpened: number;
  /**
   * The same TCP counter by `connection_security_policy` (`mutual_tls`, `none`; ztunnel: `unknown`
   * for a plaintext passthrough). The L4 arms' only evidence of mTLS; absent in older records.
   */
  readonly tcpConnectionsBySecurityPolicy?: Readonly<Record<string, number>>;
  /** Whose counters these are. @default 'sidecar' */
  readonly reporter?: 'sidecar' | 'ztunnel';
}

/**
 * Whether a mesh run's traffic was shown to be mutual TLS (docs/facts.md §N5): `proven` (the
 * destination counted the run's calls or connections under `mutual_tls`; for the mTLS-off arm,
 * under `none` as configured), `unproven` (no evidence: no counters, or none of them grew), or
 * `contradicted` (the counters show the other policy). Only `proven` runs are valid.
 */
export type MtlsProof = 'proven' | 'unproven' | 'contradicted';

/** How a run's Job ended (as the first lab: by succeeded/failed counts). */
export type NetworkJobOutcome = 'succeeded' | 'failed' | 'timed-out';

/** curl's measurements of one E6 download (`-w` fields: seconds and bytes per second). */
export interface DownloadResult {
  readonly httpCode: string;
  readonly curlExit: number;
  readonly sizeDownloadBytes: number;
  readonly speedDownloadBytesPerSecond: number;
  readonly timeTotalSeconds: number;
}

export interface MtlsCaseResult {
  readonly id: string;
  readonly expected: CurlOutcome;
  readonly observed: CurlOutcome | null;
  /** The Job whose curl observed it: one per source of the matrix (mtls-groups.ts). Absent in older records. */
  readonly job?: string;
}

/** E9: what a step found (entries counted by a host-command Job, the prober's result). */
export interface ServiceScaleResult {
  /** Runner-made Services that existed with a ready endpoint when measuring (count). */
  readonly servicesReady: number;
  /** Data-plane entries counted the datapath's way (count) and the command that counted them. */
  readonly entries: number;
  readonly entriesCommand: string;
  /** Cilium: whether the agent's log showed "map full" during the step. */
  readonly lbMapFull?: boolean;
  readonly prober: ServiceProberResult | null;
  /** The step's new-connection fortio run (`-keepalive=false`): its raw JSON, as `fortio` results. */
  readonly newConnection?: string;
}

/** E10: what a step found. */
export interface ConntrackResult {
  /** `nf_conntrack_max` before the step (the host default on the first step). */
  readonly limitBefore: number;
  /** The limit during the step. */
  readonly limit: number;
  /** `nf_conntrack_count` when the step started (count). */
  readonly baseline: number;
  /** `nf_conntrack_max` read back after the step was restored. */
  readonly limitAfterRestore: number | null;
  /** The host default the step restored (the study's `conntrackHostDefault`). */
  readonly restoredTo?: number;
  readonly driver: ConntrackDriverResult | null;
}

/** The kind-specific outcome of a run; `fortio` holds the file's raw text for re-parsing. */
export type NetworkRunResult =
  | { readonly kind: 'fortio'; readonly raw: string }
  | { readonly kind: 'download'; readonly download: DownloadResult }
  | { readonly kind: 'sse'; readonly sse: SseClientResult }
  | { readonly kind: 'mtls'; readonly cases: readonly MtlsCaseResult[] }
  | { readonly kind: 'service-scale'; readonly scale: ServiceScaleResult }
  | { readonly kind: 'conntrack'; readonly conntrack: ConntrackResult };

export interface NetworkRunRecord {
  readonly id: string;
  readonly cell: string;
  readonly experiment: ExperimentId;
  readonly title: string;
  readonly repeat?: number;
  /** The plan's repeat group of the run (`NetworkRun.repeatGroup`). */
  readonly repeatGroup?: string;
  readonly spec: NetworkRunSpec;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly job: NetworkJobOutcome;
  /** Absent when the Job left no result file (the run is then invalid). */
  readonly result?: NetworkRunResult;
  readonly pods: readonly PodMeshEvidence[];
  readonly mtlsMetrics?: MtlsMetricEvidence;
  /** Mesh arms only: whether the metrics prove the run's encryption (`unproven` is shown as "mTLS unproven"). */
  readonly mtlsProof?: MtlsProof;
  /** A run that fails any validity check is invalid and never enters a comparison. */
  readonly valid: boolean;
  readonly invalidReasons: readonly string[];
  /** Checks that flag without invalidating (repeat spread): shown, not hidden. */
  readonly flags?: readonly string[];
  /** Which attempt of the run this record is (1 when absent). */
  readonly attempt?: number;
  /**
   * Runs that need the mesh's pods: per namespace, the pods the runner found out of the mesh and
   * restarted into it (empty: none had to be). Absent in older records and on other runs.
   */
  readonly meshRestart?: readonly MeshRestartEvidence[];
}

/** The pods of one mesh namespace the runner restarted into the mesh before a run (docs/facts.md §N2). */
export interface MeshRestartEvidence {
  readonly namespace: string;
  readonly restarted: readonly string[];
}

/** `study.json` of a cell's network study. */
export interface NetworkStudyRecord {
  readonly lab: 'network';
  readonly studyId: string;
  readonly cell: string;
  readonly datapath: Datapath;
  readonly mesh: MeshMode;
  readonly host: CellHostFacts;
  readonly datapathEvidence?: DatapathEvidence;
  /**
   * The host's own `nf_conntrack_max`, read before the study's first E10 step: every E10 step
   * restores this value, never the one it found (a killed run leaves a lowered limit behind).
   */
  readonly conntrackHostDefault?: number;
  /**
   * A runner found E10 unfinished in the last record (killed mid-step) and, before any measurement,
   * wrote `conntrackHostDefault` back over the limit it found on the host.
   */
  readonly conntrackRestoredAtStart?: {
    readonly found: number;
    readonly restoredTo: number;
    readonly at: string;
  };
  readonly startedAt: string;
  readonly finishedAt?: string;
  /**
   * `interrupted`: the Kubernetes API stopped the study (unreachable past
   * `runner.retry.outageMinutes`, or refusing); `lab run` resumes it and the host stays up.
   */
  readonly state: 'running' | 'finished' | 'failed' | 'interrupted';
  readonly error?: string;
  /** `smoke`: the cell's smoke study (lib/network/study/smoke.ts), never resumed, never reported as the study. */
  readonly profile?: 'smoke';
  /** A full study's smoke checks before its first long run: the smoke study that ran them and its verdict. */
  readonly checks?: StudyChecks;
  readonly runs: readonly NetworkRunRecord[];
}
