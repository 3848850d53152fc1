import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { tokenizerSeedScript } from '../../charts/endpoint-picker.ts';
import { tempDir } from '../temp.ts';
import { container, find, synthLab } from './synth.ts';
import { validateEndpointPickerConfig, validateManifest } from './validate.ts';

describe('InferencePool and Endpoint Picker', () => {
  const { objects } = synthLab();
  const epp = find(objects, 'Deployment', 'qwen3-epp');
  const c = container(epp, 'epp');

  test('the pool selects the standard replicas and points at the EPP, failing closed', () => {
    const pool = find(objects, 'InferencePool', 'qwen3-pool');
    expect(pool.apiVersion).toBe('inference.networking.k8s.io/v1');
    expect(pool.spec).toEqual({
      selector: { matchLabels: { app: 'qwen3' } },
      targetPorts: [{ number: 8000 }],
      endpointPickerRef: { name: 'qwen3-epp', port: { number: 9002 }, failureMode: 'FailClose' },
    });
  });

  test('the pool schema rejects two target ports', () => {
    const pool = find(objects, 'InferencePool', 'qwen3-pool');
    const broken = { ...pool, spec: { ...pool.spec, targetPorts: [{ number: 8000 }, { number: 8001 }] } };
    expect(() => validateManifest(broken)).toThrow(/targetPorts/);
  });

  test('exact EPP arguments', () => {
    expect(c.image).toBe('registry.k8s.io/gateway-api-inference-extension/epp:v1.0.1');
    expect(c.args).toEqual([
      '--pool-name',
      'qwen3-pool',
      '--pool-namespace',
      'vllm',
      '--pool-group',
      'inference.networking.k8s.io',
      '--config-file',
      '/config/default-plugins.yaml',
      '--zap-encoder',
      'json',
      '--v',
      '1',
      '--kv-cache-usage-percentage-metric',
      'vllm:kv_cache_usage_perc',
      '--secure-serving=false',
    ]);
  });

  test('gRPC probes on the health port with the inference-extension service', () => {
    expect(c.readinessProbe.grpc).toEqual({ port: 9003, service: 'inference-extension' });
    expect(c.livenessProbe.grpc).toEqual({ port: 9003, service: 'inference-extension' });
  });

  test('ports 9002, 9003, 9090 on the container and the Service', () => {
    expect(c.ports.map((p: { containerPort: number }) => p.containerPort)).toEqual([9002, 9003, 9090]);
    const svc = find(objects, 'Service', 'qwen3-epp');
    expect(svc.spec.selector).toEqual({ app: 'qwen3-epp' });
    expect(svc.spec.ports.map((p: { port: number }) => p.port)).toEqual([9002, 9003, 9090]);
  });

  test('the config file is mounted from a ConfigMap holding a valid EndpointPickerConfig', () => {
    expect(c.volumeMounts).toEqual([{ name: 'config', mountPath: '/config', readOnly: true }]);
    expect(epp.spec.template.spec.volumes).toEqual([
      { name: 'config', configMap: { name: 'qwen3-epp-config' } },
    ]);
    const config = parse(find(objects, 'ConfigMap', 'qwen3-epp-config').data['default-plugins.yaml']);
    validateEndpointPickerConfig(config);
    expect(config.plugins.map((p: { type: string }) => p.type)).toEqual([
      'queue-scorer',
      'kv-cache-utilization-scorer',
      'prefix-cache-scorer',
    ]);
    expect(config.schedulingProfiles).toEqual([
      {
        name: 'default',
        plugins: [
          { pluginRef: 'queue-scorer', weight: 1 },
          { pluginRef: 'kv-cache-utilization-scorer', weight: 1 },
          { pluginRef: 'prefix-cache-scorer', weight: 1 },
        ],
      },
    ]);
  });

  test('RBAC: namespaced reads of pools, objectives and pods; cluster-wide token and access reviews', () => {
    expect(epp.spec.template.spec.serviceAccountName).toBe('qwen3-epp');
    find(objects, 'ServiceAccount', 'qwen3-epp');
    const role = find(objects, 'Role', 'qwen3-epp');
    expect(role.rules).toEqual([
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
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'watch', 'list'] },
    ]);
    const clusterRole = find(objects, 'ClusterRole', 'vllm-qwen3-epp-auth');
    expect(clusterRole.metadata.namespace).toBeUndefined();
    expect(clusterRole.rules).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
    const subject = { kind: 'ServiceAccount', name: 'qwen3-epp', namespace: 'vllm' };
    const binding = find(objects, 'RoleBinding', 'qwen3-epp');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'qwen3-epp',
    });
    expect(binding.subjects).toEqual([subject]);
    const clusterBinding = find(objects, 'ClusterRoleBinding', 'vllm-qwen3-epp-auth');
    expect(clusterBinding.roleRef.name).toBe('vllm-qwen3-epp-auth');
    expect(clusterBinding.subjects).toEqual([subject]);
  });
});

describe('optional EPP arms', () => {
  const { objects } = synthLab({ study: { optionalArms: ['epp-prefix3', 'llmd-precise'] } });

  test('epp-prefix3 weighs the prefix scorer by gaie.prefixHeavyWeight on its own pool', () => {
    const config = parse(find(objects, 'ConfigMap', 'qwen3-epp-prefix3-config').data['default-plugins.yaml']);
    validateEndpointPickerConfig(config);
    expect(config.schedulingProfiles[0].plugins).toContainEqual({
      pluginRef: 'prefix-cache-scorer',
      weight: 3,
    });
    expect(container(find(objects, 'Deployment', 'qwen3-epp-prefix3')).args.slice(0, 2)).toEqual([
      '--pool-name',
      'qwen3-epp-prefix3-pool',
    ]);
    expect(find(objects, 'InferencePool', 'qwen3-epp-prefix3-pool').spec.selector.matchLabels).toEqual({
      app: 'qwen3',
    });
  });

  test('llmd-precise runs the llm-d scheduler over the KV-events replicas with a ZMQ port', () => {
    const c = container(find(objects, 'Deployment', 'qwen3-llmd-precise'));
    expect(c.image).toBe('ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2');
    expect(c.args).toContain('--secure-serving=false');
    expect(c.ports).toContainEqual({ name: 'zmq', containerPort: 5557 });
    const svc = find(objects, 'Service', 'qwen3-llmd-precise');
    expect(svc.spec.ports).toContainEqual({ name: 'zmq', port: 5557, targetPort: 5557 });
    expect(find(objects, 'InferencePool', 'qwen3-llmd-precise-pool').spec.selector.matchLabels).toEqual({
      app: 'qwen3-kv',
    });
    const config = parse(
      find(objects, 'ConfigMap', 'qwen3-llmd-precise-config').data['default-plugins.yaml'],
    );
    validateEndpointPickerConfig(config);
    expect(config.plugins).toContainEqual({
      type: 'precise-prefix-cache-scorer',
      parameters: {
        indexerConfig: {
          tokenProcessorConfig: { blockSize: 64, hashSeed: '42' },
          kvBlockIndexConfig: { enableMetrics: true },
          tokenizersPoolConfig: { tokenizersCacheDir: '/tokenizers' },
        },
      },
    });
    expect(config.schedulingProfiles[0].plugins).toEqual([
      { pluginRef: 'precise-prefix-cache-scorer', weight: 3 },
      { pluginRef: 'kv-cache-utilization-scorer', weight: 2 },
      { pluginRef: 'queue-scorer', weight: 2 },
      { pluginRef: 'max-score-picker' },
    ]);
  });

  test('llmd-precise logs at --v 4, where its scorer logs "Got pod scores" (docs/facts.md §3.7); the GAIE EPPs stay at 1', () => {
    const args: string[] = container(find(objects, 'Deployment', 'qwen3-llmd-precise')).args;
    expect(args.slice(args.indexOf('--v'), args.indexOf('--v') + 2)).toEqual(['--v', '4']);
    expect(args).toContain('json');
    const gaie: string[] = container(find(objects, 'Deployment', 'qwen3-epp-prefix3')).args;
    expect(gaie.slice(gaie.indexOf('--v'), gaie.indexOf('--v') + 2)).toEqual(['--v', '1']);
  });

  test('llmd-precise has a writable tokenizer folder, seeded from the model cache under the served name', () => {
    const deployment = find(objects, 'Deployment', 'qwen3-llmd-precise');
    const pod = deployment.spec.template.spec;
    const epp = container(deployment);
    expect(epp.volumeMounts).toContainEqual({ name: 'tokenizers', mountPath: '/tokenizers' });
    expect(pod.volumes).toContainEqual({ name: 'tokenizers', emptyDir: {} });
    expect((epp.env ?? []).map((e: { name: string }) => e.name)).not.toContain('HF_TOKEN');
    const [init] = pod.initContainers;
    expect(init.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(init.securityContext.runAsUser).toBe(65532);
    expect(init.volumeMounts).toEqual([
      { name: 'model-cache', mountPath: '/models', readOnly: true },
      { name: 'tokenizers', mountPath: '/tokenizers' },
    ]);
    expect(init.command[2]).toContain("repo='/models/hub/models--Qwen--Qwen3-0.6B-FP8'");
    expect(init.command[2]).toContain("target='/tokenizers/qwen3'");
    // The GAIE EPPs have none of it.
    expect(
      find(objects, 'Deployment', 'qwen3-epp-prefix3').spec.template.spec.initContainers,
    ).toBeUndefined();
  });

  test('the seed script copies the snapshot refs/main names, and fails clearly without it', () => {
    const root = tempDir('seed-');
    const cache = join(root, 'models');
    const out = join(root, 'tokenizers');
    const seed = { image: 'x', model: 'Qwen/Qwen3-0.6B-FP8', servedName: 'qwen3' };
    const script = tokenizerSeedScript(seed, { dir: out, cacheRoot: cache });
    const run = () => spawnSync('sh', ['-c', script], { encoding: 'utf8' });

    const missing = run();
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(
      /refs\/main not found: Qwen\/Qwen3-0.6B-FP8 is not in the shared model cache/,
    );

    const repo = join(cache, 'hub', 'models--Qwen--Qwen3-0.6B-FP8');
    mkdirSync(join(repo, 'refs'), { recursive: true });
    mkdirSync(join(repo, 'snapshots', 'abc123'), { recursive: true });
    mkdirSync(join(repo, 'blobs'), { recursive: true });
    writeFileSync(join(repo, 'refs', 'main'), 'abc123');
    const noTokenizer = run();
    expect(noTokenizer.status).toBe(1);
    expect(noTokenizer.stderr).toMatch(/abc123\/tokenizer.json not found/);

    // HF snapshots hold symlinks into blobs/: the copy must be the content.
    writeFileSync(join(repo, 'blobs', 'b1'), '{"model":{}}');
    symlinkSync(join(repo, 'blobs', 'b1'), join(repo, 'snapshots', 'abc123', 'tokenizer.json'));
    writeFileSync(join(repo, 'snapshots', 'abc123', 'merges.txt'), 'a b');
    writeFileSync(join(repo, 'snapshots', 'abc123', 'config.json'), '{}');
    const ok = run();
    expect(ok.status).toBe(0);
    expect(readFileSync(join(out, 'qwen3', 'tokenizer.json'), 'utf8')).toBe('{"model":{}}');
    expect(lstatSync(join(out, 'qwen3', 'tokenizer.json')).isSymbolicLink()).toBe(false);
    expect(readdirSync(join(out, 'qwen3')).sort()).toEqual(['merges.txt', 'tokenizer.json']);
  });

  test('the config schema rejects a fractional weight and an unknown field', () => {
    const base = {
      apiVersion: 'inference.networking.x-k8s.io/v1alpha1',
      kind: 'EndpointPickerConfig',
      plugins: [{ type: 'queue-scorer' }],
      schedulingProfiles: [{ name: 'default', plugins: [{ pluginRef: 'queue-scorer', weight: 1.5 }] }],
    };
    expect(() => validateEndpointPickerConfig(base)).toThrow(/integer/);
    expect(() => validateEndpointPickerConfig({ ...base, schedulingProfiles: [], extra: true })).toThrow(
      /additional properties/,
    );
  });
});
