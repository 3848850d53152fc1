import {
  BOOT_MARGIN_MINUTES,
  describeBaseBudgets,
  NETWORK_BASE_STEP_MINUTES,
  networkMinimumReadyTimeoutMinutes,
} from '../facts/budgets.ts';
import { LAB_VPC_CIDR, type NetworkConfig } from './network.ts';

/**
 * The network lab's rules that relate several settings (docs/facts.md §N2, N3, N7). Pure: each
 * problem names the setting to change, the values involved and what would be allowed. Like the
 * LLM-gateway rules they run when a field failed its own schema too, so every read is guarded.
 */

export interface NetworkProblem {
  readonly path: (string | number)[];
  readonly message: string;
}

/**
 * Kubernetes minors each pinned Istio release supports (Istio's support matrix: 1.31 supports
 * Kubernetes 1.32 to 1.36; docs/facts.md §N2). A version bump adds a line.
 */
export const ISTIO_KUBERNETES_SUPPORT: Readonly<Record<string, { min: number; max: number }>> = {
  '1.31': { min: 32, max: 36 },
};

/**
 * Cilium's LB map entries of a ClusterIP Service with one port and B endpoints (docs/facts.md §N2):
 * the frontend's slot 0, one slot per backend, and one wildcard entry per ClusterIP (`<ip>:0/ANY`
 * slot 0, shared by the address's ports; it drops traffic to ports the Service does not have):
 * B + 2. Read in cilium's BPF reconciler test map dumps (`SVC: ID=0 ADDR=<auto>/ANY SLOT=0 ...
 * ClusterIP+non-routable` beside `<auto>/TCP SLOT=0..B`), a stored version not identified as 1.20.2:
 * an estimate; the runner's count at each step decides.
 */
export function lbEntriesPerService(backendsPerService: number): number {
  return backendsPerService + 2;
}

export function networkProblems(network: NetworkConfig, k3sVersion: string): NetworkProblem[] {
  const problems: NetworkProblem[] = [];
  const cells = Array.isArray(network.cells) ? network.cells : [];
  const ciliumCells = cells.filter((c) => c?.datapath === 'cilium');
  const meshCells = cells.filter((c) => c?.mesh !== undefined && c.mesh !== 'none');

  // A cell's bootstrap steps share the WaitCondition's time; each is ended when its budget runs out.
  const ready = network.instance?.readyTimeoutMinutes;
  const minimum = networkMinimumReadyTimeoutMinutes();
  if (Number.isInteger(ready) && ready < minimum) {
    problems.push({
      path: ['network', 'instance', 'readyTimeoutMinutes'],
      message: `must be at least ${minimum}, got ${ready}: a cell's step budgets (minutes: ${describeBaseBudgets(NETWORK_BASE_STEP_MINUTES)}) and ${BOOT_MARGIN_MINUTES} minutes of boot must fit in the time CloudFormation waits for its ready signal`,
    });
  }

  const seen = new Set<string>();
  cells.forEach((cell, i) => {
    if (typeof cell?.name !== 'string') return;
    if (seen.has(cell.name))
      problems.push({
        path: ['network', 'cells', i, 'name'],
        message: `"${cell.name}" names two cells; each cell needs its own name`,
      });
    seen.add(cell.name);
  });

  // Pod and Service ranges must stay out of the VPC, or pod routes shadow node addresses.
  const podRange =
    ciliumCells.length > 0 && network.cilium?.ipam === 'cluster-pool'
      ? {
          path: ['network', 'cilium', 'clusterPoolCidr'],
          cidr: network.cilium.clusterPoolCidr,
          what: "Cilium's cluster-pool pod range",
        }
      : { path: ['network', 'podCidr'], cidr: network.podCidr, what: 'the pod range' };
  for (const range of [
    podRange,
    { path: ['network', 'serviceCidr'], cidr: network.serviceCidr, what: 'the Service range' },
  ]) {
    if (cidrsOverlap(range.cidr, LAB_VPC_CIDR)) {
      problems.push({
        path: range.path,
        message: `${range.what} ${range.cidr} overlaps the lab VPC ${LAB_VPC_CIDR}: pod routes would shadow node addresses; choose a range outside it (K3s uses 10.42.0.0/16 for pods, 10.43.0.0/16 for Services)`,
      });
    }
  }
  if (cidrsOverlap(network.podCidr, network.serviceCidr)) {
    problems.push({
      path: ['network', 'serviceCidr'],
      message: `${network.serviceCidr} overlaps network.podCidr ${network.podCidr}; K3s needs two separate ranges`,
    });
  }

  // Istio's CNI and sidecars on a Cilium cell (docs/facts.md §N2, Cilium values).
  if (ciliumCells.some((c) => c.mesh !== undefined && c.mesh !== 'none')) {
    const names = ciliumCells
      .filter((c) => c.mesh !== 'none')
      .map((c) => c.name)
      .join(', ');
    if (network.cilium?.socketLBHostNamespaceOnly !== true) {
      problems.push({
        path: ['network', 'cilium', 'socketLBHostNamespaceOnly'],
        message: `must be true when Istio runs on a Cilium cell (${names}): otherwise Cilium's socket load balancing rewrites connections before the sidecar sees them`,
      });
    }
    if (network.cilium?.cniExclusive !== false) {
      problems.push({
        path: ['network', 'cilium', 'cniExclusive'],
        message: `must be false when Istio runs on a Cilium cell (${names}): an exclusive Cilium CNI removes Istio's CNI configuration`,
      });
    }
  }

  // The K3s minor must be one the pinned Istio supports.
  if (meshCells.length > 0 && typeof network.istio?.version === 'string') {
    const istioMinor = network.istio.version.split('.').slice(0, 2).join('.');
    const support = ISTIO_KUBERNETES_SUPPORT[istioMinor];
    const k3sMinor = /^v1\.(\d+)\./.exec(k3sVersion)?.[1];
    if (!support) {
      problems.push({
        path: ['network', 'istio', 'version'],
        message: `Istio ${istioMinor}'s supported Kubernetes versions are not known to the lab; known: ${Object.keys(ISTIO_KUBERNETES_SUPPORT).join(', ')} (lib/config/network-rules.ts)`,
      });
    } else if (k3sMinor !== undefined && (Number(k3sMinor) < support.min || Number(k3sMinor) > support.max)) {
      problems.push({
        path: ['k3s', 'version'],
        message: `Istio ${network.istio.version} supports Kubernetes 1.${support.min} to 1.${support.max}, and cells ${meshCells.map((c) => c.name).join(', ')} run Istio; choose a K3s release in that range`,
      });
    }
  }

  // fortio's histogram must resolve the smallest latency, or percentiles become bucket positions.
  const resolution = network.fortio?.resolutionSeconds;
  const smallest = network.experiments?.smallestExpectedLatencyMs;
  if (typeof resolution === 'number' && typeof smallest === 'number' && resolution * 1000 > smallest / 10) {
    problems.push({
      path: ['network', 'fortio', 'resolutionSeconds'],
      message: `${resolution} s is coarser than a tenth of the smallest expected latency (network.experiments.smallestExpectedLatencyMs ${smallest} ms): percentiles would be bucket positions; use at most ${smallest / 10 / 1000} s`,
    });
  }

  const scale = network.experiments?.serviceScale;
  if (scale && Array.isArray(scale.steps)) {
    const steps = scale.steps;
    if (steps.some((n, i) => i > 0 && n <= steps[i - 1])) {
      problems.push({
        path: ['network', 'experiments', 'serviceScale', 'steps'],
        message: 'must increase strictly, e.g. [0, 100, 1000, 5000, 10000]',
      });
    }
    const lbMapMax = network.cilium?.lbMapMax;
    if (ciliumCells.length > 0 && Number.isInteger(scale.backendsPerService) && Number.isInteger(lbMapMax)) {
      const largest = Math.max(...steps);
      const perService = lbEntriesPerService(scale.backendsPerService);
      if (largest * perService > lbMapMax) {
        problems.push({
          path: ['network', 'experiments', 'serviceScale', 'steps'],
          message: `${largest.toLocaleString('en-US')} Services x ${perService} LB map entries per Service = ${(largest * perService).toLocaleString('en-US')} entries, above network.cilium.lbMapMax ${lbMapMax.toLocaleString('en-US')}: the map would fill; raise lbMapMax (sized before install) or lower the largest step`,
        });
      }
    }
  }
  return problems;
}

/** Valid but questionable choices, said before any money is spent. */
export function networkWarnings(network: NetworkConfig): string[] {
  const warnings: string[] = [];
  for (const cell of network.cells) {
    if (cell.datapath === 'ipvs') {
      warnings.push(
        `network.cells ${cell.name}: kube-proxy's ipvs mode is deprecated since Kubernetes 1.35 (it still works on 1.36 with the ip_vs modules, which the bootstrap checks)`,
      );
    }
  }
  const types = new Set(network.cells.map((c) => c.instanceType ?? network.instance.type));
  if (types.size > 1) {
    warnings.push(
      `network.cells: the cells run on different instance types (${[...types].join(', ')}): host differences will look like datapath differences; compare against each cell's calibration run`,
    );
  }
  return warnings;
}

/** Whether two IPv4 CIDRs share an address; false when either does not parse. */
export function cidrsOverlap(a: unknown, b: unknown): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  if (!x || !y) return false;
  const bits = Math.min(x.bits, y.bits);
  return prefix(x.address, bits) === prefix(y.address, bits);
}

function parseCidr(value: unknown): { address: number; bits: number } | undefined {
  if (typeof value !== 'string') return undefined;
  const match = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(value);
  if (!match) return undefined;
  const octets = match.slice(1, 5).map(Number);
  const bits = Number(match[5]);
  if (octets.some((o) => o > 255) || bits > 32) return undefined;
  return { address: octets.reduce((acc, o) => acc * 256 + o, 0), bits };
}

function prefix(address: number, bits: number): number {
  return bits === 0 ? 0 : Math.floor(address / 2 ** (32 - bits));
}
