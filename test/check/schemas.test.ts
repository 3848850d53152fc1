import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { checkManifests, inspectManifests, type KubeObject, SCHEMA } from '../../lib/check/index.ts';
import type { Json } from '../../lib/check/manifest.ts';
import { pointerToField } from '../../lib/check/schemas.ts';
import { find, goodTestbed, pickerConfig } from './fixtures.ts';

function schemaViolations(mutate: (objects: KubeObject[]) => void) {
  const objects = goodTestbed();
  mutate(objects);
  return checkManifests(objects).filter((v) => v.lesson === SCHEMA);
}

describe('schema validation', () => {
  it('rejects a Deployment with replicas "two" through the Kubernetes schema', () => {
    const violations = schemaViolations((objects) => {
      (find(objects, 'Deployment', 'router').spec as Json).replicas = 'two';
    });
    expect(violations).toEqual([
      expect.objectContaining({
        object: 'Deployment vllm/router',
        field: 'spec.replicas',
        lesson: SCHEMA,
        message: expect.stringContaining('must be integer (Kubernetes apps/v1 Deployment schema'),
      }),
    ]);
  });

  it('rejects an unknown field as kubectl would: a misspelled container key, a Service field', () => {
    const violations = schemaViolations((objects) => {
      const router = find(objects, 'Deployment', 'router').spec as Json;
      const pod = (router.template as Json).spec as { containers: Json[] };
      pod.containers[0].imagePullPolicyy = 'Always';
      (find(objects, 'Service', 'picker').spec as Json).selectr = { app: 'x' };
    });
    expect(violations.map((v) => `${v.object} ${v.field}: ${v.message}`)).toEqual([
      'Deployment vllm/router spec.template.spec.containers[0].imagePullPolicyy: unknown field (did you mean "imagePullPolicy"?): kubectl rejects it (Kubernetes 1.34 apps/v1 Deployment schema)',
      'Service vllm/picker spec.selectr: unknown field (did you mean "selector"?): kubectl rejects it (Kubernetes 1.34 v1 Service schema)',
    ]);
  });

  it('knows every field the lab itself writes, maps and initialisms included', () => {
    // labels, annotations, resources.limits are maps; clusterIP is spelled clusterIp by cdk8s.
    const objects = goodTestbed();
    const service = find(objects, 'Service', 'picker');
    (service.spec as Json).clusterIP = 'None';
    (service.metadata as Json).annotations = { 'example.com/any-key': 'x' };
    expect(checkManifests(objects).filter((v) => v.lesson === SCHEMA)).toEqual([]);
  });

  it('validates core kinds too (a Service port as a string)', () => {
    const violations = schemaViolations((objects) => {
      (find(objects, 'Service', 'picker').spec as { ports: Json[] }).ports[0].port = '9002';
    });
    expect(violations).toEqual([
      expect.objectContaining({ object: 'Service vllm/picker', field: 'spec.ports[0].port' }),
    ]);
  });

  it('rejects an InferencePool with two targetPorts', () => {
    const violations = schemaViolations((objects) => {
      (find(objects, 'InferencePool', 'qwen3-pool').spec as Json).targetPorts = [
        { number: 8000 },
        { number: 8001 },
      ];
    });
    expect(violations).toEqual([
      expect.objectContaining({
        object: 'InferencePool vllm/qwen3-pool',
        field: 'spec.targetPorts',
        message: expect.stringContaining('must list exactly one port'),
      }),
    ]);
  });

  it('rejects an InferencePool selector with matchExpressions and an endpoint picker without a port', () => {
    const violations = schemaViolations((objects) => {
      const spec = find(objects, 'InferencePool', 'qwen3-pool').spec as Json;
      spec.selector = { matchLabels: { app: 'qwen3' }, matchExpressions: [] };
      spec.endpointPickerRef = { name: 'picker' };
    });
    expect(violations.map((v) => [v.field, v.message.split(' (')[0]])).toEqual([
      ['spec.selector.matchExpressions', 'unknown key "matchExpressions"'],
      ['spec.endpointPickerRef.port', 'is required when the endpoint picker is a Service'],
    ]);
  });

  it.each([
    [
      'a float weight',
      pickerConfig(1.5),
      'data["plugins.yaml"].schedulingProfiles[0].plugins[2].weight',
      'must be an integer',
    ],
    [
      'an unknown key',
      { ...pickerConfig(), scorers: [] },
      'data["plugins.yaml"].scorers',
      'unknown key "scorers"',
    ],
    [
      'a profile naming an undefined plugin',
      { ...pickerConfig(), plugins: [{ type: 'queue-scorer' }] },
      'data["plugins.yaml"].schedulingProfiles[0].plugins[1].pluginRef',
      '"kv-cache-utilization-scorer" is not among the plugins (queue-scorer)',
    ],
  ])('rejects an EndpointPickerConfig with %s', (_, config, field, fragment) => {
    const violations = schemaViolations((objects) => {
      find(objects, 'ConfigMap', 'picker-config').data = { 'plugins.yaml': stringify(config) };
    });
    expect(violations[0]).toEqual(
      expect.objectContaining({
        object: 'ConfigMap vllm/picker-config',
        field,
        message: expect.stringContaining(fragment),
      }),
    );
  });

  it('notes kinds it has no schema for instead of failing them', () => {
    const objects = goodTestbed();
    objects.push({
      apiVersion: 'inference.networking.x-k8s.io/v1alpha2',
      kind: 'InferenceObjective',
      metadata: { name: 'standard', namespace: 'vllm' },
      spec: { anything: true },
    });
    const report = inspectManifests(objects);
    expect(report.violations).toEqual([]);
    expect(report.notes).toContainEqual({
      object: 'InferenceObjective vllm/standard',
      message:
        'not validated: no schema for inference.networking.x-k8s.io/v1alpha2 InferenceObjective (custom resource?)',
    });
  });

  it('knows the built-in kinds of every group, and notes a misspelled kind or an unknown version of one', () => {
    const objects: KubeObject[] = [
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'p' },
        spec: { podSelector: 7 },
      },
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p' },
        spec: { containers: [{ name: 'c', image: 'i', ports: [{ containerPort: 'http' }] }] },
      },
      { apiVersion: 'apps/v1', kind: 'Deploymnet', metadata: { name: 'd' }, spec: {} },
      { apiVersion: 'apps/v9', kind: 'Deployment', metadata: { name: 'd' }, spec: {} },
      { apiVersion: '../v1', kind: 'Pod', metadata: { name: 'p' }, spec: {} },
    ];
    const report = inspectManifests(objects);
    expect(report.violations.filter((v) => v.lesson === SCHEMA).map((v) => [v.object, v.field])).toEqual([
      ['NetworkPolicy p', 'spec.podSelector'],
      ['Pod p', 'spec.containers[0].ports[0].containerPort'],
    ]);
    expect(report.notes.map((n) => n.message)).toEqual(
      expect.arrayContaining([
        expect.stringContaining('no schema for apps/v1 Deploymnet'),
        expect.stringContaining('no schema for apps/v9 Deployment'),
        expect.stringContaining('no schema for ../v1 Pod'),
      ]),
    );
  });

  it('reports a value of the wrong type where a list belongs as a schema violation, without failing', () => {
    const objects: KubeObject[] = [
      { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: 'none' } },
    ];
    const violations = inspectManifests(objects).violations.filter((v) => v.lesson === SCHEMA);
    expect(violations.map((v) => [v.object, v.field])).toEqual([['Pod p', 'spec.containers']]);
  });

  it('requires a name', () => {
    const violations = schemaViolations((objects) => {
      objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: {}, data: {} });
    });
    expect(violations).toEqual([
      expect.objectContaining({ field: 'metadata.name', message: expect.stringContaining('is required') }),
    ]);
  });

  it('turns JSON pointers into field paths', () => {
    expect(pointerToField('/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu')).toBe(
      'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
    );
  });
});
