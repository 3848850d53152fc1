import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { container, find, synthLab } from './synth.ts';

describe('standalone Envoy in front of the EPP', () => {
  const { objects } = synthLab();
  const deployment = find(objects, 'Deployment', 'envoy-epp');
  const c = container(deployment, 'envoy');
  const bootstrap = parse(find(objects, 'ConfigMap', 'envoy-epp-config').data['envoy.yaml']);
  const clusters = Object.fromEntries(
    bootstrap.static_resources.clusters.map((cl: { name: string }) => [cl.name, cl]),
  );
  const hcm = bootstrap.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const extProc = hcm.http_filters[0].typed_config;

  test('pinned image, explicit concurrency and warn logging, config from the ConfigMap', () => {
    expect(c.image).toBe('envoyproxy/envoy:v1.35.3');
    expect(c.args).toEqual(['-c', '/etc/envoy/envoy.yaml', '--log-level', 'warn', '--concurrency', '8']);
    expect(c.volumeMounts).toEqual([{ name: 'config', mountPath: '/etc/envoy', readOnly: true }]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/ready', port: 19000 });
  });

  test('Service envoy-epp on 8081, listener on 8081, admin on 19000', () => {
    const svc = find(objects, 'Service', 'envoy-epp');
    expect(svc.spec.ports).toEqual([{ name: 'http', port: 8081, targetPort: 8081 }]);
    expect(bootstrap.static_resources.listeners[0].address.socket_address.port_value).toBe(8081);
    expect(bootstrap.admin.address.socket_address.port_value).toBe(19000);
  });

  test('ext_proc streams bodies full duplex, waits 1000s and never fails open', () => {
    expect(hcm.http_filters.map((f: { name: string }) => f.name)).toEqual([
      'envoy.filters.http.ext_proc',
      'envoy.filters.http.router',
    ]);
    expect(extProc.grpc_service).toEqual({ envoy_grpc: { cluster_name: 'ext_proc' }, timeout: '10s' });
    expect(extProc.processing_mode).toEqual({
      request_header_mode: 'SEND',
      response_header_mode: 'SEND',
      request_body_mode: 'FULL_DUPLEX_STREAMED',
      response_body_mode: 'FULL_DUPLEX_STREAMED',
      request_trailer_mode: 'SEND',
      response_trailer_mode: 'SEND',
    });
    expect(extProc.message_timeout).toBe('1000s');
    expect(extProc.failure_mode_allow).toBe(false);
  });

  test('every route goes to the original destination with a 300s timeout', () => {
    expect(hcm.route_config.virtual_hosts[0].routes).toEqual([
      { match: { prefix: '/' }, route: { cluster: 'original_destination_cluster', timeout: '300s' } },
    ]);
  });

  test('ORIGINAL_DST follows the EPP header, with circuit breakers at 40000', () => {
    const dst = clusters.original_destination_cluster;
    expect(dst.type).toBe('ORIGINAL_DST');
    expect(dst.lb_policy).toBe('CLUSTER_PROVIDED');
    expect(dst.original_dst_lb_config).toEqual({
      use_http_header: true,
      http_header_name: 'x-gateway-destination-endpoint',
    });
    expect(dst.circuit_breakers.thresholds).toEqual([
      { max_connections: 40000, max_pending_requests: 40000, max_requests: 40000 },
    ]);
  });

  test('the ext_proc cluster: STRICT_DNS to the EPP on 9002, HTTP/2, plaintext, no health checks', () => {
    const ext = clusters.ext_proc;
    expect(ext.type).toBe('STRICT_DNS');
    expect(ext.lb_policy).toBe('LEAST_REQUEST');
    expect(ext.health_checks).toBeUndefined();
    expect(ext.transport_socket).toBeUndefined();
    expect(
      ext.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']
        .explicit_http_config.http2_protocol_options,
    ).toEqual({ initial_stream_window_size: 65536, initial_connection_window_size: 1048576 });
    expect(ext.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: 'qwen3-epp.vllm.svc.cluster.local',
      port_value: 9002,
    });
  });

  test('one Envoy per EPP-style arm, each bound to its own EPP', () => {
    const full = synthLab({ study: { optionalArms: ['epp-prefix3', 'llmd-precise'] } });
    const envoys = full.objects.filter(
      (o) => o.kind === 'Deployment' && o.metadata.name.startsWith('envoy-'),
    );
    expect(envoys.map((o) => o.metadata.name)).toEqual([
      'envoy-epp',
      'envoy-epp-prefix3',
      'envoy-llmd-precise',
    ]);
    const target = parse(find(full.objects, 'ConfigMap', 'envoy-llmd-precise-config').data['envoy.yaml'])
      .static_resources.clusters[1].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address
      .socket_address;
    expect(target.address).toBe('qwen3-llmd-precise.vllm.svc.cluster.local');
  });
});
