import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import { NETWORK_STEP_NAMES, type NetworkStepName, networkStepBudgetSeconds } from '../../facts/budgets.ts';
import { k3sServerFlags } from '../../network/k3s.ts';
import { MESH_NAMESPACES } from '../../network/topology.ts';
import {
  array,
  assign,
  type BootstrapStep,
  commonSettings,
  HELD_PACKAGES_PATTERN,
  K3S_EXEC,
  writeBootstrapFolder,
} from './bootstrap.ts';

/**
 * The bootstrap of one network-lab cell (docs/facts.md §N1, N2): the same shell program as the GPU
 * host (main.sh, helpers.sh, steps/), with the network lab's steps and the cell's settings.
 */

/** nftables mode needs kernel 5.13 or newer (docs/facts.md §N2; Kubernetes' nftables proxier). */
export const NFTABLES_MIN_KERNEL = '5.13';
/** Modules kube-proxy's ipvs mode needs loaded (docs/facts.md §N2: `modprobe ip_vs` and friends). */
export const IPVS_MODULES = ['ip_vs', 'ip_vs_rr', 'ip_vs_wrr', 'ip_vs_sh', 'nf_conntrack'] as const;
/**
 * Where containerd looks for CNI configuration and plugins once flannel is off: Cilium writes
 * there (docs/facts.md §N2, UNCONFIRMED for K3s 1.36's containerd template, hence checked).
 */
export const CNI_CONF_DIR = '/etc/cni/net.d';
export const CNI_BIN_DIR = '/opt/cni/bin';
export const ISTIO_NAMESPACE = 'istio-system';
/** Seconds a datapath or injector proof waits for its evidence before failing the step. */
export const PROOF_WAIT_SECONDS = 120;

/** The cell's K3s flags: the bootstrap's common ones, then the cell's datapath flags. */
export function cellK3sExec(config: LabConfig, cell: NetworkCell): string {
  return [K3S_EXEC, ...k3sServerFlags(config.network, cell)].join(' ');
}

/** The steps of a cell, in order: the mesh check only on cells with Istio. */
export function cellStepNames(cell: NetworkCell): NetworkStepName[] {
  return NETWORK_STEP_NAMES.filter((name) => name !== 'verify_mesh_injector' || cell.mesh !== 'none');
}

function proofOf(cell: NetworkCell): string {
  if (cell.datapath === 'cilium') {
    return 'cilium-dbg status shows KubeProxyReplacement True; no KUBE-SVC chain in iptables-save, no kube-proxy nft table';
  }
  if (cell.datapath === 'iptables') return "kube-proxy's KUBE-SERVICES chain in iptables-save";
  if (cell.datapath === 'nftables') return "kube-proxy's nft table ip kube-proxy";
  return "kube-proxy's kube-ipvs0 interface and virtual services in /proc/net/ip_vs";
}

function preflightTitle(cell: NetworkCell): string {
  if (cell.datapath === 'nftables') return `datapath preflight: kernel >= ${NFTABLES_MIN_KERNEL} (nftables)`;
  if (cell.datapath === 'ipvs') return `datapath preflight: modprobe ${IPVS_MODULES.join(' ')} (ipvs)`;
  if (cell.datapath === 'cilium')
    return 'datapath preflight: nothing before K3s (Cilium: CNI dirs checked after K3s starts)';
  return 'datapath preflight: nothing to check for iptables';
}

function cellStepTitles(config: LabConfig, cell: NetworkCell): Record<NetworkStepName, string> {
  const { instance } = config.network;
  const minutes = Math.max(1, Math.round(instance.maxLifetimeHours * 60));
  const cni = cell.datapath === 'cilium' ? `, containerd's CNI dirs ${CNI_CONF_DIR} and ${CNI_BIN_DIR}` : '';
  return {
    arm_cost_guard: `arm the cost guard: shut down in ${minutes} min (network.instance.maxLifetimeHours ${instance.maxLifetimeHours}), results to S3`,
    hold_os_updates: 'hold OS updates: apt timers off, apt/dpkg idle',
    preflight: 'preflight: tools, manifests folder, prerequisites resolve',
    preflight_datapath: preflightTitle(cell),
    install_cell_k3s: `install K3s ${config.k3s.version} for cell ${cell.name} (${cell.datapath})${cni}`,
    pull_cell_images: "pull the cell's images",
    apply_prerequisites: `install the cell's Helm prerequisites (prerequisites.json) with their values`,
    apply_charts: "apply the cell's charts (NN-*.yaml) in file-name order, not jobs/",
    verify_datapath: `prove the datapath (${cell.datapath}): ${proofOf(cell)}`,
    verify_mesh_injector: `istiod's sidecar injector answers for namespaces ${MESH_NAMESPACES.join(' and ')}`,
    signal_success: 'signal SUCCESS to the WaitCondition',
  };
}

/** The cell's steps with titles and budgets (lib/facts/budgets.ts). */
export function cellBootstrapSteps(config: LabConfig, cell: NetworkCell): BootstrapStep[] {
  const titles = cellStepTitles(config, cell);
  const budgets = networkStepBudgetSeconds(config.network.instance.readyTimeoutMinutes);
  return cellStepNames(cell).map((name) => ({
    name,
    title: titles[name],
    budgetSeconds: budgets[name],
  }));
}

/** A network-lab cell's lifetime in whole minutes (at least one): network.instance.maxLifetimeHours. */
export function cellLifetimeMinutes(config: LabConfig): number {
  return Math.max(1, Math.round(config.network.instance.maxLifetimeHours * 60));
}

/** The cell's settings.env. */
export function renderCellSettings(config: LabConfig, cell: NetworkCell): string {
  const { instance } = config.network;
  return [
    ...commonSettings(cellBootstrapSteps(config, cell), {
      terminateWhenDone: config.runner.terminateWhenDone,
      lifetimeMinutes: cellLifetimeMinutes(config),
      resultsSubdir: `${cell.name}/`,
    }),
    '# --- the cell',
    assign('CELL_NAME', cell.name),
    assign('DATAPATH', cell.datapath),
    assign('MESH_MODE', cell.mesh),
    assign('INSTANCE_TYPE', cell.instanceType ?? instance.type),
    assign('AMI_PARAMETER', instance.amiParameter),
    assign('HELD_PACKAGES_PATTERN', HELD_PACKAGES_PATTERN),
    assign('K3S_VERSION', config.k3s.version),
    assign('K3S_EXEC', cellK3sExec(config, cell)),
    assign('NFTABLES_MIN_KERNEL', NFTABLES_MIN_KERNEL),
    array('IPVS_MODULES', IPVS_MODULES),
    assign('IPVS_PROC', '/proc/net/ip_vs'),
    // How long a proof waits for what it looks for (rules appear once kube-proxy or Cilium synced).
    assign('PROOF_WAIT_SECONDS', PROOF_WAIT_SECONDS),
    assign('CNI_CONF_DIR', CNI_CONF_DIR),
    assign('CNI_BIN_DIR', CNI_BIN_DIR),
    assign('ISTIO_NAMESPACE', ISTIO_NAMESPACE),
    array('MESH_NAMESPACES', MESH_NAMESPACES),
    '',
  ].join('\n');
}

/** The cell's bootstrap folder: the shared shell sources and the cell's settings.env. */
export function writeCellBootstrapFolder(
  config: LabConfig,
  cell: NetworkCell,
  dir: string,
  settings = renderCellSettings(config, cell),
): void {
  writeBootstrapFolder(config, dir, settings);
}
