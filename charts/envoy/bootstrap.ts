/**
 * The standalone Envoy's bootstrap (docs/facts.md §3.5) as typed objects. Field names are Envoy's v3
 * API (snake_case, as Envoy reads them from YAML); only the parts the lab uses are modelled.
 */

/** Envoy's `google.protobuf.Duration` in YAML: seconds with an `s` suffix. */
export type Duration = `${number}s`;

export interface SocketAddress {
  readonly socket_address: { readonly address: string; readonly port_value: number };
}

export interface TypedConfig {
  readonly '@type': string;
}

export interface ProcessingMode {
  readonly request_header_mode: 'SEND' | 'SKIP';
  readonly response_header_mode: 'SEND' | 'SKIP';
  readonly request_body_mode: 'NONE' | 'STREAMED' | 'BUFFERED' | 'FULL_DUPLEX_STREAMED';
  readonly response_body_mode: 'NONE' | 'STREAMED' | 'BUFFERED' | 'FULL_DUPLEX_STREAMED';
  readonly request_trailer_mode: 'SEND' | 'SKIP';
  readonly response_trailer_mode: 'SEND' | 'SKIP';
}

export interface ExternalProcessorConfig extends TypedConfig {
  readonly grpc_service: {
    readonly envoy_grpc: { readonly cluster_name: string };
    readonly timeout: Duration;
  };
  readonly processing_mode: ProcessingMode;
  readonly message_timeout: Duration;
  readonly failure_mode_allow: boolean;
}

export interface HttpFilter {
  readonly name: string;
  readonly typed_config: TypedConfig;
}

export interface Route {
  readonly match: { readonly prefix: string };
  readonly route: { readonly cluster: string; readonly timeout: Duration };
}

export interface HttpConnectionManagerConfig extends TypedConfig {
  readonly stat_prefix: string;
  readonly route_config: {
    readonly name: string;
    readonly virtual_hosts: readonly {
      readonly name: string;
      readonly domains: readonly string[];
      readonly routes: readonly Route[];
    }[];
  };
  readonly http_filters: readonly HttpFilter[];
}

export interface Listener {
  readonly name: string;
  readonly address: SocketAddress;
  readonly filter_chains: readonly {
    readonly filters: readonly {
      readonly name: string;
      readonly typed_config: HttpConnectionManagerConfig;
    }[];
  }[];
}

export interface CircuitBreakers {
  readonly thresholds: readonly {
    readonly max_connections: number;
    readonly max_pending_requests: number;
    readonly max_requests: number;
  }[];
}

export interface Http2ProtocolOptions {
  readonly initial_stream_window_size: number;
  readonly initial_connection_window_size: number;
}

export interface UpstreamHttpProtocolOptions extends TypedConfig {
  readonly explicit_http_config: { readonly http2_protocol_options: Http2ProtocolOptions };
}

export interface Cluster {
  readonly name: string;
  readonly type: 'STRICT_DNS' | 'ORIGINAL_DST';
  readonly lb_policy: 'LEAST_REQUEST' | 'CLUSTER_PROVIDED';
  readonly connect_timeout: Duration;
  readonly dns_lookup_family?: 'V4_ONLY';
  readonly original_dst_lb_config?: { readonly use_http_header: boolean; readonly http_header_name: string };
  readonly circuit_breakers?: CircuitBreakers;
  readonly typed_extension_protocol_options?: Readonly<Record<string, UpstreamHttpProtocolOptions>>;
  readonly load_assignment?: {
    readonly cluster_name: string;
    readonly endpoints: readonly {
      readonly lb_endpoints: readonly { readonly endpoint: { readonly address: SocketAddress } }[];
    }[];
  };
}

export interface EnvoyBootstrap {
  readonly admin: { readonly address: SocketAddress };
  readonly static_resources: {
    readonly listeners: readonly Listener[];
    readonly clusters: readonly Cluster[];
  };
}

/** The header the EPP sets to the chosen replica's `ip:port`. */
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
export const EXT_PROC_CLUSTER = 'ext_proc';
export const ORIGINAL_DST_CLUSTER = 'original_destination_cluster';

const HTTP_PROTOCOL_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

export interface StandaloneEnvoyBootstrapOptions {
  /** Listener port clients call. */
  readonly listenerPort: number;
  /** Admin port (readiness `/ready`, `/clusters`). */
  readonly adminPort: number;
  /** DNS name of the EPP Service. */
  readonly eppHost: string;
  /** The EPP's ext_proc port. */
  readonly eppPort: number;
}

/** Every request goes where the EPP's header says; nothing sticks to a connection. */
const CIRCUIT_LIMIT = 40_000;

/** The Envoy bootstrap of one EPP-style arm, in front of that arm's EPP (plaintext gRPC). */
export function standaloneEnvoyBootstrap(options: StandaloneEnvoyBootstrapOptions): EnvoyBootstrap {
  const extProc: ExternalProcessorConfig = {
    '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
    grpc_service: { envoy_grpc: { cluster_name: EXT_PROC_CLUSTER }, timeout: '10s' },
    processing_mode: {
      request_header_mode: 'SEND',
      response_header_mode: 'SEND',
      // The EPP reads the request body to score prefixes, and SSE responses must keep streaming.
      request_body_mode: 'FULL_DUPLEX_STREAMED',
      response_body_mode: 'FULL_DUPLEX_STREAMED',
      request_trailer_mode: 'SEND',
      response_trailer_mode: 'SEND',
    },
    message_timeout: '1000s',
    // A request the EPP did not place would silently bypass the arm under test.
    failure_mode_allow: false,
  };
  return {
    admin: { address: { socket_address: { address: '0.0.0.0', port_value: options.adminPort } } },
    static_resources: {
      listeners: [
        {
          name: 'inference',
          address: { socket_address: { address: '0.0.0.0', port_value: options.listenerPort } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type':
                      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                    stat_prefix: 'inference',
                    route_config: {
                      name: 'inference',
                      virtual_hosts: [
                        {
                          name: 'inference',
                          domains: ['*'],
                          routes: [
                            {
                              match: { prefix: '/' },
                              route: { cluster: ORIGINAL_DST_CLUSTER, timeout: '300s' },
                            },
                          ],
                        },
                      ],
                    },
                    http_filters: [
                      { name: 'envoy.filters.http.ext_proc', typed_config: extProc },
                      {
                        name: 'envoy.filters.http.router',
                        typed_config: {
                          '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
                        },
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [
        {
          name: ORIGINAL_DST_CLUSTER,
          type: 'ORIGINAL_DST',
          lb_policy: 'CLUSTER_PROVIDED',
          connect_timeout: '10s',
          original_dst_lb_config: { use_http_header: true, http_header_name: DESTINATION_HEADER },
          circuit_breakers: {
            thresholds: [
              {
                max_connections: CIRCUIT_LIMIT,
                max_pending_requests: CIRCUIT_LIMIT,
                max_requests: CIRCUIT_LIMIT,
              },
            ],
          },
        },
        {
          // No health_checks: the EPP serves gRPC health on 9003, and on 9002 only with
          // --health-checking=true, so an active check here would mark it unhealthy.
          name: EXT_PROC_CLUSTER,
          type: 'STRICT_DNS',
          lb_policy: 'LEAST_REQUEST',
          connect_timeout: '10s',
          dns_lookup_family: 'V4_ONLY',
          typed_extension_protocol_options: {
            [HTTP_PROTOCOL_OPTIONS]: {
              '@type': `type.googleapis.com/${HTTP_PROTOCOL_OPTIONS}`,
              explicit_http_config: {
                http2_protocol_options: {
                  initial_stream_window_size: 65_536,
                  initial_connection_window_size: 1_048_576,
                },
              },
            },
          },
          load_assignment: {
            cluster_name: EXT_PROC_CLUSTER,
            endpoints: [
              {
                lb_endpoints: [
                  {
                    endpoint: {
                      address: { socket_address: { address: options.eppHost, port_value: options.eppPort } },
                    },
                  },
                ],
              },
            ],
          },
        },
      ],
    },
  };
}
