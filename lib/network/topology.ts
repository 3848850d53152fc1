import type { MeshMode, NetworkCell, NetworkConfig } from '../config/network.ts';
import type { LabConfig } from '../config/schema.ts';

/**
 * The names, ports and labels of one network-lab cell (docs/facts.md §N2, N3): what the charts
 * create, the runner addresses and `lab check` looks for. Pure; no chart or cluster here.
 */

/** Namespace of the out-of-mesh arms (never labelled for Istio). */
export const PLAIN_NAMESPACE = 'plain';
/** Namespace of the sidecar/ambient arms (labelled for Istio on cells whose mesh is not none). */
export const MESH_NAMESPACE = 'mesh';
/**
 * A second mesh namespace, labelled like `mesh` but holding no PeerAuthentication at all: its
 * server runs under the mesh default, PERMISSIVE (E2's "no PeerAuthentication" row; Istio
 * `ComposePeerAuthentication` starts from PERMISSIVE, docs/facts.md §N2). Kept apart from `mesh`,
 * whose namespace-wide STRICT would otherwise apply.
 */
export const MESH_DEFAULT_NAMESPACE = 'mesh-default';
/** The namespaces labelled for the cell's mesh (on cells whose mesh is not none). */
export const MESH_NAMESPACES = [MESH_NAMESPACE, MESH_DEFAULT_NAMESPACE] as const;

/** fortio's own defaults (fortio v1.75.2 cli/fortio_main.go: -http-port 8080; fnet.DefaultGRPCPort "8079"). */
export const FORTIO_HTTP_PORT = 8080;
export const FORTIO_GRPC_PORT = 8079;
/**
 * E4's second container port: the same fortio server binary and flags in a second container of the
 * same pod (a fortio server has one -http-port). Not 8081 (fortio's -redirect-port default) or 8078
 * (its tcp/udp echo default).
 */
export const FORTIO_L4_PORT = 8082;

/** Service port names: Istio picks the protocol from the `http-`/`tcp-` prefix (E4). */
export const HTTP_PORT_NAME = 'http-echo';
export const GRPC_PORT_NAME = 'grpc-ping';
export const TCP_PORT_NAME = 'tcp-echo';

/**
 * The fortio servers of a cell. `fortio` runs on every cell (plain, and mesh and mesh-default on
 * mesh cells); the mesh namespace adds one under a port-level PERMISSIVE exception (E2's
 * port-exception row, E3 mTLS-off arm, E8) and one behind the AuthorizationPolicy (E2
 * service-account rows), so the sidecar+mTLS arms' server carries no policy the plain arm lacks.
 */
export const FORTIO_SERVER = 'fortio';
export const FORTIO_PERMISSIVE_SERVER = 'fortio-permissive';
export const FORTIO_AUTHZ_SERVER = 'fortio-authz';

/** Service accounts of the mesh clients (E2): `good` is allowed by the AuthorizationPolicy, `bad` is not. */
export const GOOD_SERVICE_ACCOUNT = 'good';
export const BAD_SERVICE_ACCOUNT = 'bad';

/** The principal the AuthorizationPolicy allows (docs/facts.md §N2). */
export function allowedPrincipal(): string {
  return `cluster.local/ns/${MESH_NAMESPACE}/sa/${GOOD_SERVICE_ACCOUNT}`;
}

/** The one-replica backend every E9 Service selects (one endpoint each). */
export const SCALE_BACKEND = 'scale-backend';
/** Port the scale backend listens on and every E9 Service targets. */
export const SCALE_BACKEND_PORT = FORTIO_HTTP_PORT;
/** Label every runner-created E9 Service carries, so a step can count and delete them. */
export const SCALE_SERVICE_LABEL = 'network-lab/service-scale';

/** The E7 server and its port (the probe's default). */
export const SSE_SERVER = 'sse-server';
export const SSE_PORT = 8080;

/** The cell's study runner: its Job, ServiceAccount, Roles and ConfigMap (in `plain`). */
export const NETWORK_RUNNER_NAME = 'network-study-runner';

/** The privileged host-network probe (rule counts, conntrack by hand); only with `network.hostProbe`. */
export const HOST_PROBE = 'host-probe';

/**
 * Label on every object and node of a cell: the charts' objects carry it, K3s puts it on the node
 * (`--node-label`, lib/network/k3s.ts) and every pod selects the node by it.
 */
export const CELL_LABEL = 'network-lab/cell';

/** Where the Istio charts install (lib/prereqs `networkPrerequisites`), ztunnel's DaemonSet included. */
export const ISTIO_SYSTEM_NAMESPACE = 'istio-system';
/**
 * ztunnel's pods (istio `manifests/charts/ztunnel` DaemonSet: selector and pod label `app: ztunnel`;
 * read at branch release-1.31, not at a 1.31.1 tag, so a cell without such a pod leaves the ambient
 * runs "mTLS unproven" with the selector named; docs/facts.md §N3). Its Prometheus endpoint is :15020 (`/stats/prometheus` or `/metrics`, istio/ztunnel
 * 1.31.0-rc.0 `src/metrics/server.rs`; `DEFAULT_STATS_PORT`, bound on every address).
 */
export const ZTUNNEL_POD_SELECTOR = 'app=ztunnel';

/** Label naming the encryption arm of a DestinationRule: `on` (ISTIO_MUTUAL) or `off` (DISABLE). */
export const MTLS_ARM_LABEL = 'network-lab/mtls';
export const MTLS_ARMS = { on: 'ISTIO_MUTUAL', off: 'DISABLE' } as const;
export type MtlsArm = keyof typeof MTLS_ARMS;

/** ConfigMap (in `plain`) describing the cell: what `lab check` and the runner read to know it. */
export const CELL_CONFIG_MAP = 'network-cell';
/** Keys of the cell ConfigMap. */
export const CELL_KEY = 'cell.json';
export const CILIUM_VALUES_KEY = 'cilium-values.yaml';

/** Istio's namespace labels (Istio 1.31: sidecar injection; ambient data plane). */
export const ISTIO_INJECTION_LABEL = 'istio-injection';
export const AMBIENT_LABEL = 'istio.io/dataplane-mode';

/** The labels the mesh namespace needs for the cell's mesh mode; none for `none`. */
export function meshNamespaceLabels(mode: MeshMode): Record<string, string> {
  if (mode === 'sidecar') return { [ISTIO_INJECTION_LABEL]: 'enabled' };
  if (mode === 'ambient') return { [AMBIENT_LABEL]: 'ambient' };
  return {};
}

/** A cell of the configuration by name, or an error naming the cells there are. */
export function cellByName(network: NetworkConfig, name: string): NetworkCell {
  const cell = network.cells.find((c) => c.name === name);
  if (!cell) {
    throw new Error(
      `no cell named "${name}" in network.cells (cells: ${network.cells.map((c) => c.name).join(', ')})`,
    );
  }
  return cell;
}

/** What `lab check` and the runner need to know about a cell, written into its ConfigMap. */
export interface CellDescription {
  readonly name: string;
  readonly datapath: NetworkCell['datapath'];
  readonly mesh: MeshMode;
  readonly podCidr: string;
  readonly serviceCidr: string;
  /** The smallest latency a run is expected to measure; fortio's -r must be a tenth of it. */
  readonly smallestExpectedLatencyMs: number;
  /** LB map entries the largest E9 step needs (Services x entries per Service). */
  readonly lbEntriesNeeded: number;
  /** Replicas of E9's backend: the endpoints behind every E9 Service. */
  readonly backendsPerService: number;
}

export function cellDescription(
  config: LabConfig,
  cell: NetworkCell,
  lbEntriesNeeded: number,
): CellDescription {
  const { network } = config;
  return {
    name: cell.name,
    datapath: cell.datapath,
    mesh: cell.mesh,
    podCidr: network.podCidr,
    serviceCidr: network.serviceCidr,
    smallestExpectedLatencyMs: network.experiments.smallestExpectedLatencyMs,
    lbEntriesNeeded,
    backendsPerService: network.experiments.serviceScale.backendsPerService,
  };
}

/** The Service behind a URL (`http://fortio.mesh.svc.cluster.local:8080/echo` -> fortio in mesh). */
export function serviceOfUrl(url: string, defaultNamespace: string): { service: string; namespace: string } {
  const host = url.replace(/^[a-z]+:\/\//i, '').split(/[:/]/)[0];
  const [service, namespace] = host.split('.');
  return { service, namespace: namespace ?? defaultNamespace };
}
