import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import {
  fileOf,
  inspectManifests,
  type KubeObject,
  loadManifestFolder,
  type Violation,
} from '../../lib/check/index.ts';
import { runLab } from '../../lib/cli/program.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { captureOutput } from '../cli/capture.ts';
import { tempDir } from '../temp.ts';

/**
 * The network lab's `lab check` rules, each driven by breaking a synthesized cell on purpose: the
 * example's three cells, an ambient cell and Istio on a Cilium cell.
 */

// biome-ignore lint/suspicious/noExplicitAny: tests edit arbitrary manifest fields
type Any = any;

const LESSON = {
  resolution: 21,
  namespaces: 22,
  ports: 23,
  portLevel: 24,
  rules: 25,
  cilium: 26,
  exposure: 27,
};

const config = parseLabConfig({
  lab: 'network',
  network: {
    cells: [
      { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
      { name: 'dp-iptables', datapath: 'iptables' },
      { name: 'dp-cilium', datapath: 'cilium' },
      { name: 'ambient', datapath: 'iptables', mesh: 'ambient' },
      { name: 'cilium-mesh', datapath: 'cilium', mesh: 'sidecar' },
    ],
    cilium: { socketLBHostNamespaceOnly: true, cniExclusive: false },
  },
});
const out = tempDir('network-lessons-');
synthesizeCluster(config, out);
const synthesized = new Map<string, Any[]>();
for (const cell of config.network.cells) {
  synthesized.set(cell.name, (await loadManifestFolder(join(out, cell.name))).objects);
}

const cell = (name: string): Any[] => structuredClone(synthesized.get(name) ?? []);
const find = (objects: Any[], kind: string, name: string, namespace?: string): Any => {
  const found = objects.find(
    (o) => o.kind === kind && o.metadata.name === name && (!namespace || o.metadata.namespace === namespace),
  );
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
const check = (objects: Any[]): Violation[] => inspectManifests(objects as KubeObject[]).violations;
/** The violations, asserting every one belongs to the lesson under test. */
function caught(objects: Any[], lesson: number): string[] {
  const violations = check(objects);
  expect(violations.map((v) => v.lesson)).toEqual(violations.map(() => lesson));
  return violations.map((v) => `${v.object} ${v.field}: ${v.message}`);
}
const cellData = (objects: Any[]) => find(objects, 'ConfigMap', 'network-cell').data;
function editCilium(objects: Any[], edit: (values: Any) => void) {
  const data = cellData(objects);
  const values = parse(data['cilium-values.yaml']);
  edit(values);
  data['cilium-values.yaml'] = stringify(values);
}
const clientArgs = (objects: Any[], job = 'fortio-plain'): string[] =>
  find(objects, 'Job', job).spec.template.spec.containers[0].args;

describe('every synthesized cell passes', () => {
  test.each(config.network.cells.map((c) => c.name))('%s', (name) => {
    expect(check(cell(name))).toEqual([]);
  });
});

describe('network 1: fortio resolution flag present and fine enough', () => {
  test('a fortio load without -r is caught', () => {
    const objects = cell('mesh');
    const args = clientArgs(objects);
    args.splice(args.indexOf('-r'), 2);
    const [message, ...rest] = caught(objects, LESSON.resolution);
    expect(rest).toEqual([]);
    expect(message).toContain(
      'Job plain/fortio-plain spec.template.spec.containers[0].args: fortio load without -r',
    );
    expect(message).toContain('add -r 0.00001');
  });

  test("fortio's default 1 ms written out is caught, in any flag form", () => {
    for (const form of [['-r', '0.001'], ['-r=0.001'], ['--r', '0.001']]) {
      const objects = cell('mesh');
      const args = clientArgs(objects, 'fortio-mesh');
      args.splice(args.indexOf('-r'), 2, ...form);
      expect(caught(objects, LESSON.resolution)).toEqual([
        expect.stringContaining(
          'fortio -r 0.001 is coarser than a tenth of the smallest expected latency (0.1 ms)',
        ),
      ]);
    }
  });

  test('a finer resolution passes; fortio through a command (`fortio load`) is judged too', () => {
    const objects = cell('dp-iptables');
    const container = find(objects, 'Job', 'fortio-plain').spec.template.spec.containers[0];
    container.args[container.args.indexOf('-r') + 1] = '0.000001';
    expect(check(objects)).toEqual([]);
    container.command = ['fortio'];
    container.args.splice(container.args.indexOf('-r'), 2);
    expect(caught(objects, LESSON.resolution)).toHaveLength(1);
  });

  test("the cell's smallest expected latency sets the bound", () => {
    const objects = cell('dp-iptables');
    const data = cellData(objects);
    data['cell.json'] = JSON.stringify({ ...JSON.parse(data['cell.json']), smallestExpectedLatencyMs: 0.05 });
    expect(caught(objects, LESSON.resolution)).toEqual([expect.stringContaining('use -r 0.000005 or finer')]);
  });
});

describe('network 2: mesh namespace labelled, plain not', () => {
  test('the plain namespace labelled for injection is caught', () => {
    const objects = cell('mesh');
    find(objects, 'Namespace', 'plain').metadata.labels['istio-injection'] = 'enabled';
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining(
        'Namespace plain metadata.labels: the out-of-mesh namespace is labelled istio-injection=enabled',
      ),
    ]);
  });

  test('a mesh namespace without its label is caught', () => {
    const objects = cell('mesh');
    delete find(objects, 'Namespace', 'mesh').metadata.labels['istio-injection'];
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining("metadata.labels.istio-injection: is missing; the cell's mesh is sidecar"),
    ]);
  });

  test("mesh-default without its label is caught, by name (E2's mesh-default server would get no sidecar)", () => {
    const objects = cell('mesh');
    delete find(objects, 'Namespace', 'mesh-default').metadata.labels['istio-injection'];
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining('so the mesh namespace mesh-default needs istio-injection=enabled'),
    ]);
  });

  test("a PeerAuthentication in mesh-default is caught: E2's no-policy row would measure it, not the mesh default", () => {
    const objects = cell('mesh');
    const strict = structuredClone(find(objects, 'PeerAuthentication', 'default', 'mesh'));
    strict.metadata.namespace = 'mesh-default';
    objects.push(strict);
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining(
        'PeerAuthentication mesh-default/default metadata.namespace: a PeerAuthentication in mesh-default: E2\'s "no PeerAuthentication" row',
      ),
    ]);
  });

  test('an ambient namespace also labelled for sidecars is caught', () => {
    const objects = cell('ambient');
    find(objects, 'Namespace', 'mesh').metadata.labels['istio-injection'] = 'enabled';
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining('would mix sidecar and ambient data planes'),
    ]);
  });

  test('a plain pod asking for a sidecar is caught', () => {
    const objects = cell('dp-iptables');
    find(objects, 'Deployment', 'fortio', 'plain').spec.template.metadata.labels['sidecar.istio.io/inject'] =
      'true';
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining(
        'Deployment plain/fortio spec.template.metadata.labels: sidecar.istio.io/inject=true',
      ),
    ]);
  });

  test('mesh objects on a cell without a mesh are caught', () => {
    const objects = [...cell('dp-iptables'), ...cell('mesh').filter((o) => o.kind === 'PeerAuthentication')];
    objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh' } });
    expect(caught(objects, LESSON.namespaces)).toEqual([
      expect.stringContaining('Namespace mesh metadata.name: cell dp-iptables runs no mesh'),
      expect.stringContaining('PeerAuthentication mesh/default kind: cell dp-iptables runs no mesh'),
      expect.stringContaining('PeerAuthentication mesh/port-exception kind: cell dp-iptables runs no mesh'),
    ]);
  });
});

describe('network 3: http- and tcp- ports on distinct target ports', () => {
  test("the tcp- port on the http- port's target is caught", () => {
    const objects = cell('mesh');
    const service = find(objects, 'Service', 'fortio', 'mesh');
    service.spec.ports[2].targetPort = 8080;
    expect(caught(objects, LESSON.ports)).toEqual([
      'Service mesh/fortio spec.ports[2].targetPort: port "tcp-echo" (tcp) reaches container port 8080, like port "http-echo" (http): two protocols on one target port are ambiguous for the inbound sidecar; give the tcp- port its own container port',
    ]);
  });

  test('a named target port and a second Service selecting the same pods are resolved', () => {
    const objects = cell('mesh');
    objects.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'fortio-l4', namespace: 'mesh' },
      spec: { selector: { app: 'fortio' }, ports: [{ name: 'tcp-raw', port: 9000, targetPort: 'http' }] },
    });
    expect(caught(objects, LESSON.ports)).toEqual([
      expect.stringContaining(
        'Service mesh/fortio-l4 spec.ports[0].targetPort: port "tcp-raw" (tcp) reaches container port 8080, like port "http-echo" (http) of Service fortio',
      ),
    ]);
  });
});

describe('network 4: portLevelMtls only with a selector, keyed by container port', () => {
  test('a port-level exception without a selector is caught (and the mTLS-off arm then meets STRICT)', () => {
    const objects = cell('mesh');
    delete find(objects, 'PeerAuthentication', 'port-exception').spec.selector;
    const violations = check(objects);
    expect(violations.map((v) => v.lesson)).toEqual([LESSON.portLevel, LESSON.rules]);
    expect(violations[0].message).toContain('port-level mTLS without spec.selector.matchLabels');
    expect(violations[0].field).toBe('spec.portLevelMtls');
    expect(violations[1].message).toContain('enforces STRICT mTLS on container port 8080');
  });

  test('a key that is no container port of the selected pods is caught', () => {
    const objects = cell('mesh');
    const spec = find(objects, 'PeerAuthentication', 'port-exception').spec;
    spec.portLevelMtls = { '80': { mode: 'PERMISSIVE' }, '8080': { mode: 'PERMISSIVE' } };
    expect(caught(objects, LESSON.portLevel)).toEqual([
      'PeerAuthentication mesh/port-exception spec.portLevelMtls["80"]: 80 is no container port of the selected pods (8079, 8080, 8082): the key is the workload\'s port, not the Service\'s; the exception would never apply',
    ]);
  });
});

describe('network 5: DestinationRule TLS mode matching its arm', () => {
  test('the mTLS-on rule set to DISABLE is caught', () => {
    const objects = cell('mesh');
    find(objects, 'DestinationRule', 'fortio-mtls-on').spec.trafficPolicy.tls.mode = 'DISABLE';
    const messages = caught(objects, LESSON.rules);
    expect(messages[0]).toBe(
      'DestinationRule mesh/fortio-mtls-on spec.trafficPolicy.tls.mode: is DISABLE, but the rule serves the mTLS-on arm (network-lab/mtls=on): use ISTIO_MUTUAL',
    );
    // And it would send plaintext to a STRICT server, on every port.
    expect(messages.slice(1)).toEqual(
      [8080, 8079, 8082].map((port) =>
        expect.stringContaining(`enforces STRICT mTLS on container port ${port}`),
      ),
    );
  });

  test('a rule without its arm label is caught', () => {
    const objects = cell('mesh');
    delete find(objects, 'DestinationRule', 'fortio-mtls-on').metadata.labels['network-lab/mtls'];
    expect(caught(objects, LESSON.rules)).toEqual([
      expect.stringContaining(
        'metadata.labels["network-lab/mtls"]: is missing: a DestinationRule of the lab names its encryption arm',
      ),
    ]);
  });

  test('mTLS off for every port of a server whose other ports stay STRICT is caught', () => {
    const objects = cell('mesh');
    find(objects, 'DestinationRule', 'fortio-permissive-mtls-off').spec.trafficPolicy = {
      tls: { mode: 'DISABLE' },
    };
    expect(caught(objects, LESSON.rules)).toEqual([
      expect.stringContaining(
        'DISABLE sends plaintext to fortio-permissive port 8079, where fortio-permissive enforces STRICT mTLS on container port 8079',
      ),
      expect.stringContaining('port 8082'),
    ]);
  });
});

describe('network 6: Cilium values coherent with the cell', () => {
  test('kube-proxy replacement off on a cell without kube-proxy is caught', () => {
    const objects = cell('dp-cilium');
    editCilium(objects, (v) => {
      v.kubeProxyReplacement = false;
    });
    expect(caught(objects, LESSON.cilium)).toEqual([
      expect.stringContaining('data["cilium-values.yaml"].kubeProxyReplacement: is false; must be true'),
    ]);
  });

  test("Cilium's default cluster-pool (10.0.0.0/8) is caught: it overlaps the VPC", () => {
    const objects = cell('dp-cilium');
    editCilium(objects, (v) => {
      v.ipam = { mode: 'cluster-pool' };
    });
    expect(caught(objects, LESSON.cilium)).toEqual([
      expect.stringContaining("pod range 10.0.0.0/8 (Cilium's default) overlaps the lab VPC 10.0.0.0/16"),
    ]);
  });

  test('an LB map smaller than the largest Services step is caught', () => {
    const objects = cell('dp-cilium');
    editCilium(objects, (v) => {
      v.bpf.lbMapMax = 16_384;
    });
    expect(caught(objects, LESSON.cilium)).toEqual([
      expect.stringContaining('16,384 entries cannot hold the largest Services step (30,000 entries)'),
    ]);
  });

  test('with Istio: socket LB in pod namespaces and an exclusive CNI are caught', () => {
    const objects = cell('cilium-mesh');
    editCilium(objects, (v) => {
      v.socketLB.hostNamespaceOnly = false;
      v.cni.exclusive = true;
    });
    expect(caught(objects, LESSON.cilium)).toEqual([
      expect.stringContaining('socketLB.hostNamespaceOnly: must be true: Istio runs on cell cilium-mesh'),
      expect.stringContaining('cni.exclusive: must be false: Istio runs on cell cilium-mesh'),
    ]);
  });

  test('no API server address, values on a kube-proxy cell, and missing values are caught', () => {
    const noHost = cell('dp-cilium');
    editCilium(noHost, (v) => {
      v.k8sServiceHost = '';
    });
    expect(caught(noHost, LESSON.cilium)).toEqual([expect.stringContaining('k8sServiceHost: is ""')]);

    const iptables = cell('dp-iptables');
    cellData(iptables)['cilium-values.yaml'] = cellData(cell('dp-cilium'))['cilium-values.yaml'];
    expect(caught(iptables, LESSON.cilium)).toEqual([
      expect.stringContaining(
        'cell dp-iptables runs kube-proxy (iptables): Cilium values do not belong to it',
      ),
    ]);

    const missing = cell('dp-cilium');
    delete cellData(missing)['cilium-values.yaml'];
    expect(caught(missing, LESSON.cilium)).toEqual([
      expect.stringContaining('is missing: cell dp-cilium runs Cilium'),
    ]);
  });
});

describe('network 7: no NodePort, LoadBalancer or public exposure', () => {
  test('a NodePort Service is caught', () => {
    const objects = cell('dp-iptables');
    find(objects, 'Service', 'fortio').spec.type = 'NodePort';
    expect(caught(objects, LESSON.exposure)).toEqual([
      expect.stringContaining('Service plain/fortio spec.type: is NodePort'),
    ]);
  });

  test('a LoadBalancer Service template is caught before the runner copies it', () => {
    const objects = cell('dp-cilium');
    const data = find(objects, 'ConfigMap', 'service-scale-template').data;
    const template = JSON.parse(data['service.json']);
    template.spec.type = 'LoadBalancer';
    data['service.json'] = JSON.stringify(template);
    expect(caught(objects, LESSON.exposure)).toEqual([
      expect.stringContaining(
        'ConfigMap plain/service-scale-template data["service.json"].spec.type: is LoadBalancer',
      ),
    ]);
  });

  test('a host port and a port on a host-network pod (the conntrack driver) are caught', () => {
    const objects = cell('dp-iptables');
    find(objects, 'Deployment', 'fortio').spec.template.spec.containers[0].ports[0].hostPort = 8080;
    find(objects, 'Job', 'conntrack-driver').spec.template.spec.containers[0].ports = [
      { containerPort: 9090 },
    ];
    expect(caught(objects, LESSON.exposure)).toEqual([
      expect.stringContaining('containers[0].ports[0].hostPort: 8080 publishes the container'),
      expect.stringContaining('port 9090 on a host-network pod listens on the node'),
    ]);
  });
});

describe('schemas of the Istio kinds', () => {
  test('an unknown key and a bad enum in a PeerAuthentication are schema violations', () => {
    const objects = cell('mesh');
    const spec = find(objects, 'PeerAuthentication', 'default').spec;
    spec.mtls.mode = 'STRICTER';
    spec.mtl = {};
    const violations = check(objects).filter((v) => v.lesson === 0);
    expect(violations.map((v) => v.field).sort()).toEqual(['spec.mtl', 'spec.mtls.mode']);
  });
});

describe('lab check on a cell folder', () => {
  test('exit 0 on a synthesized cell, 1 with the network lesson named on a broken one', async () => {
    const dir = join(out, 'dp-iptables');
    expect((await captureOutput(() => runLab(['check', dir]))).value).toBe(0);
    const file = join(dir, '00-namespaces.yaml');
    const namespaces = (await loadManifestFolder(dir)).objects.filter((o) => fileOf(o) === file) as Any[];
    find(namespaces, 'Namespace', 'plain').metadata.labels['istio-injection'] = 'enabled';
    writeFileSync(file, namespaces.map((o) => stringify(o)).join('---\n'));
    const { value, stdout, stderr } = await captureOutput(() => runLab(['check', dir]));
    expect(value).toBe(1);
    expect(stdout).toMatch(/^network 2 +Namespace plain {2}metadata\.labels: the out-of-mesh namespace/m);
    expect(stderr).toContain('1 violation (network 2: 1)');
  });
});
