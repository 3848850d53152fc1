import type { ContainerRequests } from '../study/resources.ts';

/**
 * Requests of the network lab's containers (an 8-vCPU, 16 GiB cell). No CPU limit anywhere: a
 * throttled fortio would measure the CFS quota, not the datapath. Memory limits bound a runaway.
 */
export const NETWORK_REQUESTS = {
  /** A fortio server: one core keeps the fixed-rate arms far from saturation; the 100 MiB body needs room. */
  fortioServer: { cpu: '1', memory: '256Mi', memoryLimit: '1Gi' },
  /**
   * A server that only answers curls (E2's and E8's: fortio-authz, the mesh-default server) and
   * every server's second container (8082, E4's L4 arm alone): no CPU limit, so a load gets the
   * idle vCPUs; the request only has to schedule (five servers of 2 vCPUs did not fit a cell).
   */
  fortioLightServer: { cpu: '100m', memory: '128Mi', memoryLimit: '1Gi' },
  /** A fortio load client (16 connections). */
  fortioClient: { cpu: '1', memory: '256Mi', memoryLimit: '1Gi' },
  /**
   * A smoke study's fortio client: 2 s at 50 QPS (or a saturating run beside the mTLS curls only,
   * lib/network/study/smoke-schedule.ts), up to 3 at once beside the servers.
   */
  smokeFortioClient: { cpu: '250m', memory: '256Mi', memoryLimit: '1Gi' },
  /** The E9 backend: it only accepts connections. */
  scaleBackend: { cpu: '100m', memory: '64Mi', memoryLimit: '256Mi' },
  /** The SSE server and client and the service prober (lib/network/probes): Node, one socket or a few. */
  nodeProbe: { cpu: '100m', memory: '64Mi', memoryLimit: '256Mi' },
  /** The conntrack driver: thousands of loopback sockets at once. */
  conntrackDriver: { cpu: '500m', memory: '256Mi', memoryLimit: '512Mi' },
  /** The host probe: iptables-save, nft, ipvsadm, conntrack now and then. */
  hostProbe: { cpu: '100m', memory: '128Mi', memoryLimit: '512Mi' },
} as const satisfies Record<string, ContainerRequests>;
