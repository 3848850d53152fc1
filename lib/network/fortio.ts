import type { NetworkConfig } from '../config/network.ts';
import { FORTIO_GRPC_PORT, FORTIO_HTTP_PORT, FORTIO_L4_PORT } from './topology.ts';

/**
 * fortio command lines (fortio v1.75.2, cli/fortio_main.go flags). Pure: the charts render them,
 * the runner will reuse them, the tests read them back.
 */

/** Kilobytes fortio's echo handler may generate (`-maxpayloadsizekb`), enough for E6's download. */
export function maxPayloadKb(network: NetworkConfig): number {
  return network.experiments.largeBodyMiB * 1024;
}

/** The main server: HTTP echo, gRPC ping, no HTTPS redirect listener (nothing uses it). */
export function fortioServerArgs(network: NetworkConfig): string[] {
  return [
    'server',
    '-http-port',
    String(FORTIO_HTTP_PORT),
    '-grpc-port',
    String(FORTIO_GRPC_PORT),
    '-redirect-port',
    'disabled',
    '-maxpayloadsizekb',
    String(maxPayloadKb(network)),
  ];
}

/**
 * E4's second server in the same pod: the same binary and flags on FORTIO_L4_PORT, with every other
 * listener off (the pod's containers share one network namespace, so defaults would collide).
 */
export function fortioL4ServerArgs(network: NetworkConfig): string[] {
  return [
    'server',
    '-http-port',
    String(FORTIO_L4_PORT),
    '-grpc-port',
    'disabled',
    '-tcp-port',
    'disabled',
    '-udp-port',
    'disabled',
    '-redirect-port',
    'disabled',
    '-maxpayloadsizekb',
    String(maxPayloadKb(network)),
  ];
}

export interface FortioLoad {
  readonly url: string;
  /** `-qps`; 0 for saturation. */
  readonly qps: number;
  readonly seconds: number;
  readonly grpc?: boolean;
  /** false adds `-keepalive=false` (new-connection latency). */
  readonly keepalive?: boolean;
}

/**
 * `fortio load` with the lab's connections, resolution (`-r`, never fortio's 1 ms default) and
 * percentiles, writing its JSON result to stdout.
 */
export function fortioLoadArgs(network: NetworkConfig, load: FortioLoad): string[] {
  const { fortio } = network;
  return [
    'load',
    '-c',
    String(fortio.connections),
    '-qps',
    String(load.qps),
    '-t',
    `${load.seconds}s`,
    '-r',
    String(fortio.resolutionSeconds),
    '-p',
    fortio.percentiles.join(','),
    ...(load.keepalive === false ? ['-keepalive=false'] : []),
    ...(load.grpc ? ['-grpc', '-ping'] : []),
    '-json',
    '-',
    load.url,
  ];
}
