import type { ClusterNode } from '../../config/cluster.ts';
import type { LabConfig } from '../../config/schema.ts';
import {
  AGENT_STEP_NAMES,
  type AgentStepName,
  agentStepBudgetSeconds,
  GPU_AGENT_ONLY_STEPS,
} from '../../facts/budgets.ts';
import { MODEL_CACHE_HOST_PATH, MODEL_CACHE_MOUNT } from '../../study/topology.ts';
import {
  AGENT_TOKEN_FILE,
  AGENT_TOKEN_SECRET_VARIABLE,
  AGENTS_RESULTS_DIR,
  assign,
  type BootstrapStep,
  clusterSettings,
  commonSettings,
  HELD_PACKAGES_PATTERN,
  lifetimeMinutes,
  nodeLabelFlags,
  routerWheelhouseSettings,
  SHAREGPT_URL,
  sharegptSetting,
  writeBootstrapFolder,
} from './bootstrap.ts';
import { fullyQualifiedImage } from './shell.ts';

/**
 * The bootstrap of one K3s agent (issue 17): the same shell program as the server (main.sh,
 * helpers.sh, steps/), with the agent's steps and settings. A GPU agent checks its GPUs, joins,
 * fills its own model cache and reports it to the server; a CPU agent joins and stages the router
 * wheelhouse (front ends go to a CPU node when there is one).
 */

/** Launcher variables an agent needs: the server to join, the secret holding the token, the server's id. */
export const SERVER_URL_VARIABLE = 'LAB_SERVER_URL';
export const SERVER_INSTANCE_VARIABLE = 'LAB_SERVER_INSTANCE_ID';

/** The K3s server's supervisor and API port agents join on (K3s's default `--https-listen-port`). */
export const K3S_SERVER_PORT = 6443;

/**
 * The kubeconfig K3s writes for an agent's kubelet once the server accepted the token
 * (k3s-io/k3s pkg/agent/config/config.go, get: `<data-dir>/agent/kubelet.kubeconfig` after the
 * kubelet's client certificate came from the server). With it the agent can read its own Node.
 */
export const KUBELET_KUBECONFIG = '/var/lib/rancher/k3s/agent/kubelet.kubeconfig';

/**
 * The systemd unit get.k3s.io installs for an agent: `k3s-<command>` for any command but server
 * (k3s-io/k3s install.sh, setup_env: SYSTEM_NAME=k3s-${CMD_K3S}; K3S_URL makes the command agent).
 */
export const AGENT_SERVICE = 'k3s-agent';

/** Installed on every agent: ends it once its server has ended (sh/host/lab-follow-server.sh). */
export const FOLLOW_SERVER_SCRIPT = '/usr/local/sbin/lab-follow-server';

/**
 * Minutes in a row the server may not answer before an agent ends: longer than a K3s restart,
 * short next to an agent's hourly price (a g6.12xlarge agent costs about 0.4 USD in 5 minutes).
 */
export const SERVER_GONE_MINUTES = 5;

/** The agent's results prefix under the stack's: `agents/<host>/`. */
export function agentResultsSubdir(host: string): string {
  return `${AGENTS_RESULTS_DIR}/${host}/`;
}

/** The agent's steps: all of them on a GPU agent; no GPU check and no model cache on a CPU agent. */
export function agentStepNames(node: ClusterNode): AgentStepName[] {
  return AGENT_STEP_NAMES.filter((name) => node.role === 'gpu' || !GPU_AGENT_ONLY_STEPS.includes(name));
}

function agentStepTitles(config: LabConfig, node: ClusterNode): Record<AgentStepName, string> {
  const sharegpt = config.study.sharegptControl ? ' and the ShareGPT file' : '';
  return {
    arm_cost_guard: `arm the cost guard: shut down in ${lifetimeMinutes(config)} min (instance.maxLifetimeHours ${config.instance.maxLifetimeHours}), results to S3`,
    hold_os_updates: 'hold OS updates: apt timers off, NVIDIA/CUDA packages held, apt/dpkg idle',
    check_gpus: `check the GPUs: nvidia-smi lists ${node.gpus} (${node.instanceType})`,
    check_container_runtime: 'check nvidia-container-runtime (K3s needs it for the nvidia runtime)',
    join_cluster: `install K3s ${config.k3s.version} as an agent (${node.role} node ${node.name}) and join the server with the agent token`,
    prefetch:
      node.role === 'gpu'
        ? `pre-fetch ${config.model.name}${sharegpt} into this node's cache; pull images and stage the router wheelhouse in parallel`
        : `stage the vllm-router ${config.router.version} wheelhouse for the front ends this node may run`,
    report_model_cache: "report this node's model cache to the server, which places replicas only after it",
    signal_success: 'signal SUCCESS to the WaitCondition',
  };
}

/** The agent's steps with titles and budgets (lib/facts/budgets.ts). */
export function agentBootstrapSteps(config: LabConfig, node: ClusterNode): BootstrapStep[] {
  const titles = agentStepTitles(config, node);
  const budgets = agentStepBudgetSeconds(config.instance.readyTimeoutMinutes);
  return agentStepNames(node).map((name) => ({ name, title: titles[name], budgetSeconds: budgets[name] }));
}

/** The agent's settings.env. */
export function renderAgentSettings(config: LabConfig, node: ClusterNode): string {
  return [
    ...commonSettings(agentBootstrapSteps(config, node), {
      // The study's end is known on the server only: an agent stops at its lifetime deadline.
      terminateWhenDone: false,
      lifetimeMinutes: lifetimeMinutes(config),
      resultsSubdir: agentResultsSubdir(node.name),
      environment: [AGENT_TOKEN_SECRET_VARIABLE, SERVER_URL_VARIABLE, SERVER_INSTANCE_VARIABLE],
    }),
    '# --- the agent',
    ...clusterSettings(node.name),
    assign('NODE_ROLE', node.role),
    assign('INSTANCE_TYPE', node.instanceType),
    assign('EXPECTED_GPUS', node.gpus),
    assign('AMI_PARAMETER', config.instance.amiParameter),
    assign('HELD_PACKAGES_PATTERN', HELD_PACKAGES_PATTERN),
    assign('K3S_VERSION', config.k3s.version),
    assign('K3S_AGENT_EXEC', nodeLabelFlags(node.name, node.role)),
    assign('AGENT_TOKEN_FILE', AGENT_TOKEN_FILE),
    assign('AGENT_SERVICE', AGENT_SERVICE),
    assign('KUBELET_KUBECONFIG', KUBELET_KUBECONFIG),
    assign('FOLLOW_SERVER_SCRIPT', FOLLOW_SERVER_SCRIPT),
    assign('SERVER_GONE_MINUTES', SERVER_GONE_MINUTES),
    assign('MODEL_CACHE', MODEL_CACHE_HOST_PATH),
    assign('MODEL_CACHE_MOUNT', MODEL_CACHE_MOUNT),
    assign('SHAREGPT_FILE', sharegptSetting(config)),
    assign('SHAREGPT_URL', SHAREGPT_URL),
    assign('MODEL_NAME', config.model.name),
    assign('VLLM_IMAGE', config.vllm.image),
    assign('VLLM_IMAGE_REF', fullyQualifiedImage(config.vllm.image)),
    ...routerWheelhouseSettings(config),
    '',
  ].join('\n');
}

/** The agent's bootstrap folder: the shared shell sources and the agent's settings.env. */
export function writeAgentBootstrapFolder(
  config: LabConfig,
  node: ClusterNode,
  dir: string,
  settings = renderAgentSettings(config, node),
): void {
  writeBootstrapFolder(config, dir, settings);
}
