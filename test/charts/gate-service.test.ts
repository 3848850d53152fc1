import { describe, expect, test } from 'vitest';
import { gateSelector, gateService } from '../../charts/gate-service.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { gateServiceName, stageable } from '../../lib/study/staging.ts';
import { armById, frontEnd } from '../../lib/study/topology.ts';
import { find, synthLab } from './synth.ts';
import { type Manifest, validateManifest } from './validate.ts';

/**
 * A Service's spec as the API server returns it: the chart's spec with the fields the server
 * defaults or assigns (cluster IPs, families, policies, port protocols).
 */
function asServed(spec: Manifest['spec']): Record<string, unknown> {
  return {
    type: 'ClusterIP',
    sessionAffinity: 'None',
    internalTrafficPolicy: 'Cluster',
    ipFamilies: ['IPv4'],
    ipFamilyPolicy: 'SingleStack',
    ...(spec.type === 'NodePort' ? { externalTrafficPolicy: 'Cluster' } : {}),
    ...spec,
    clusterIP: spec.clusterIP ?? '10.43.17.5',
    clusterIPs: [spec.clusterIP ?? '10.43.17.5'],
    ports: (spec.ports as Record<string, unknown>[]).map((p) => ({ protocol: 'TCP', ...p })),
  };
}

/** Whether equality-based label selector text (`k=v,k2=v2`) selects these labels. */
function selects(selector: string, labels: Readonly<Record<string, string>> = {}): boolean {
  return selector.split(',').every((term) => {
    const [key, value] = term.split('=');
    return labels[key] === value;
  });
}

const ALL_ARMS = { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } };

describe('the gate Service of a staged client', () => {
  const lab = synthLab(ALL_ARMS);
  const { config } = lab;
  const staged = studyPlan(config)
    .runs.filter((run) => stageable(config, run))
    .flatMap((run) => run.benchmarks);

  test('every stageable client of every front end gets a valid closed ClusterIP copy of its Service', () => {
    const frontEnds = new Set<string>();
    for (const spec of staged) {
      if (spec.target.kind !== 'arm') throw new Error(`${spec.id} aims at a replica`);
      const fe = frontEnd(config, armById(config, spec.target.arm), spec.target.pair ?? 0);
      frontEnds.add(fe.service);
      const own = find(lab.objects, 'Service', fe.service);
      const gate = gateService(config, spec.id, fe.service, asServed(own.spec));
      validateManifest(gate as unknown as Manifest);
      expect(gate.metadata).toMatchObject({ name: `gate-${spec.id}`, namespace: config.namespace });
      expect(gate.spec.type).toBe('ClusterIP');
      for (const field of ['selector', 'clusterIP', 'clusterIPs', 'externalTrafficPolicy']) {
        expect(gate.spec, `${gate.metadata.name}: ${field}`).not.toHaveProperty(field);
      }
      const ports = own.spec.ports.map(({ nodePort: _, ...p }: Record<string, unknown>) => ({
        protocol: 'TCP',
        ...p,
      }));
      expect(gate.spec.ports).toEqual(ports);
      expect(gate.spec.ports).toContainEqual(expect.objectContaining({ port: fe.port }));
    }
    // The direct Service (a NodePort), the routers and the standalone Envoys.
    expect([...frontEnds].sort()).toEqual([
      'envoy-epp',
      'envoy-epp-prefix3',
      'envoy-llmd-precise',
      'qwen3-nodeport',
      'vllm-router-cache-aware',
      'vllm-router-cache-aware-tuned',
      'vllm-router-round-robin',
    ]);
  });

  test("drops the NodePort's node port and external policy: a gate is reached from inside only", () => {
    const own = find(lab.objects, 'Service', 'qwen3-nodeport');
    expect(own.spec.ports[0].nodePort).toBe(30800);
    const gate = gateService(config, 'baseline-c1', 'qwen3-nodeport', asServed(own.spec));
    expect(gate.spec).toEqual({
      type: 'ClusterIP',
      ports: [{ name: 'http', port: 8000, targetPort: 8000, protocol: 'TCP' }],
      sessionAffinity: 'None',
      internalTrafficPolicy: 'Cluster',
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
    });
  });

  test('keeps the balancing a front end sets: affinity, traffic policies, not-ready endpoints, app protocol', () => {
    const spec = {
      type: 'ClusterIP',
      clusterIP: '10.43.0.9',
      selector: { app: 'vllm-router-cache-aware' },
      ports: [{ name: 'http', port: 8000, targetPort: 'http', protocol: 'TCP', appProtocol: 'http' }],
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
      internalTrafficPolicy: 'Local',
      trafficDistribution: 'PreferClose',
      publishNotReadyAddresses: true,
      ipFamilies: ['IPv4', 'IPv6'],
      ipFamilyPolicy: 'PreferDualStack',
    };
    const gate = gateService(config, 'x', 'vllm-router-cache-aware', spec);
    validateManifest(gate as unknown as Manifest);
    const { clusterIP: _ip, selector: _selector, ...kept } = spec;
    expect(gate.spec).toEqual(kept);
  });

  test('refuses a Service without ports, and a headless one, naming it', () => {
    expect(() => gateService(config, 'x', 'envoy-epp', { selector: { app: 'envoy-epp' } })).toThrow(
      'service/envoy-epp has no ports: a gate cannot copy it',
    );
    expect(() => gateService(config, 'x', 'envoy-epp', { ports: [] })).toThrow(
      'service/envoy-epp has no ports',
    );
    const headless = find(lab.objects, 'Service', 'qwen3-headless');
    expect(() => gateService(config, 'x', 'qwen3-headless', asServed(headless.spec))).toThrow(
      'service/qwen3-headless is headless (clusterIP: None): a gate copies only a Service with a cluster IP',
    );
  });

  test('is labelled so that gateSelector() finds every gate and no other Service of the lab', () => {
    const own = find(lab.objects, 'Service', 'envoy-epp');
    const gate = gateService(config, 'arm-epp-prefix', 'envoy-epp', asServed(own.spec));
    expect(gate.metadata.labels).toEqual({
      'app.kubernetes.io/part-of': 'llm-gateway-lab',
      'app.kubernetes.io/component': 'gate',
      'lab.llm-gateway/benchmark': 'arm-epp-prefix',
    });
    expect(selects(gateSelector(), gate.metadata.labels)).toBe(true);
    const services = lab.objects.filter((o) => o.kind === 'Service');
    expect(services.length).toBeGreaterThan(5);
    for (const service of services) expect(selects(gateSelector(), service.metadata.labels)).toBe(false);
  });

  test('its name is a DNS-1035 label for every client of the serial and the parallel study', () => {
    for (const overrides of [{}, ALL_ARMS, { study: { parallelism: 2 } }]) {
      const plan = studyPlan(parseLabConfig(overrides));
      for (const spec of plan.runs.flatMap((run) => run.benchmarks)) {
        const name = gateServiceName(spec.id);
        expect(name).toBe(`gate-${spec.id}`);
        // Service names are DNS-1035 labels (Kubernetes' ValidateServiceName).
        expect(name, name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
        expect(name.length, name).toBeLessThanOrEqual(63);
      }
    }
  });
});
