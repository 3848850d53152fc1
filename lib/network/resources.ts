import type { ContainerRequests } from '../study/resources.ts';

/**
 * Requests of the network lab's containers (an 8-vCPU, 16 GiB cell). No CPU limit anywhere: a
 * throttled fortio would measure the CFS quota, not the datapath. Memory limits bound a runaway.
 */
export const NETWORK_REQUESTS = {
  /** A fortio server: one core keeps the fixed-rate arms far from saturation; the 100 MiB body needs room. */
  fortioServer: { cpu: '1', memory: '256Mi', memoryLimit: '1Gi' },
  /** A fortio load client (16 connections). */
  fortioClient: { cpu: '1', memory: '256Mi', memoryLimit: '1Gi' },
  /** The E9 backend: it only accepts connections. */
  scaleBackend: { cpu: '100m', memory: '64Mi', memoryLimit: '256Mi' },
  /** The SSE server and client and the service prober (lib/network/probes): Node, one socket or a few. */
  nodeProbe: { cpu: '100m', memory: '64Mi', memoryLimit: '256Mi' },
  /** The conntrack driver: thousands of loopback sockets at once. */
  conntrackDriver: { cpu: '500m', memory: '256Mi', memoryLimit: '512Mi' },
  /** The host probe: iptables-save, nft, ipvsadm, conntrack now and then. */
  hostProbe: { cpu: '100m', memory: '128Mi', memoryLimit: '512Mi' },
} as const satisfies Record<string, ContainerRequests>;
