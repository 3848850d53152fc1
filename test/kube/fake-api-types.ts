import type { FakeClock } from '../runner/fake-servers.ts';
import type { FollowedLogs } from './fake-log-follow.ts';
import type { FakeWorkloads } from './fake-pods.ts';

/**
 * What the fake API server (test/kube/fake-api-server.ts) is given and what it keeps: its
 * options, its stored objects, and the view of both its controllers read (fake-controllers.ts,
 * fake-storage.ts).
 */

export interface FakeNode {
  readonly name: string;
  readonly labels: Record<string, string>;
  /** GPUs the node has; advertised as nvidia.com/gpu once a device plugin runs there. */
  readonly gpus: number;
  readonly taints?: readonly { key: string; value?: string; effect: string }[];
  /** A device plugin (or the GPU operator) already runs here: GPUs advertised from the start. */
  readonly pluginRunning?: boolean;
}

export interface FakeStorageClass {
  readonly name: string;
  readonly default?: boolean;
  readonly waitForFirstConsumer?: boolean;
  /** false: its provisioner never makes a volume (not installed, no room). */
  readonly provisions?: boolean;
}

export interface FakeApiOptions {
  readonly clock: FakeClock;
  readonly nodes: readonly FakeNode[];
  readonly runtimeClasses?: readonly string[];
  /**
   * What RBAC refuses, for access reviews and requests alike: `patch clusterroles.rbac.authorization.k8s.io`,
   * `get pods/proxy`, `patch jobs.batch` (fake-rbac.ts).
   */
  readonly denied?: readonly string[];
  /**
   * What another authorizer in front of RBAC (a webhook, a policy engine) refuses any other
   * subject, in SubjectAccessReviews: `get pods/log`, `get /version` (fake-rbac.ts).
   */
  readonly othersDeny?: readonly string[];
  /** StorageClasses; a claim binds only to one that exists. */
  readonly storageClasses?: readonly FakeStorageClass[];
  /** How long a provisioner takes to bind a claim. */
  readonly claimBindMs?: number;
  /** What Jobs run, what pods' proxies and logs answer. */
  readonly workloads?: FakeWorkloads & FollowedLogs;
  readonly token?: string;
  /** Physics, on the fake clock. */
  readonly crdEstablishMs?: number;
  readonly deploymentReadyMs?: number;
  readonly modelLoadMs?: number;
  readonly pluginRegisterMs?: number;
  readonly deleteMs?: number;
}

export interface Stored {
  object: Record<string, unknown> & { metadata: Record<string, unknown> };
  /** Fake-clock time of the last spec change (a rollout starts). */
  changedAt: number;
  deletedAt?: number;
}

/** The server's state as its controllers read it. */
export interface FakeClusterState {
  readonly objects: ReadonlyMap<string, Stored>;
  /** The fake clock's now, in ms. */
  readonly now: number;
  readonly options: FakeApiOptions;
}
