import { stringify } from 'yaml';
import type { KubeObject } from '../../lib/check/index.ts';
import { type Json, nameOf } from '../../lib/check/manifest.ts';

/**
 * A small, correct testbed written for these tests: two vLLM replicas, the device plugin, the
 * kube-proxy baseline, one router, the EPP with its pool and RBAC, a standalone Envoy and two
 * benchmark Jobs (one through Envoy, one straight at a replica). Every call builds fresh objects,
 * so a test can break one on purpose.
 */

const NS = 'vllm';
/** The default placement on the lab's one-host cluster: every lab pod on the GPU node. */
const GPU_NODE = { 'llm-gateway-lab/node-role': 'gpu' };
const meta = (name: string, labels: Record<string, string> = {}) => ({ name, namespace: NS, labels });
const replicaUrl = (i: number) => `http://qwen3-${i}.qwen3-headless.vllm.svc.cluster.local:8000`;

function devicePlugin(): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'nvidia-device-plugin', namespace: 'kube-system' },
    spec: {
      selector: { matchLabels: { name: 'nvidia-device-plugin' } },
      template: {
        metadata: { labels: { name: 'nvidia-device-plugin' } },
        spec: {
          runtimeClassName: 'nvidia',
          containers: [{ name: 'plugin', image: 'nvcr.io/nvidia/k8s-device-plugin:v0.17.1' }],
        },
      },
    },
  };
}

function replicas(): KubeObject[] {
  const headless: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('qwen3-headless'),
    spec: { clusterIP: 'None', selector: { app: 'qwen3' }, ports: [{ name: 'http', port: 8000 }] },
  };
  const statefulSet: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: meta('qwen3'),
    spec: {
      replicas: 2,
      serviceName: 'qwen3-headless',
      selector: { matchLabels: { app: 'qwen3' } },
      template: {
        metadata: { labels: { app: 'qwen3' } },
        spec: {
          runtimeClassName: 'nvidia',
          nodeSelector: GPU_NODE,
          containers: [
            {
              name: 'vllm',
              image: 'vllm/vllm-openai:v0.11.0',
              args: [
                '--model=Qwen/Qwen3-0.6B-FP8',
                '--served-model-name=qwen3',
                '--host=0.0.0.0',
                '--port=8000',
                '--enable-prefix-caching',
                '--block-size=16',
              ],
              env: [
                { name: 'VLLM_SERVER_DEV_MODE', value: '1' },
                { name: 'HF_HOME', value: '/models' },
              ],
              resources: {
                limits: { 'nvidia.com/gpu': 1, memory: '32Gi' },
                requests: { 'nvidia.com/gpu': 1 },
              },
            },
          ],
        },
      },
    },
  };
  const nodePort: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('qwen3-nodeport'),
    spec: {
      type: 'NodePort',
      selector: { app: 'qwen3' },
      ports: [{ port: 8000, targetPort: 8000, nodePort: 30800 }],
    },
  };
  return [headless, statefulSet, nodePort];
}

function router(): KubeObject[] {
  const script = [
    'pip install --no-cache-dir vllm-router==0.1.15 &&',
    'exec vllm-router --host 0.0.0.0 --port 8000 --policy cache_aware',
    `--worker-urls ${replicaUrl(0)} ${replicaUrl(1)}`,
    '--prometheus-host 0.0.0.0',
  ].join(' ');
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta('router'),
      spec: {
        selector: { matchLabels: { app: 'router' } },
        template: {
          metadata: { labels: { app: 'router' } },
          spec: {
            nodeSelector: GPU_NODE,
            containers: [
              { name: 'router', image: 'python:3.12-slim', command: ['sh', '-c'], args: [script] },
            ],
          },
        },
      },
    },
  ];
}

export function pickerConfig(prefixWeight: unknown = 1): Json {
  return {
    apiVersion: 'inference.networking.x-k8s.io/v1alpha1',
    kind: 'EndpointPickerConfig',
    plugins: [
      { type: 'queue-scorer' },
      { type: 'kv-cache-utilization-scorer' },
      { type: 'prefix-cache-scorer' },
    ],
    schedulingProfiles: [
      {
        name: 'default',
        plugins: [
          { pluginRef: 'queue-scorer' },
          { pluginRef: 'kv-cache-utilization-scorer' },
          { pluginRef: 'prefix-cache-scorer', weight: prefixWeight },
        ],
      },
    ],
  };
}

function endpointPicker(): KubeObject[] {
  const pool: KubeObject = {
    apiVersion: 'inference.networking.k8s.io/v1',
    kind: 'InferencePool',
    metadata: meta('qwen3-pool'),
    spec: {
      selector: { matchLabels: { app: 'qwen3' } },
      targetPorts: [{ number: 8000 }],
      endpointPickerRef: { name: 'picker', port: { number: 9002 }, failureMode: 'FailClose' },
    },
  };
  const config: KubeObject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta('picker-config'),
    data: { 'plugins.yaml': stringify(pickerConfig()) },
  };
  const account: KubeObject = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta('picker') };
  const role: KubeObject = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta('picker'),
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'watch', 'list'] },
      {
        apiGroups: ['inference.networking.k8s.io'],
        resources: ['inferencepools'],
        verbs: ['get', 'watch', 'list'],
      },
      {
        apiGroups: ['inference.networking.x-k8s.io'],
        resources: ['inferenceobjectives'],
        verbs: ['get', 'watch', 'list'],
      },
    ],
  };
  const subjects = () => [{ kind: 'ServiceAccount', name: 'picker', namespace: NS }];
  const roleBinding: KubeObject = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta('picker'),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'picker' },
    subjects: subjects(),
  };
  const clusterRole: KubeObject = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'picker-auth' },
    rules: [
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ],
  };
  const clusterRoleBinding: KubeObject = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'picker-auth' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'picker-auth' },
    subjects: subjects(),
  };
  const grpcProbe = { grpc: { port: 9003, service: 'inference-extension' }, periodSeconds: 5 };
  const deployment: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta('picker'),
    spec: {
      selector: { matchLabels: { app: 'picker' } },
      template: {
        metadata: { labels: { app: 'picker' } },
        spec: {
          serviceAccountName: 'picker',
          nodeSelector: GPU_NODE,
          containers: [
            {
              name: 'epp',
              image: 'registry.k8s.io/gateway-api-inference-extension/epp:v1.0.1',
              command: ['/epp'],
              args: [
                '--pool-name',
                'qwen3-pool',
                '--pool-namespace',
                NS,
                '--config-file',
                '/config/plugins.yaml',
                '--kv-cache-usage-percentage-metric',
                'vllm:kv_cache_usage_perc',
                '--secure-serving=false',
              ],
              readinessProbe: grpcProbe,
              livenessProbe: grpcProbe,
              volumeMounts: [{ name: 'config', mountPath: '/config' }],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: 'picker-config' } }],
        },
      },
    },
  };
  const service: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('picker'),
    spec: { selector: { app: 'picker' }, ports: [{ name: 'grpc', port: 9002 }] },
  };
  return [pool, config, account, role, roleBinding, clusterRole, clusterRoleBinding, deployment, service];
}

export function envoyConfig(): Json {
  const extProc = {
    name: 'envoy.filters.http.ext_proc',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
      grpc_service: { envoy_grpc: { cluster_name: 'picker' }, timeout: '10s' },
      processing_mode: {
        request_header_mode: 'SEND',
        request_body_mode: 'FULL_DUPLEX_STREAMED',
        response_body_mode: 'FULL_DUPLEX_STREAMED',
        // Envoy refuses FULL_DUPLEX_STREAMED with any other trailer mode.
        request_trailer_mode: 'SEND',
        response_trailer_mode: 'SEND',
      },
      message_timeout: '1000s',
      failure_mode_allow: false,
    },
  };
  const manager = {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      stat_prefix: 'lab',
      route_config: {
        virtual_hosts: [
          {
            name: 'all',
            domains: ['*'],
            routes: [{ match: { prefix: '/' }, route: { cluster: 'by-header', timeout: '300s' } }],
          },
        ],
      },
      http_filters: [extProc, { name: 'envoy.filters.http.router' }],
    },
  };
  const address = (host: string, port: number) => ({ socket_address: { address: host, port_value: port } });
  return {
    static_resources: {
      listeners: [
        { name: 'lab', address: address('0.0.0.0', 8081), filter_chains: [{ filters: [manager] }] },
      ],
      clusters: [
        {
          name: 'by-header',
          type: 'ORIGINAL_DST',
          lb_policy: 'CLUSTER_PROVIDED',
          original_dst_lb_config: {
            use_http_header: true,
            http_header_name: 'x-gateway-destination-endpoint',
          },
        },
        {
          name: 'picker',
          type: 'STRICT_DNS',
          http2_protocol_options: {},
          load_assignment: {
            cluster_name: 'picker',
            endpoints: [
              { lb_endpoints: [{ endpoint: { address: address('picker.vllm.svc.cluster.local', 9002) } }] },
            ],
          },
        },
      ],
    },
  };
}

function envoy(): KubeObject[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta('envoy-config'),
      data: { 'envoy.yaml': stringify(envoyConfig()) },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta('envoy'),
      spec: {
        selector: { matchLabels: { app: 'envoy' } },
        template: {
          metadata: { labels: { app: 'envoy' } },
          spec: {
            nodeSelector: GPU_NODE,
            containers: [
              {
                name: 'envoy',
                image: 'envoyproxy/envoy:v1.35.3',
                args: ['-c', '/etc/envoy/envoy.yaml', '--log-level', 'warn', '--concurrency', '8'],
                volumeMounts: [{ name: 'config', mountPath: '/etc/envoy' }],
              },
            ],
            volumes: [{ name: 'config', configMap: { name: 'envoy-config' } }],
          },
        },
      },
    },
  ];
}

/** A benchmark Job; `baseUrl` picks the target, `prefixes` the workload. */
export function benchJob(name: string, baseUrl: string, prefixes: number, prefixLen = 2048): KubeObject {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: meta(name),
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          runtimeClassName: 'nvidia',
          nodeSelector: GPU_NODE,
          containers: [
            {
              name: 'bench',
              image: 'vllm/vllm-openai:v0.11.0',
              command: ['vllm'],
              args: [
                'bench',
                'serve',
                `--base-url=${baseUrl}`,
                '--model=Qwen/Qwen3-0.6B-FP8',
                '--served-model-name=qwen3',
                '--dataset-name=prefix_repetition',
                `--prefix-repetition-num-prefixes=${prefixes}`,
                `--prefix-repetition-prefix-len=${prefixLen}`,
                '--save-result',
                '--result-dir=/out',
                `--result-filename=${name}.json`,
              ],
              env: [{ name: 'NVIDIA_VISIBLE_DEVICES', value: 'all' }],
              resources: { limits: { memory: '12Gi' } },
            },
          ],
        },
      },
    },
  };
}

/** The whole correct testbed. */
export function goodTestbed(): KubeObject[] {
  return [
    devicePlugin(),
    ...replicas(),
    ...router(),
    ...endpointPicker(),
    ...envoy(),
    benchJob('bench-epp', 'http://envoy.vllm.svc.cluster.local:8081', 128),
    // The upper-bound sweep fits one replica on purpose; lesson 8 must not flag it.
    benchJob('bench-bound-p8', replicaUrl(0), 8),
  ];
}

/** The object of this kind and name; throws so a typo in a test fails loudly. */
export function find(objects: readonly KubeObject[], kind: string, name: string): Json {
  const found = objects.find((object) => object.kind === kind && nameOf(object) === name);
  if (!found) throw new Error(`fixture has no ${kind} ${name}`);
  return found as Json;
}

/** The first container of a workload's pod template (mutable). */
export function container(objects: readonly KubeObject[], kind: string, name: string): Json {
  const spec = podSpec(objects, kind, name);
  return (spec.containers as Json[])[0];
}

export function podSpec(objects: readonly KubeObject[], kind: string, name: string): Json {
  const object = find(objects, kind, name) as { spec: { template: { spec: Json } } };
  return object.spec.template.spec;
}
