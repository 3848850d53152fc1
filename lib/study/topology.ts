import type { LabConfig } from '../config/schema.ts';
import { type Arm, type ServerSet, studyArms } from './arms.ts';
import { pairSuffix } from './pairs.ts';
import type { RunTarget } from './plan.ts';

/**
 * Names and ports through which the parts of the lab find each other. The charts create objects
 * with these names and the runner addresses them, so both read them from here.
 */

/** Host folder shared by every replica and benchmark client as `HF_HOME` (models, datasets). */
export const MODEL_CACHE_HOST_PATH = '/var/lib/lab/models';
/** Where the shared cache is mounted inside pods; `HF_HOME` points here. */
export const MODEL_CACHE_MOUNT = '/models';
/** The RuntimeClass K3s registers when it finds nvidia-container-runtime (docs/facts.md §2.2). */
export const NVIDIA_RUNTIME_CLASS = 'nvidia';
/** Host folder under which each benchmark client writes its saved JSON; synced to the results bucket. */
export const RESULTS_HOST_PATH = '/var/lib/lab/results';

/** ServiceAccount, Role, ConfigMap and Job of the in-cluster study runner. */
export const STUDY_RUNNER_NAME = 'lab-study-runner';
/** The runner pod's container (a results uploader may run beside it as a native sidecar). */
export const STUDY_RUNNER_CONTAINER = 'runner';
/** Chart id (and manifest file name) of the study runner: after everything it drives. */
export const STUDY_RUNNER_CHART = '90-runner';
/** Manifests folder for the runner when it must not start on apply (`runner.autoStart: false`). */
export const RUNNER_ON_DEMAND_DIR = 'runner';

/** vLLM's OpenAI-compatible port inside every replica. */
export const VLLM_PORT = 8000;
/** The manual lab's NodePort of the baseline Service. */
export const KUBE_PROXY_NODE_PORT = 30800;
export const ROUTER_PORT = 8000;
export const ENVOY_LISTENER_PORT = 8081;
export const EPP_GRPC_PORT = 9002;
/** The EPP's Prometheus metrics (bearer token, SubjectAccessReview for GET /metrics). */
export const EPP_METRICS_PORT = 9090;
/** The EPP's container; its pods carry `app=<eppName>`. */
export const EPP_CONTAINER = 'epp';

/**
 * StatefulSet (and pod-name prefix) of a server set: `qwen3`, or `qwen3-kv` for llm-d's replicas;
 * `qwen3-b` for the standard replicas of the second pair (`study.parallelism: 2`, lib/study/pairs.ts).
 */
export function replicaSetName(config: LabConfig, servers: ServerSet, pair = 0): string {
  const base = servers === 'standard' ? config.model.servedName : `${config.model.servedName}-kv`;
  return `${base}${pairSuffix(pair)}`;
}

/** The headless Service that gives replicas stable DNS names. */
export function headlessServiceName(config: LabConfig, servers: ServerSet, pair = 0): string {
  return `${replicaSetName(config, servers, pair)}-headless`;
}

/** Stable DNS name of one replica, e.g. `qwen3-0.qwen3-headless.vllm.svc.cluster.local`. */
export function replicaHost(config: LabConfig, servers: ServerSet, replica: number, pair = 0): string {
  const set = replicaSetName(config, servers, pair);
  return `${set}-${replica}.${headlessServiceName(config, servers, pair)}.${config.namespace}.svc.cluster.local`;
}

/** Base URLs of every replica of a server set (of one pair), in replica order. */
export function replicaUrls(config: LabConfig, servers: ServerSet, pair = 0): string[] {
  return Array.from(
    { length: config.vllm.replicas },
    (_, i) => `http://${replicaHost(config, servers, i, pair)}:${VLLM_PORT}`,
  );
}

/** Kubernetes objects behind an arm: the Service clients call, and what a restart must bounce. */
export interface FrontEnd {
  readonly service: string;
  readonly namespace: string;
  readonly port: number;
  /** Deployments that keep a prefix index and are restarted before each run of the arm. */
  readonly restartDeployments: readonly string[];
}

export function routerName(variant: string, pair = 0): string {
  return `vllm-router-${variant}${pairSuffix(pair)}`;
}

/** The EPP Deployment/Service of an EPP-style front end (`qwen3-epp`, `qwen3-epp-prefix3`, `qwen3-epp-b`, ...). */
export function eppName(config: LabConfig, frontEndId: string, pair = 0): string {
  return `${config.model.servedName}-${frontEndId}${pairSuffix(pair)}`;
}

/** The objects of an arm's front end on one replica pair (lib/study/pairs.ts: `-b` for pair 1). */
export function frontEnd(config: LabConfig, arm: Arm, pair = 0): FrontEnd {
  const namespace = config.namespace;
  const suffix = pairSuffix(pair);
  switch (arm.frontEnd) {
    case 'service':
      return {
        service: `${config.model.servedName}-nodeport${suffix}`,
        namespace,
        port: VLLM_PORT,
        restartDeployments: [],
      };
    case 'router': {
      const name = routerName(arm.routerVariant ?? arm.frontEndId, pair);
      return { service: name, namespace, port: ROUTER_PORT, restartDeployments: [name] };
    }
    case 'epp':
    case 'llmd':
      return {
        service: `envoy-${arm.frontEndId}${suffix}`,
        namespace,
        port: ENVOY_LISTENER_PORT,
        restartDeployments: [eppName(config, arm.frontEndId, pair)],
      };
    case 'ai-gateway':
      // Envoy Gateway names its data-plane Service itself; the charts pin this name through an
      // EnvoyProxy resource so the runner need not discover it.
      return {
        service: 'ai-gateway',
        namespace: 'envoy-gateway-system',
        port: 80,
        restartDeployments: [eppName(config, arm.frontEndId)],
      };
  }
}

/** The arm with this id among the arms this configuration runs. */
export function armById(config: LabConfig, id: string): Arm {
  const arm = studyArms(config).find((a) => a.id === id);
  if (!arm) throw new Error(`no arm "${id}" in this study`);
  return arm;
}

/** Base URL a benchmark client uses for a run target (on the target's replica pair). */
export function targetBaseUrl(config: LabConfig, target: RunTarget): string {
  const pair = target.pair ?? 0;
  if (target.kind === 'replica') return replicaUrls(config, target.servers, pair)[target.replica];
  const fe = frontEnd(config, armById(config, target.arm), pair);
  return `http://${fe.service}.${fe.namespace}.svc.cluster.local:${fe.port}`;
}
