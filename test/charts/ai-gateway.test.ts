import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { describe, expect, test } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { Gateway, HttpRoute } from '../../charts/ai-gateway/gateway-api.ts';
import { RESTART_AFTER_APPLY_ANNOTATION } from '../../charts/ai-gateway.ts';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { buildLabApp } from '../../charts/lab-app.ts';
import { checkManifests, type KubeObject } from '../../lib/check/index.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { prerequisites } from '../../lib/prereqs/prerequisites.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { tempDir } from '../temp.ts';
import { container, find, synthLab } from './synth.ts';
import { type Manifest, validateEnvoyGatewayConfig, validateManifest } from './validate.ts';

const AI_GATEWAY = { study: { optionalArms: ['ai-gateway'] } };
const GATEWAY_KINDS = ['GatewayClass', 'Gateway', 'HTTPRoute', 'EnvoyProxy'];
const CLUSTER_SCOPED = new Set(['ClusterRole', 'ClusterRoleBinding', 'GatewayClass']);

function envoyGatewayDocument(objects: readonly Manifest[]) {
  const configMap = find(objects, 'ConfigMap', 'envoy-gateway-config');
  return parse(configMap.data['envoy-gateway.yaml']);
}

function args(objects: readonly Manifest[], deployment: string): string[] {
  return container(find(objects, 'Deployment', deployment), 'epp').args;
}

describe('the Envoy AI Gateway arm', () => {
  const lab = synthLab(AI_GATEWAY);
  const { objects } = lab;

  test('adds two charts after the standalone Envoys, Envoy Gateway configuration first', () => {
    expect(Object.keys(lab.charts)).toEqual([
      '00-namespace',
      '10-gpu',
      '20-model-servers',
      '30-baseline',
      '40-routers',
      '50-epp',
      '60-envoy',
      '70-ai-gateway-config',
      '71-ai-gateway',
    ]);
    expect(lab.charts['70-ai-gateway-config'].map((o) => o.kind)).toEqual([
      'ConfigMap',
      'ClusterRole',
      'ClusterRoleBinding',
    ]);
    expect(lab.charts['71-ai-gateway'].map((o) => o.kind)).toEqual(
      expect.arrayContaining(['InferencePool', 'Deployment', ...GATEWAY_KINDS]),
    );
  });

  test('every object validates against its schema', () => {
    for (const object of objects) validateManifest(object);
    expect(objects.filter((o) => GATEWAY_KINDS.includes(o.kind))).toHaveLength(4);
  });

  test('namespaces: Envoy Gateway side in envoy-gateway-system, the arm in the lab namespace', () => {
    for (const [chart, expected] of [
      ['70-ai-gateway-config', 'envoy-gateway-system'],
      ['71-ai-gateway', 'vllm'],
    ] as const) {
      for (const object of lab.charts[chart]) {
        const label = `${object.kind} ${object.metadata.name}`;
        // The EnvoyProxy sits with the controller, where Envoy Gateway resolves GatewayClass parameters.
        const namespace = object.kind === 'EnvoyProxy' ? 'envoy-gateway-system' : expected;
        expect(object.metadata.namespace, label).toBe(
          CLUSTER_SCOPED.has(object.kind) ? undefined : namespace,
        );
        expect(object.metadata.labels?.['app.kubernetes.io/part-of'], label).toBe('llm-gateway-lab');
      }
    }
  });

  test('Envoy Gateway configuration: InferencePool backends, the AI Gateway extension and its hooks', () => {
    const document = envoyGatewayDocument(objects);
    validateEnvoyGatewayConfig(document);
    expect(document.apiVersion).toBe('gateway.envoyproxy.io/v1alpha1');
    expect(document.kind).toBe('EnvoyGateway');
    expect(document.gateway).toEqual({ controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' });
    expect(document.provider.type).toBe('Kubernetes');
    expect(document.extensionApis).toEqual({ enableEnvoyPatchPolicy: true, enableBackend: true });
    const manager = document.extensionManager;
    expect(manager.backendResources).toEqual([
      { group: 'inference.networking.k8s.io', kind: 'InferencePool', version: 'v1' },
    ]);
    expect(manager.hooks.xdsTranslator.translation).toEqual({
      listener: { includeAll: true },
      route: { includeAll: true },
      cluster: { includeAll: true },
      secret: { includeAll: true },
    });
    expect(manager.hooks.xdsTranslator.post).toEqual(['Translation', 'Cluster', 'Route']);
    expect(manager.service).toEqual({
      fqdn: { hostname: 'ai-gateway-controller.envoy-ai-gateway-system.svc.cluster.local', port: 1063 },
    });
  });

  test('the replaced configuration keeps the shutdown manager on the pinned Envoy Gateway release', () => {
    expect(envoyGatewayDocument(objects).provider.kubernetes.shutdownManager.image).toBe(
      'docker.io/envoyproxy/gateway:v1.8.1',
    );
    const other = synthLab({ ...AI_GATEWAY, aiGateway: { envoyGatewayVersion: 'v1.8.2' } });
    expect(envoyGatewayDocument(other.objects).provider.kubernetes.shutdownManager.image).toBe(
      'docker.io/envoyproxy/gateway:v1.8.2',
    );
  });

  test('the ConfigMap names the restart that prerequisites.json lists after its file', () => {
    const configMap = find(objects, 'ConfigMap', 'envoy-gateway-config');
    expect(configMap.metadata.annotations?.[RESTART_AFTER_APPLY_ANNOTATION]).toBe(
      'deployment/envoy-gateway -n envoy-gateway-system',
    );
    const [step] = prerequisites(lab.config).afterApply;
    expect(Object.keys(lab.charts)).toContain(step.after);
    expect(lab.charts[step.after]).toContainEqual(configMap);
  });

  test('Envoy Gateway may read InferencePools cluster-wide', () => {
    const role = find(objects, 'ClusterRole', 'vllm-envoy-gateway-inferencepools');
    expect(role.rules).toEqual([
      {
        apiGroups: ['inference.networking.k8s.io'],
        resources: ['inferencepools'],
        verbs: ['get', 'list', 'watch'],
      },
    ]);
    const binding = find(objects, 'ClusterRoleBinding', 'vllm-envoy-gateway-inferencepools');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'vllm-envoy-gateway-inferencepools',
    });
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'envoy-gateway', namespace: 'envoy-gateway-system' },
    ]);
  });

  test('GatewayClass of Envoy Gateway, parameterized by an EnvoyProxy that exists', () => {
    const gatewayClass = find(objects, 'GatewayClass', 'vllm-ai-gateway');
    expect(gatewayClass.spec.controllerName).toBe('gateway.envoyproxy.io/gatewayclass-controller');
    const ref = gatewayClass.spec.parametersRef;
    expect(ref).toEqual({
      group: 'gateway.envoyproxy.io',
      kind: 'EnvoyProxy',
      name: 'vllm-ai-gateway',
      namespace: 'envoy-gateway-system',
    });
    const proxy = find(objects, 'EnvoyProxy', ref.name);
    expect(proxy.metadata.namespace).toBe(ref.namespace);
  });

  test('the EnvoyProxy pins the Service the study addresses, cluster-internal, sized like the standalone Envoy', () => {
    const proxy = find(objects, 'EnvoyProxy', 'vllm-ai-gateway');
    expect(proxy.spec.provider.type).toBe('Kubernetes');
    expect(proxy.spec.provider.kubernetes.envoyService).toEqual({ name: 'ai-gateway', type: 'ClusterIP' });
    expect(proxy.spec.concurrency).toBe(8);
    expect(proxy.spec.logging).toEqual({ level: { default: 'warn' } });
    const standalone = container(find(objects, 'Deployment', 'envoy-epp'), 'envoy');
    const resources = proxy.spec.provider.kubernetes.envoyDeployment.container.resources;
    expect(resources.requests.cpu).toBe(String(standalone.resources.requests.cpu));
    expect(resources.limits.memory).toBe(String(standalone.resources.limits.memory));
    // The benchmark Jobs of this arm call exactly that Service and the Gateway's port.
    const run = studyPlan(lab.config).runs.find((r) =>
      r.benchmarks.some((b) => b.target.kind === 'arm' && b.target.arm === 'ai-gateway'),
    );
    expect(run).toBeDefined();
    const job = benchmarkJob(lab.config, run?.benchmarks[0] as never) as unknown as Manifest;
    expect(JSON.stringify(job)).toContain(
      '--base-url=http://ai-gateway.envoy-gateway-system.svc.cluster.local:80',
    );
  });

  test("Gateway listens on HTTP 80; the HTTPRoute sends everything to the arm's InferencePool", () => {
    const gateway = find(objects, 'Gateway', 'ai-gateway');
    expect(gateway.spec).toEqual({
      gatewayClassName: 'vllm-ai-gateway',
      listeners: [{ name: 'http', protocol: 'HTTP', port: 80 }],
    });
    const route = find(objects, 'HTTPRoute', 'ai-gateway');
    expect(route.spec.parentRefs).toEqual([
      { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'ai-gateway' },
    ]);
    expect(route.spec.rules).toHaveLength(1);
    const [rule] = route.spec.rules;
    expect(rule.backendRefs).toEqual([
      { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: 'qwen3-ai-gateway-pool' },
    ]);
    expect(rule.matches).toEqual([{ path: { type: 'PathPrefix', value: '/' } }]);
    expect(rule.timeouts).toEqual({ request: '300s' });
  });

  test('its own pool selects the standard replicas and names the TLS EPP', () => {
    const pool = find(objects, 'InferencePool', 'qwen3-ai-gateway-pool');
    expect(pool.spec).toEqual({
      selector: { matchLabels: { app: 'qwen3' } },
      targetPorts: [{ number: 8000 }],
      endpointPickerRef: { name: 'qwen3-ai-gateway', port: { number: 9002 }, failureMode: 'FailClose' },
    });
    // The standard pool still names the plaintext EPP behind the standalone Envoy.
    expect(find(objects, 'InferencePool', 'qwen3-pool').spec.endpointPickerRef.name).toBe('qwen3-epp');
  });

  test("the second EPP serves TLS; the standalone Envoy's EPP stays plaintext", () => {
    const secure = args(objects, 'qwen3-ai-gateway');
    expect(secure).toContain('--secure-serving=true');
    expect(secure).not.toContain('--secure-serving=false');
    expect(secure.slice(0, 4)).toEqual(['--pool-name', 'qwen3-ai-gateway-pool', '--pool-namespace', 'vllm']);
    expect(secure).toContain('vllm:kv_cache_usage_perc');
    expect(args(objects, 'qwen3-epp')).toContain('--secure-serving=false');
    // h2c (cleartext HTTP/2) is declared only where ext_proc is plaintext.
    const grpcPort = (service: string) =>
      find(objects, 'Service', service).spec.ports.find((p: { name: string }) => p.name === 'grpc');
    expect(grpcPort('qwen3-ai-gateway').appProtocol).toBeUndefined();
    expect(grpcPort('qwen3-epp').appProtocol).toBe('kubernetes.io/h2c');
  });

  test('lab check passes on the synthesized testbed with the arm and its Jobs', () => {
    const jobs = studyPlan(lab.config).runs.flatMap((run) =>
      run.benchmarks.map((spec) => benchmarkJob(lab.config, spec)),
    );
    expect(checkManifests([...objects, ...jobs] as unknown as KubeObject[])).toEqual([]);
  });

  test('follows the lab namespace and maps log levels Envoy Gateway lacks', () => {
    const other = synthLab({
      ...AI_GATEWAY,
      namespace: 'lab2',
      envoy: { logLevel: 'critical', concurrency: 4 },
    });
    const gatewayClass = find(other.objects, 'GatewayClass', 'lab2-ai-gateway');
    expect(gatewayClass.spec.parametersRef).toMatchObject({
      name: 'lab2-ai-gateway',
      namespace: 'envoy-gateway-system',
    });
    expect(find(other.objects, 'Gateway', 'ai-gateway').metadata.namespace).toBe('lab2');
    find(other.objects, 'ClusterRole', 'lab2-envoy-gateway-inferencepools');
    const proxy = find(other.objects, 'EnvoyProxy', 'lab2-ai-gateway');
    expect(proxy.spec.logging.level.default).toBe('error');
    expect(proxy.spec.concurrency).toBe(4);
    expect(args(other.objects, 'qwen3-ai-gateway')).toEqual(
      expect.arrayContaining(['--pool-namespace', 'lab2', '--secure-serving=true']),
    );
    for (const object of other.objects) validateManifest(object);
  });

  test('the configuration survives the YAML file synth writes', () => {
    const outdir = tempDir('lab-aigw-');
    buildLabApp(parseLabConfig(AI_GATEWAY), { outdir }).synth();
    expect(readdirSync(outdir)).toEqual(
      expect.arrayContaining(['70-ai-gateway-config.yaml', '71-ai-gateway.yaml']),
    );
    const written = parseAllDocuments(readFileSync(join(outdir, '70-ai-gateway-config.yaml'), 'utf8')).map(
      (d) => d.toJSON(),
    );
    expect(envoyGatewayDocument(written)).toEqual(envoyGatewayDocument(objects));
  });
});

describe('schemas of the AI Gateway kinds catch mistakes', () => {
  const { objects } = synthLab(AI_GATEWAY);
  const document = envoyGatewayDocument(objects);

  test('an extension manager without hooks, or a backend kind without its version, is rejected', () => {
    const { hooks: _hooks, ...withoutHooks } = document.extensionManager;
    expect(() => validateEnvoyGatewayConfig({ ...document, extensionManager: withoutHooks })).toThrow(
      /hooks/,
    );
    const noVersion = {
      ...document,
      extensionManager: {
        ...document.extensionManager,
        backendResources: [{ group: 'inference.networking.k8s.io', kind: 'InferencePool' }],
      },
    };
    expect(() => validateEnvoyGatewayConfig(noVersion)).toThrow(/version/);
  });

  test('a misspelled key is rejected instead of silently dropped', () => {
    const { backendResources, ...rest } = document.extensionManager;
    const typo = { ...document, extensionManager: { ...rest, backendResource: backendResources } };
    expect(() => validateEnvoyGatewayConfig(typo)).toThrow(/additional properties/);
    const proxy = find(objects, 'EnvoyProxy', 'vllm-ai-gateway');
    const { envoyService, ...kubernetes } = proxy.spec.provider.kubernetes;
    const misspelled = {
      ...proxy,
      spec: {
        ...proxy.spec,
        provider: { ...proxy.spec.provider, kubernetes: { ...kubernetes, envoyServices: envoyService } },
      },
    };
    expect(() => validateManifest(misspelled)).toThrow(/EnvoyProxy envoy-gateway-system\/vllm-ai-gateway/);
  });

  test('an HTTPRoute backendRef to a Service needs a port; a bad timeout is rejected', () => {
    const route = find(objects, 'HTTPRoute', 'ai-gateway');
    const [rule] = route.spec.rules;
    const toService = {
      ...route,
      spec: { ...route.spec, rules: [{ ...rule, backendRefs: [{ name: 'qwen3-headless' }] }] },
    };
    expect(() => validateManifest(toService)).toThrow(/port/);
    const badTimeout = {
      ...route,
      spec: { ...route.spec, rules: [{ ...rule, timeouts: { request: '5 minutes' } }] },
    };
    expect(() => validateManifest(badTimeout)).toThrow(/timeouts/);
  });

  test('a GatewayClass needs a domain-prefixed controller name and no namespace', () => {
    const gatewayClass = find(objects, 'GatewayClass', 'vllm-ai-gateway');
    expect(() =>
      validateManifest({ ...gatewayClass, spec: { ...gatewayClass.spec, controllerName: 'envoy-gateway' } }),
    ).toThrow(/controllerName/);
    expect(() =>
      validateManifest({ ...gatewayClass, metadata: { ...gatewayClass.metadata, namespace: 'vllm' } }),
    ).toThrow(/GatewayClass/);
  });

  test('the wrappers refuse a Service backend without port and a Gateway without listeners', () => {
    const chart = Testing.chart();
    expect(
      () =>
        new HttpRoute(chart, 'route', {
          metadata: { name: 'r' },
          spec: { parentRefs: [{ name: 'g' }], rules: [{ backendRefs: [{ name: 'svc' }] }] },
        }),
    ).toThrow(/backendRef to Service svc needs a port/);
    expect(
      () =>
        new Gateway(chart, 'gateway', {
          metadata: { name: 'g' },
          spec: { gatewayClassName: 'c', listeners: [] },
        }),
    ).toThrow(/at least one listener/);
  });
});

describe('without the arm', () => {
  test('the default synth emits none of it', () => {
    const lab = synthLab();
    expect(Object.keys(lab.charts)).not.toContain('70-ai-gateway-config');
    expect(Object.keys(lab.charts)).not.toContain('71-ai-gateway');
    expect(lab.objects.filter((o) => GATEWAY_KINDS.includes(o.kind))).toEqual([]);
    expect(lab.objects.filter((o) => o.metadata.namespace === 'envoy-gateway-system')).toEqual([]);
    expect(lab.objects.filter((o) => o.metadata.name.includes('ai-gateway'))).toEqual([]);
    expect(prerequisites(lab.config).afterApply).toEqual([]);
  });
});
