import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { routerWheelhouse } from '../../../charts/routers.ts';
import { agentNodes, type ClusterNode, type NodeRole, SERVER_HOST } from '../../config/cluster.ts';
import { NODE_ROLE_LABEL } from '../../config/placement.ts';
import type { LabConfig } from '../../config/schema.ts';
import {
  type AgentStepName,
  type NetworkStepName,
  type ServerStepName,
  serverStepBudgetSeconds,
  serverStepNames,
  WAIT_FOR_AGENTS,
} from '../../facts/budgets.ts';
import { NODE_IP_PLACEHOLDER } from '../../network/cilium-values.ts';
import { HOST_FILE, STATUS_FILE, STUDIES_DIR } from '../../runner/layout.ts';
import { studyPairs } from '../../study/pairs.ts';
import {
  MODEL_CACHE_HOST_PATH,
  MODEL_CACHE_MOUNT,
  NVIDIA_RUNTIME_CLASS,
  RESULTS_HOST_PATH,
  replicaSetName,
  VLLM_PORT,
} from '../../study/topology.ts';
import {
  BOOTSTRAP_ENVIRONMENT,
  BOOTSTRAP_LOG,
  DEADLINE_FILE,
  fullyQualifiedImage,
  SIGNAL_UNIQUE_ID,
  SIGNALLED_MARKER,
  shellQuote,
  WORK_DIR,
} from './shell.ts';

export { DEADLINE_FILE };

/**
 * The bootstrap (docs/facts.md §2.2, 2.3) is a shell program in lib/aws/bootstrap/sh: main.sh, helpers.sh,
 * one file per group of steps in steps/, and the programs it installs on the host in host/. This
 * module only renders its settings from the lab configuration (settings.env) and assembles the
 * folder that ships as an S3 asset; the user-data launcher unpacks it and runs `bash main.sh`.
 */

/** The shell sources, found beside this module (from the repository root, CI, or a test). */
export const BOOTSTRAP_SOURCES = fileURLToPath(new URL('./sh/', import.meta.url));

/** K3s flags (docs/facts.md §2.2): a kubeconfig kubectl can read without sudo, no bundled Traefik. */
export const K3S_EXEC = '--write-kubeconfig-mode 644 --disable traefik';

/**
 * Node labels every host of the LLM-gateway lab registers with (`--node-label`): its role, which
 * the charts' node selectors use (NODE_ROLE_LABEL of lib/config/placement.ts; the shell steps use
 * the same literal through settings.env), and its host name among the cluster's hosts, which the
 * bootstrap finds each node by.
 */
export { NODE_ROLE_LABEL };
export const HOST_LABEL = 'llm-gateway-lab/host';

/** `--node-label` flags of one host. */
export function nodeLabelFlags(host: string, role: NodeRole): string {
  return `--node-label ${NODE_ROLE_LABEL}=${role} --node-label ${HOST_LABEL}=${host}`;
}

/**
 * Where the server keeps the agent token it read from Secrets Manager (root only): K3s reads it
 * with `--agent-token-file`, "File containing the agent secret", the shared secret that joins
 * agents but not servers (k3s-io/k3s pkg/cli/cmds/server.go, ServerFlags: agent-token,
 * agent-token-file / K3S_AGENT_TOKEN_FILE).
 */
export const AGENT_TOKEN_FILE = `${WORK_DIR}/agent-token`;

/** Results prefix of the agents under the stack's: `agents/<host>/`. */
export const AGENTS_RESULTS_DIR = 'agents';
/**
 * A GPU agent reports its model cache at `<stack>/agents/<host>/model-cache/<server instance id>`:
 * keyed by the server, so that a new server never reads a report meant for an earlier one.
 */
export const MODEL_CACHE_REPORT_DIR = 'model-cache';

/** The K3s flags of the server: the common ones, its labels, and the agent token when agents join. */
export function serverK3sExec(config: LabConfig): string {
  const flags = [K3S_EXEC, nodeLabelFlags(SERVER_HOST, 'gpu')];
  if (config.cluster.agents.length > 0) flags.push(`--agent-token-file ${AGENT_TOKEN_FILE}`);
  return flags.join(' ');
}

/** The ShareGPT file of vLLM's benchmark documentation (docs/facts.md §3.8). */
export const SHAREGPT_URL =
  'https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json';

/**
 * Helm release installed (checksum-verified) only when prerequisites.json lists a Helm chart, which
 * the ai-gateway arm does. UNCONFIRMED here: the release exists on get.helm.sh (not fetched).
 */
export const HELM_VERSION = 'v3.19.0';
export const HELM_PATH = '/usr/local/bin/helm';

/** Uploads RESULTS_HOST_PATH to the results bucket; installed by step 1, run by timers and `lab results`. */
export const RESULTS_SYNC_SCRIPT = '/usr/local/sbin/lab-sync-results';
/**
 * The S3 and Secrets Manager calls of every host (sh/host/lab-aws.sh): signed by curl with the
 * instance role's keys, so no host needs the AWS CLI (docs/facts.md §2.5).
 */
export const AWS_HELPER_SCRIPT = '/usr/local/sbin/lab-aws';
/** Where lab-aws records what each results sync uploaded (size and time per file). */
export const S3_SYNC_STATE_DIR = `${WORK_DIR}/s3-sync`;
/**
 * Where lab-aws keeps the instance role's keys between calls (tmpfs, root-only: mode 700, the file
 * 600), until shortly before they expire (docs/facts.md §2.9).
 */
export const AWS_KEYS_DIR = '/run/lab-aws';
/** Tries of one AWS request answered by a 5xx, a 429 or nothing, the pause unit between them, and each try's limit. */
export const AWS_ATTEMPTS = 5;
export const AWS_RETRY_SECONDS = 5;
export const AWS_MAX_SECONDS = 300;
/** Uploads the bootstrap log to LOG_OBJECT every LOG_UPLOAD_MINUTES. */
export const LOG_UPLOAD_SCRIPT = '/usr/local/sbin/lab-upload-log';
/** The cost guard's action at the deadline: upload, then shut down (and so terminate). */
export const DEADLINE_SCRIPT = '/usr/local/sbin/lab-deadline';

/**
 * With `runner.terminateWhenDone`: run every minute by a systemd timer; once status.json says the
 * study finished or failed, it uploads the results and shuts the host down (which terminates it).
 */
export const TERMINATE_WHEN_DONE_SCRIPT = '/usr/local/sbin/lab-terminate-when-done';
/** The systemd timer (and service) that runs TERMINATE_WHEN_DONE_SCRIPT. */
export const TERMINATE_WHEN_DONE_UNIT = 'lab-terminate-when-done';

/** Created by the last step once SUCCESS reached the WaitCondition: the testbed is ready. */
export const READY_MARKER = `${WORK_DIR}/ready`;

/** K3s writes it with mode 644 (K3S_EXEC): every kubectl on the host, and `lab run`, use it. */
export const KUBECONFIG_PATH = '/etc/rancher/k3s/k3s.yaml';

/**
 * The containerd config K3s generates (k3s-io/k3s pkg/agent/config/config.go, `get`:
 * `<data-dir>/agent/etc/containerd/config.toml`, data dir /var/lib/rancher/k3s for root).
 */
export const CONTAINERD_CONFIG = '/var/lib/rancher/k3s/agent/etc/containerd/config.toml';

/** The instance metadata service (IMDSv2: every read needs a session token). */
export const IMDS_URL = 'http://169.254.169.254/latest';

/** The bootstrap log's key under the stack's prefix of the results bucket. */
export const LOG_OBJECT = 'host/bootstrap.log';
/** How often the log reaches S3 while the host runs. */
export const LOG_UPLOAD_MINUTES = 2;

/** Installed packages held at their versions: the driver, its libraries and CUDA. */
export const HELD_PACKAGES_PATTERN = '^(nvidia|libnvidia|cuda)';

/** Deliveries of a WaitCondition signal before giving up, and the pause between them. */
export const SIGNAL_ATTEMPTS = 5;
export const SIGNAL_RETRY_SECONDS = 10;

/** One step: its bash function, the title its marker shows, and its time budget. */
export interface BootstrapStep {
  readonly name: ServerStepName | NetworkStepName | AgentStepName;
  readonly title: string;
  readonly budgetSeconds: number;
}

/** Lifetime in whole minutes (at least one). */
export function lifetimeMinutes(config: LabConfig): number {
  return Math.max(1, Math.round(config.instance.maxLifetimeHours * 60));
}

/** The StatefulSets whose replicas the bootstrap waits for: the standard set, plus llm-d's when enabled. */
export function replicaSets(config: LabConfig): string[] {
  // The standard set of every replica pair (`study.parallelism: 2` adds `qwen3-b`).
  const sets = studyPairs(config).map((pair) => replicaSetName(config, 'standard', pair));
  if (config.study.optionalArms.includes('llmd-precise')) sets.push(replicaSetName(config, 'kv-events'));
  return sets;
}

/** Host path of the ShareGPT file: pods see the shared cache at /models, the host at MODEL_CACHE_HOST_PATH. */
export function sharegptHostPath(config: LabConfig): string {
  const inPod = config.benchmark.sharegptPath;
  const prefix = `${MODEL_CACHE_MOUNT}/`;
  if (!inPod.startsWith(prefix)) {
    throw new Error(
      `benchmark.sharegptPath must lie in the shared cache ${prefix} (the only host folder the benchmark pods mount), got ${inPod}`,
    );
  }
  return `${MODEL_CACHE_HOST_PATH}/${inPod.slice(prefix.length)}`;
}

function stepTitles(config: LabConfig): Record<ServerStepName, string> {
  const minutes = lifetimeMinutes(config);
  const whenDone = config.runner.terminateWhenDone
    ? '; terminate when the study is done (runner.terminateWhenDone)'
    : '';
  const sets = replicaSets(config);
  const sharegpt = config.study.sharegptControl ? ' and the ShareGPT file' : '';
  return {
    arm_cost_guard: `arm the cost guard: shut down in ${minutes} min (instance.maxLifetimeHours ${config.instance.maxLifetimeHours}), results to S3${whenDone}`,
    hold_os_updates: 'hold OS updates: apt timers off, NVIDIA/CUDA packages held, apt/dpkg idle',
    preflight: 'preflight: tools, manifests folder, prerequisites resolve',
    check_gpus: `check the GPUs: nvidia-smi lists ${config.instance.gpus} (instance.gpus)`,
    check_container_runtime: 'check nvidia-container-runtime (K3s needs it for the nvidia runtime)',
    install_k3s: `install K3s ${config.k3s.version}, check its containerd has the nvidia runtime and RuntimeClass ${NVIDIA_RUNTIME_CLASS}`,
    prefetch: `pre-fetch ${config.model.name}${sharegpt} into the shared cache; pull images in parallel`,
    [WAIT_FOR_AGENTS]: `wait for the K3s agents (${agentNodes(config)
      .map((n) => `${n.name} ${n.role}`)
      .join(', ')}) to be Ready, each GPU agent with its model cache`,
    apply_prerequisites:
      'apply the prerequisites of prerequisites.json in order, waiting for their CRDs and Deployments',
    apply_charts:
      'apply the lab charts (NN-*.yaml) in file-name order, not jobs/, with their after-apply steps',
    wait_for_device_plugin: `wait for the device plugin: ${gpuNodesText(config)} allocatable nvidia.com/gpu`,
    wait_for_replicas: `wait for ${sets.length * config.vllm.replicas} vLLM replica(s) (${sets.join(', ')}) to be Ready and serve /v1/models`,
    record_gpu_uuids: 'record the GPU UUID of every replica and check they are distinct',
    signal_success: 'signal SUCCESS to the WaitCondition',
  };
}

/**
 * The steps in order. The model is pre-fetched after K3s (the download runs in the vLLM image,
 * through K3s's containerd) and before anything is applied, so no replica ever starts against an
 * empty cache and two replicas never download into it at once.
 */
export function bootstrapSteps(config: LabConfig): BootstrapStep[] {
  const titles = stepTitles(config);
  const withAgents = config.cluster.agents.length > 0;
  const budgets = serverStepBudgetSeconds(config.instance.readyTimeoutMinutes, withAgents);
  return serverStepNames(withAgents).map((name) => ({
    name,
    title: titles[name],
    budgetSeconds: budgets[name] ?? 0,
  }));
}

/** "4 on the server" or "4 on the server, 1 on gpu-1, 1 on gpu-2". */
function gpuNodesText(config: LabConfig): string {
  const agents = gpuAgents(config).map((n) => `${n.gpus} on ${n.name}`);
  return [`${config.instance.gpus}${agents.length > 0 ? ' on the server' : ''}`, ...agents].join(', ');
}

function gpuAgents(config: LabConfig): ClusterNode[] {
  return agentNodes(config).filter((n) => n.role === 'gpu');
}

export const q = shellQuote;
export const assign = (name: string, value: string | number) =>
  `${name}=${typeof value === 'number' ? String(value) : q(value)}`;
export const array = (name: string, values: readonly (string | number)[]) =>
  `${name}=(${values.map((v) => (typeof v === 'number' ? String(v) : q(v))).join(' ')})`;

/** Lines of settings.env every lab's bootstrap reads: host paths, the steps, the signal, the uploads. */
export function commonSettings(
  steps: readonly { name: string; title: string; budgetSeconds: number }[],
  host: {
    terminateWhenDone: boolean;
    lifetimeMinutes: number;
    resultsSubdir: string;
    /** Launcher variables this host needs beyond BOOTSTRAP_ENVIRONMENT (an agent's server URL...). */
    environment?: readonly string[];
  },
): string[] {
  return [
    '# shellcheck shell=bash disable=SC2034',
    '# Settings of the lab bootstrap, rendered from the lab configuration by lib/aws/bootstrap/bootstrap.ts.',
    '',
    '# --- host paths',
    assign('LOG_FILE', BOOTSTRAP_LOG),
    assign('WORK_DIR', WORK_DIR),
    assign('SIGNALLED_MARKER', SIGNALLED_MARKER),
    assign('READY_MARKER', READY_MARKER),
    assign('DEADLINE_FILE', DEADLINE_FILE),
    assign('HOST_ENV_FILE', `${WORK_DIR}/host.env`),
    assign('SYNC_SCRIPT', RESULTS_SYNC_SCRIPT),
    assign('AWS_HELPER', AWS_HELPER_SCRIPT),
    assign('S3_SYNC_STATE_DIR', S3_SYNC_STATE_DIR),
    assign('AWS_KEYS_DIR', AWS_KEYS_DIR),
    assign('LOG_UPLOAD_SCRIPT', LOG_UPLOAD_SCRIPT),
    assign('DEADLINE_SCRIPT', DEADLINE_SCRIPT),
    assign('DONE_SCRIPT', TERMINATE_WHEN_DONE_SCRIPT),
    assign('SYSTEMD_DIR', '/etc/systemd/system'),
    assign('APT_CONF_DIR', '/etc/apt/apt.conf.d'),
    assign('APT_SOURCES_DIR', '/etc/apt/sources.list.d'),
    assign('KEYRINGS_DIR', '/usr/share/keyrings'),
    array('DPKG_LOCKS', ['/var/lib/dpkg/lock-frontend', '/var/lib/dpkg/lock', '/var/lib/apt/lists/lock']),
    assign('KUBECONFIG', KUBECONFIG_PATH),
    assign('CONTAINERD_CONFIG', CONTAINERD_CONFIG),
    assign('HELM', HELM_PATH),
    assign('RESULTS_DIR', RESULTS_HOST_PATH),
    assign('STUDIES_DIR', STUDIES_DIR),
    assign('STATUS_FILE', `${RESULTS_HOST_PATH}/${STATUS_FILE}`),
    assign('HOST_FILE', `${RESULTS_HOST_PATH}/${HOST_FILE}`),
    assign('IMDS', IMDS_URL),
    '',
    '# --- the steps: bash function, marker title, budget in seconds (lib/facts/budgets.ts)',
    array(
      'STEP_NAMES',
      steps.map((s) => s.name),
    ),
    array(
      'STEP_TITLES',
      steps.map((s) => s.title),
    ),
    array(
      'STEP_BUDGETS',
      steps.map((s) => s.budgetSeconds),
    ),
    assign('WAIT_INTERVAL_SECONDS', 5),
    '',
    '# --- the WaitCondition and the uploads',
    array('REQUIRED_ENVIRONMENT', [...BOOTSTRAP_ENVIRONMENT, ...(host.environment ?? [])]),
    assign('SIGNAL_UNIQUE_ID', SIGNAL_UNIQUE_ID),
    assign('SIGNAL_ATTEMPTS', SIGNAL_ATTEMPTS),
    assign('SIGNAL_RETRY_SECONDS', SIGNAL_RETRY_SECONDS),
    assign('AWS_ATTEMPTS', AWS_ATTEMPTS),
    assign('AWS_RETRY_SECONDS', AWS_RETRY_SECONDS),
    assign('AWS_MAX_SECONDS', AWS_MAX_SECONDS),
    assign('LOG_OBJECT', LOG_OBJECT),
    assign('LOG_UPLOAD_MINUTES', LOG_UPLOAD_MINUTES),
    // Under the stack's prefix: '' for the GPU host, '<cell>/' for a network-lab cell.
    assign('RESULTS_SUBDIR', host.resultsSubdir),
    assign('TERMINATE_WHEN_DONE', host.terminateWhenDone ? 1 : 0),
    assign('LIFETIME_MINUTES', host.lifetimeMinutes),
    assign('HELM_VERSION', HELM_VERSION),
    // Placeholders of Helm values only the host can fill (lib/aws/bootstrap/sh/steps/07-apply.sh).
    assign('NODE_IP_PLACEHOLDER', NODE_IP_PLACEHOLDER),
    '',
  ];
}

/** settings.env: every value the shell program reads from the configuration, as bash assignments. */
export function renderSettings(config: LabConfig): string {
  const steps = bootstrapSteps(config);
  const agents = agentNodes(config);
  return [
    ...commonSettings(steps, {
      terminateWhenDone: config.runner.terminateWhenDone,
      lifetimeMinutes: lifetimeMinutes(config),
      resultsSubdir: '',
      environment: agents.length > 0 ? [AGENT_TOKEN_SECRET_VARIABLE] : [],
    }),
    '# --- the lab configuration',
    assign('MODEL_CACHE', MODEL_CACHE_HOST_PATH),
    assign('SHAREGPT_FILE', sharegptSetting(config)),
    assign('INSTANCE_TYPE', config.instance.type),
    assign('EXPECTED_GPUS', config.instance.gpus),
    assign('AMI_PARAMETER', config.instance.amiParameter),
    assign('HELD_PACKAGES_PATTERN', HELD_PACKAGES_PATTERN),
    assign('K3S_VERSION', config.k3s.version),
    assign('K3S_EXEC', serverK3sExec(config)),
    assign('RUNTIME_CLASS', NVIDIA_RUNTIME_CLASS),
    assign('NAMESPACE', config.namespace),
    assign('MODEL_NAME', config.model.name),
    assign('SERVED_MODEL_NAME', config.model.servedName),
    assign('VLLM_IMAGE', config.vllm.image),
    assign('VLLM_IMAGE_REF', fullyQualifiedImage(config.vllm.image)),
    ...routerWheelhouseSettings(config),
    assign('VLLM_PORT', VLLM_PORT),
    assign('REPLICAS', config.vllm.replicas),
    array('REPLICA_SETS', replicaSets(config)),
    assign('MODEL_CACHE_MOUNT', MODEL_CACHE_MOUNT),
    assign('SHAREGPT_URL', SHAREGPT_URL),
    '',
    '# --- the K3s cluster: this host is the server; its agents (none for the one-host lab)',
    ...clusterSettings(SERVER_HOST),
    array(
      'AGENT_HOSTS',
      agents.map((n) => n.name),
    ),
    array(
      'AGENT_GPUS',
      agents.map((n) => n.gpus),
    ),
    assign('AGENT_TOKEN_FILE', AGENT_TOKEN_FILE),
    '',
  ].join('\n');
}

/** The launcher variable holding the agent token's secret ARN (server and agents). */
export const AGENT_TOKEN_SECRET_VARIABLE = 'LAB_AGENT_TOKEN_SECRET';

/** Settings every host of the cluster shares: its name, the labels, where agents report. */
export function clusterSettings(host: string): string[] {
  return [
    assign('HOST_NAME', host),
    assign('HOST_LABEL', HOST_LABEL),
    assign('NODE_ROLE_LABEL', NODE_ROLE_LABEL),
    assign('AGENTS_RESULTS_DIR', AGENTS_RESULTS_DIR),
    assign('MODEL_CACHE_REPORT_DIR', MODEL_CACHE_REPORT_DIR),
  ];
}

/** The ShareGPT file's host path, or '' when the study runs no ShareGPT control. */
/**
 * The router wheelhouse (steps/06-prefetch.sh stage_router_wheelhouse), staged in the router's own
 * image on every host a router may run on: the server and each agent (front ends go to a CPU node
 * when there is one, lib/config/placement.ts).
 */
export function routerWheelhouseSettings(config: LabConfig): string[] {
  return [
    assign('ROUTER_IMAGE_REF', fullyQualifiedImage(config.router.image)),
    assign('ROUTER_VERSION', config.router.version),
    assign('ROUTER_WHEELHOUSE', routerWheelhouse(config.router.version)),
  ];
}

export function sharegptSetting(config: LabConfig): string {
  return config.study.sharegptControl ? sharegptHostPath(config) : '';
}

/**
 * Writes the bootstrap folder into `dir`: the shell sources and settings.env. `settings` lets a
 * test move host paths into a sandbox; the lab ships `renderSettings(config)`.
 */
export function writeBootstrapFolder(
  config: LabConfig,
  dir: string,
  settings = renderSettings(config),
): void {
  mkdirSync(dir, { recursive: true });
  cpSync(BOOTSTRAP_SOURCES, dir, { recursive: true });
  writeFileSync(join(dir, 'settings.env'), settings);
}
