import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Service } from 'kubernetes-models/v1/Service';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { SERVICE_TEMPLATE_CONFIG_MAP, SERVICE_TEMPLATE_KEY } from '../../../charts/network/service-scale.ts';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import { inspectManifests, type KubeObject, loadManifestFolder } from '../../../lib/check/index.ts';
import { imageTagProblem } from '../../../lib/config/fields.ts';
import { loadLabConfig, parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { probeBundles } from '../../../lib/network/probes/bundle.ts';
import { tempDir } from '../../temp.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
type Any = any;

const example = () => loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

async function synthesize(config: LabConfig) {
  const out = tempDir('network-cells-');
  synthesizeCluster(config, out);
  const cells: Record<string, { dir: string; objects: Any[] }> = {};
  for (const cell of config.network.cells) {
    const dir = join(out, cell.name);
    cells[cell.name] = { dir, objects: (await loadManifestFolder(dir)).objects };
  }
  return { out, cells };
}

const find = (objects: Any[], kind: string, name: string, namespace?: string): Any =>
  objects.find(
    (o) => o.kind === kind && o.metadata.name === name && (!namespace || o.metadata.namespace === namespace),
  );
const podSpecs = (objects: Any[]): Any[] =>
  objects.flatMap((o) => (o.spec?.template?.spec ? [o.spec.template.spec] : []));

describe('the example network lab synthesizes one folder per cell', async () => {
  const { out, cells } = await synthesize(example());

  test('a folder per cell with its charts in apply order, jobs and prerequisites', () => {
    expect(readdirSync(out).sort()).toEqual(['dp-cilium', 'dp-iptables', 'mesh']);
    expect(readdirSync(cells.mesh.dir).filter((f) => f.endsWith('.yaml'))).toEqual([
      '00-namespaces.yaml',
      '10-fortio.yaml',
      '20-mesh-policies.yaml',
      '30-service-scale.yaml',
      '50-node-probes.yaml',
      '90-runner.yaml',
    ]);
    expect(existsSync(join(cells['dp-iptables'].dir, '20-mesh-policies.yaml'))).toBe(false);
    expect(existsSync(join(cells.mesh.dir, 'jobs', 'fortio-clients.yaml'))).toBe(true);
    const cilium = JSON.parse(readFileSync(join(cells['dp-cilium'].dir, 'prerequisites.json'), 'utf8'));
    expect(cilium.prerequisites.map((p: Any) => p.id)).toEqual(['cilium']);
    expect(parse(readFileSync(join(cells['dp-cilium'].dir, 'helm-values', 'cilium.yaml'), 'utf8'))).toEqual(
      cilium.prerequisites[0].values,
    );
  });

  test('every object validates (Kubernetes schemas, Istio v1 CRDs) and lab check passes', () => {
    for (const [name, { objects }] of Object.entries(cells)) {
      const report = inspectManifests(objects as KubeObject[]);
      expect(report.violations, name).toEqual([]);
      expect(report.notes, name).toEqual([]);
    }
  });

  test('the Service template is a valid ClusterIP Service selecting the one-replica backend', () => {
    const { objects } = cells['dp-iptables'];
    const template = JSON.parse(
      find(objects, 'ConfigMap', SERVICE_TEMPLATE_CONFIG_MAP).data[SERVICE_TEMPLATE_KEY],
    );
    expect(() => new Service(template).validate()).not.toThrow();
    expect(template.spec.type).toBe('ClusterIP');
    const backend = find(objects, 'Deployment', template.spec.selector.app, 'plain');
    expect(backend.spec.replicas).toBe(1);
    expect(backend.spec.template.spec.containers[0].ports[0].containerPort).toBe(
      template.spec.ports[0].targetPort,
    );
    // The runner creates the Services: none in the manifests but the test servers'.
    expect(objects.filter((o: Any) => o.kind === 'Service').map((o: Any) => o.metadata.name)).toEqual([
      'fortio',
      'sse-server',
    ]);
  });

  test('mesh namespace labelled for injection, plain not; Istio objects only on the mesh cell', () => {
    const mesh = cells.mesh.objects;
    expect(find(mesh, 'Namespace', 'mesh').metadata.labels['istio-injection']).toBe('enabled');
    expect(find(mesh, 'Namespace', 'mesh-default').metadata.labels['istio-injection']).toBe('enabled');
    expect(find(mesh, 'Namespace', 'plain').metadata.labels['istio-injection']).toBeUndefined();
    expect(
      mesh
        .filter((o: Any) => o.apiVersion.includes('istio.io'))
        .map((o: Any) => o.kind)
        .sort(),
    ).toEqual([
      'AuthorizationPolicy',
      'DestinationRule',
      'DestinationRule',
      'PeerAuthentication',
      'PeerAuthentication',
    ]);
    for (const name of ['dp-iptables', 'dp-cilium']) {
      const objects = cells[name].objects;
      expect(find(objects, 'Namespace', 'mesh')).toBeUndefined();
      expect(find(objects, 'Namespace', 'mesh-default')).toBeUndefined();
      expect(objects.filter((o: Any) => o.apiVersion.includes('istio.io'))).toEqual([]);
    }
  });

  test('the policies of the mTLS experiments', () => {
    const mesh = cells.mesh.objects;
    expect(find(mesh, 'PeerAuthentication', 'default').spec).toEqual({ mtls: { mode: 'STRICT' } });
    expect(find(mesh, 'PeerAuthentication', 'port-exception').spec).toEqual({
      selector: { matchLabels: { app: 'fortio-permissive' } },
      mtls: { mode: 'STRICT' },
      portLevelMtls: { '8080': { mode: 'PERMISSIVE' } },
    });
    expect(find(mesh, 'AuthorizationPolicy', 'allow-good').spec.rules).toEqual([
      { from: [{ source: { principals: ['cluster.local/ns/mesh/sa/good'] } }] },
    ]);
    expect(find(mesh, 'DestinationRule', 'fortio-mtls-on').spec.trafficPolicy.tls.mode).toBe('ISTIO_MUTUAL');
    expect(
      find(mesh, 'DestinationRule', 'fortio-permissive-mtls-off').spec.trafficPolicy.portLevelSettings,
    ).toEqual([{ port: { number: 8080 }, tls: { mode: 'DISABLE' } }]);
    expect(['good', 'bad'].map((sa) => find(mesh, 'ServiceAccount', sa, 'mesh')?.metadata.name)).toEqual([
      'good',
      'bad',
    ]);
  });

  test("E2's mesh default: a fortio server in mesh-default, where no PeerAuthentication exists", () => {
    const mesh = cells.mesh.objects;
    const server = find(mesh, 'Deployment', 'fortio', 'mesh-default');
    expect(server.spec.template.spec.containers[0].image).toBe(
      find(mesh, 'Deployment', 'fortio', 'mesh').spec.template.spec.containers[0].image,
    );
    expect(find(mesh, 'Service', 'fortio', 'mesh-default').spec.ports[0]).toMatchObject({
      name: 'http-echo',
      port: 8080,
    });
    expect(
      mesh.filter((o: Any) => o.kind === 'PeerAuthentication').map((o: Any) => o.metadata.namespace),
    ).toEqual(['mesh', 'mesh']);
  });

  test('fortio: HTTP 8080 and gRPC 8079, and the same server on a second container port for E4', () => {
    const deployment = find(cells.mesh.objects, 'Deployment', 'fortio', 'mesh');
    const [main, l4] = deployment.spec.template.spec.containers;
    expect(main.ports.map((p: Any) => p.containerPort)).toEqual([8080, 8079]);
    expect(l4.ports.map((p: Any) => p.containerPort)).toEqual([8082]);
    expect(l4.image).toBe(main.image);
    const service = find(cells.mesh.objects, 'Service', 'fortio', 'mesh');
    expect(service.spec.ports.map((p: Any) => [p.name, p.targetPort])).toEqual([
      ['http-echo', 8080],
      ['grpc-ping', 8079],
      ['tcp-echo', 8082],
    ]);
  });

  test('every pod pinned to its cell node, images pinned, requests explicit', () => {
    for (const [name, { objects }] of Object.entries(cells)) {
      const specs = podSpecs(objects);
      expect(specs.length).toBeGreaterThan(3);
      for (const spec of specs) {
        expect(spec.nodeSelector).toEqual({ 'network-lab/cell': name });
        for (const container of spec.containers) {
          expect(imageTagProblem(container.image), container.image).toBeUndefined();
          expect(container.resources.requests.cpu).toBeDefined();
          expect(container.resources.requests.memory).toBeDefined();
          expect(container.resources.limits.memory).toBeDefined();
        }
      }
    }
  });

  test('no standing privileged pod by default: the host probe is opt-in (network.hostProbe)', () => {
    for (const [name, { dir, objects }] of Object.entries(cells)) {
      expect(existsSync(join(dir, '40-host-probe.yaml')), name).toBe(false);
      expect(find(objects, 'Deployment', 'host-probe'), name).toBeUndefined();
      // What stays on the host network is the E10 conntrack driver Job, which is not privileged.
      const privileged = podSpecs(objects).filter((spec) =>
        spec.containers.some((c: Any) => c.securityContext?.privileged === true),
      );
      expect(privileged, name).toEqual([]);
    }
  });

  test("the lab's Node probes: bundles in a ConfigMap per namespace, run from its mount", () => {
    const { objects } = cells.mesh;
    for (const namespace of ['plain', 'mesh']) {
      expect(find(objects, 'ConfigMap', 'network-probes', namespace).data).toEqual(probeBundles());
    }
    const probes = podSpecs(objects).flatMap((spec) =>
      spec.containers
        .filter((c: Any) => c.command?.[0] === 'node' && c.name !== 'runner')
        .map((c: Any) => ({ spec, c })),
    );
    expect(probes.map(({ c }) => c.name).sort()).toEqual([
      'conntrack-driver',
      'service-prober',
      'sse-client',
      'sse-client',
      'sse-server',
      'sse-server',
    ]);
    for (const { spec, c } of probes) {
      expect(c.command.slice(0, 2)).toEqual(['node', `/probes/${c.name}.mjs`]);
      expect(c.image).toBe(example().runner.image);
      expect(spec.volumes).toEqual([{ name: 'probes', configMap: { name: 'network-probes' } }]);
      expect(c.volumeMounts).toEqual([{ name: 'probes', mountPath: '/probes', readOnly: true }]);
    }
    const flags = (name: string) => probes.find(({ c }) => c.name === name)?.c.command.slice(2);
    expect(flags('sse-server')).toEqual(['--port', '8080', '--events', '200', '--interval-ms', '20']);
    expect(flags('service-prober')).toEqual([
      '--target',
      'fortio.plain.svc.cluster.local:8080',
      '--samples',
      '20',
      '--attempt-timeout-ms',
      '20',
    ]);
    const driver = probes.find(({ c }) => c.name === 'conntrack-driver');
    expect(driver?.spec.hostNetwork).toBe(true);
    expect(flags('conntrack-driver')).toEqual([
      '--host',
      '127.0.0.1',
      '--connections',
      '4000',
      '--connect-timeout-ms',
      '5000',
    ]);
  });

  test('the cell ConfigMap records the Cilium values on the Cilium cell only', () => {
    const data = (name: string) => find(cells[name].objects, 'ConfigMap', 'network-cell').data;
    expect(JSON.parse(data('dp-cilium')['cell.json'])).toMatchObject({ datapath: 'cilium', mesh: 'none' });
    expect(parse(data('dp-cilium')['cilium-values.yaml']).kubeProxyReplacement).toBe(true);
    expect(data('dp-iptables')['cilium-values.yaml']).toBeUndefined();
  });
});

describe('network.hostProbe on: the standing host probe, in apply order', async () => {
  // The default cells (the example's three) with the probe turned on.
  const config = parseLabConfig({ lab: 'network', network: { hostProbe: true } });
  const { cells } = await synthesize(config);

  test('40-host-probe.yaml between the E9 backend and the Node probes on every cell', () => {
    for (const [name, { dir }] of Object.entries(cells)) {
      const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
      expect(files.indexOf('40-host-probe.yaml'), name).toBe(files.indexOf('30-service-scale.yaml') + 1);
      expect(files.indexOf('50-node-probes.yaml'), name).toBe(files.indexOf('40-host-probe.yaml') + 1);
    }
  });

  test('privileged, host network, netshoot pinned, no port; schemas and lab check pass', () => {
    for (const [name, { objects }] of Object.entries(cells)) {
      const spec = find(objects, 'Deployment', 'host-probe', 'plain').spec.template.spec;
      expect(spec.hostNetwork, name).toBe(true);
      expect(spec.nodeSelector, name).toEqual({ 'network-lab/cell': name });
      expect(spec.containers[0].image).toBe('nicolaka/netshoot:v0.16');
      expect(spec.containers[0].securityContext.privileged).toBe(true);
      expect(spec.containers[0].ports).toBeUndefined();
      const report = inspectManifests(objects as KubeObject[]);
      expect(report.violations, name).toEqual([]);
      expect(report.notes, name).toEqual([]);
    }
  });
});

describe('other cells', () => {
  test('ambient: the mesh namespace joins the ambient data plane; istiod ambient, CNI and ztunnel', async () => {
    const config = parseLabConfig({
      lab: 'network',
      network: { cells: [{ name: 'ambient', datapath: 'iptables', mesh: 'ambient' }] },
    });
    const { cells } = await synthesize(config);
    const { objects, dir } = cells.ambient;
    expect(find(objects, 'Namespace', 'mesh').metadata.labels).toMatchObject({
      'istio.io/dataplane-mode': 'ambient',
    });
    expect(find(objects, 'Namespace', 'mesh').metadata.labels['istio-injection']).toBeUndefined();
    const list = JSON.parse(readFileSync(join(dir, 'prerequisites.json'), 'utf8')).prerequisites;
    expect(list.map((p: Any) => [p.id, p.chart, p.version])).toEqual([
      ['istio-base', 'base', '1.31.1'],
      ['istiod', 'istiod', '1.31.1'],
      ['istio-cni', 'cni', '1.31.1'],
      ['ztunnel', 'ztunnel', '1.31.1'],
    ]);
    expect(list[1].values).toEqual({ profile: 'ambient' });
    expect(list[2].values).toEqual({ profile: 'ambient', global: { platform: 'k3s' } });
    expect(inspectManifests(objects).violations).toEqual([]);
    // The L4 mTLS evidence of ambient runs is ztunnel's: the runner may list its pods, nothing more.
    const ztunnelRole = objects.find(
      (o: Any) => o.kind === 'Role' && o.metadata.namespace === 'istio-system',
    );
    expect(ztunnelRole?.rules).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }]);
    expect(find(objects, 'Namespace', 'mesh-default').metadata.labels['istio.io/dataplane-mode']).toBe(
      'ambient',
    );
  });

  test('Istio on a Cilium cell: Cilium first, its values with socket LB and CNI settings for Istio', async () => {
    const config = parseLabConfig({
      lab: 'network',
      network: {
        cells: [{ name: 'cilium-mesh', datapath: 'cilium', mesh: 'sidecar' }],
        cilium: { socketLBHostNamespaceOnly: true, cniExclusive: false },
      },
    });
    const { cells } = await synthesize(config);
    const { objects, dir } = cells['cilium-mesh'];
    const list = JSON.parse(readFileSync(join(dir, 'prerequisites.json'), 'utf8')).prerequisites;
    expect(list.map((p: Any) => p.id)).toEqual(['cilium', 'istio-base', 'istiod']);
    expect(list[0].values).toMatchObject({
      socketLB: { hostNamespaceOnly: true },
      cni: { exclusive: false },
    });
    expect(inspectManifests(objects).violations).toEqual([]);
  });
});
