import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseLabConfig } from '../../lib/config/load.ts';
import { cidrsOverlap, lbEntriesPerService } from '../../lib/config/network-rules.ts';
import { labSettings } from '../../lib/config/sections.ts';
import { configWarnings } from '../../lib/config/warnings.ts';
import { problems } from './problems.ts';

const network = (settings: object, extra: object = {}) => ({ lab: 'network', network: settings, ...extra });
const cilium = (overrides: object = {}) => ({ name: 'dp-cilium', datapath: 'cilium', ...overrides });

describe('network lab configuration (docs/facts.md §N1-3)', () => {
  it('defaults to the LLM-gateway lab; lab: network selects the cells of the spec on c7i.2xlarge', () => {
    expect(parseLabConfig({}).lab).toBe('llm-gateway');
    const config = parseLabConfig({ lab: 'network' });
    expect(config.network.cells).toEqual([
      { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
      { name: 'dp-iptables', datapath: 'iptables', mesh: 'none' },
      { name: 'dp-cilium', datapath: 'cilium', mesh: 'none' },
    ]);
    expect(config.network.instance).toMatchObject({ type: 'c7i.2xlarge', vcpus: 8, gpus: 0 });
    expect(config.network.cilium).toMatchObject({ version: '1.20.2', ipam: 'kubernetes', lbMapMax: 65_536 });
    expect(config.network.istio.version).toBe('1.31.1');
    expect(config.network.fortio).toMatchObject({
      image: 'fortio/fortio:1.75.2',
      connections: 16,
      qps: 500,
      resolutionSeconds: 0.000_01,
    });
    expect(config.network.experiments.serviceScale.steps).toEqual([0, 100, 1_000, 5_000, 10_000]);
    expect(config.network.experiments.conntrack).toMatchObject({
      limits: [2_048, 1_024],
      connections: 4_000,
    });
    // No standing privileged pod unless an operator asks for one.
    expect(config.network.hostProbe).toBe(false);
    expect(parseLabConfig(network({ hostProbe: true })).network.hostProbe).toBe(true);
  });

  it('reads the tracked example', () => {
    const example = parse(readFileSync(new URL('../../examples/network-lab.yaml', import.meta.url), 'utf8'));
    const config = parseLabConfig(example, 'examples/network-lab.yaml');
    expect(config.lab).toBe('network');
    expect(config.stackName).toBe('NetworkLab');
    expect(config.network.cells.map((c) => c.name)).toEqual(['mesh', 'dp-iptables', 'dp-cilium']);
  });

  it('is strict: unknown keys, datapaths and floating images are named', () => {
    expect(problems(network({ cells: [{ name: 'x', datapath: 'ebpf' }] }))).toEqual([
      'network.cells[0].datapath = "ebpf": allowed: iptables, nftables, ipvs, cilium',
    ]);
    expect(problems(network({ fortio: { qsp: 500 } }))[0]).toMatch(
      /^network\.fortio\.qsp: unknown setting \(did you mean "qps"\?\)/,
    );
    expect(problems(network({ fortio: { image: 'fortio/fortio:latest' } }))).toEqual([
      'network.fortio.image = "fortio/fortio:latest": uses the floating tag "latest"; pin a version tag or a digest',
    ]);
    expect(problems(network({ hostProbe: 'yes' }))).toEqual(['network.hostProbe = "yes": must be a boolean']);
  });

  it('keeps the pod and Service ranges out of the lab VPC', () => {
    expect(problems(network({ cells: [cilium()], cilium: { ipam: 'cluster-pool' } }))).toEqual([
      'network.cilium.clusterPoolCidr = "10.0.0.0/8": Cilium\'s cluster-pool pod range 10.0.0.0/8 overlaps the lab VPC 10.0.0.0/16: pod routes would shadow node addresses; choose a range outside it (K3s uses 10.42.0.0/16 for pods, 10.43.0.0/16 for Services)',
    ]);
    expect(
      problems(
        network({ cells: [cilium()], cilium: { ipam: 'cluster-pool', clusterPoolCidr: '10.44.0.0/16' } }),
      ),
    ).toEqual([]);
    expect(problems(network({ podCidr: '10.0.128.0/17' }))[0]).toMatch(
      /^network\.podCidr = "10\.0\.128\.0\/17": the pod range 10\.0\.128\.0\/17 overlaps the lab VPC/,
    );
    expect(problems(network({ serviceCidr: '10.42.0.0/24' }))).toEqual([
      'network.serviceCidr = "10.42.0.0/24": 10.42.0.0/24 overlaps network.podCidr 10.42.0.0/16; K3s needs two separate ranges',
    ]);
  });

  it('requires the socket-LB and CNI settings for Istio on a Cilium cell', () => {
    expect(problems(network({ cells: [cilium({ mesh: 'sidecar' })] }))).toEqual([
      "network.cilium.socketLBHostNamespaceOnly = false: must be true when Istio runs on a Cilium cell (dp-cilium): otherwise Cilium's socket load balancing rewrites connections before the sidecar sees them",
      "network.cilium.cniExclusive = true: must be false when Istio runs on a Cilium cell (dp-cilium): an exclusive Cilium CNI removes Istio's CNI configuration",
    ]);
    expect(
      problems(
        network({
          cells: [cilium({ mesh: 'sidecar' })],
          cilium: { socketLBHostNamespaceOnly: true, cniExclusive: false },
        }),
      ),
    ).toEqual([]);
  });

  it("keeps K3s within the pinned Istio's supported Kubernetes range when a cell runs Istio", () => {
    expect(problems(network({}, { k3s: { version: 'v1.37.1+k3s1' } }))).toEqual([
      'k3s.version = "v1.37.1+k3s1": Istio 1.31.1 supports Kubernetes 1.32 to 1.36, and cells mesh run Istio; choose a K3s release in that range',
    ]);
    // Without Istio the range does not apply.
    expect(problems(network({ cells: [cilium()] }, { k3s: { version: 'v1.37.1+k3s1' } }))).toEqual([]);
    expect(problems(network({ istio: { version: '1.32.0' } }))).toEqual([
      'network.istio.version = "1.32.0": Istio 1.32\'s supported Kubernetes versions are not known to the lab; known: 1.31 (lib/config/network-rules.ts)',
    ]);
  });

  it("keeps fortio's resolution at a tenth of the smallest expected latency", () => {
    expect(problems(network({ fortio: { resolutionSeconds: 0.001 } }))).toEqual([
      'network.fortio.resolutionSeconds = 0.001: 0.001 s is coarser than a tenth of the smallest expected latency (network.experiments.smallestExpectedLatencyMs 0.1 ms): percentiles would be bucket positions; use at most 0.00001 s',
    ]);
    expect(
      problems(
        network({ fortio: { resolutionSeconds: 0.0001 }, experiments: { smallestExpectedLatencyMs: 1 } }),
      ),
    ).toEqual([]);
  });

  it("refuses a Service step that would fill Cilium's LB map, naming both numbers", () => {
    expect(lbEntriesPerService(1)).toBe(3);
    expect(problems(network({ experiments: { serviceScale: { steps: [0, 40_000] } } }))).toEqual([
      'network.experiments.serviceScale.steps = [0,40000]: 40,000 Services x 3 LB map entries per Service = 120,000 entries, above network.cilium.lbMapMax 65,536: the map would fill; raise lbMapMax (sized before install) or lower the largest step',
    ]);
    expect(
      problems(
        network({ cilium: { lbMapMax: 131_072 }, experiments: { serviceScale: { steps: [0, 40_000] } } }),
      ),
    ).toEqual([]);
    // No Cilium cell, no LB map.
    expect(
      problems(
        network({
          cells: [{ name: 'dp-iptables', datapath: 'iptables' }],
          experiments: { serviceScale: { steps: [0, 40_000] } },
        }),
      ),
    ).toEqual([]);
    expect(problems(network({ experiments: { serviceScale: { steps: [0, 100, 100] } } }))).toEqual([
      'network.experiments.serviceScale.steps = [0,100,100]: must increase strictly, e.g. [0, 100, 1000, 5000, 10000]',
    ]);
  });

  it("keeps a cell's ready timeout above its bootstrap's step budgets", () => {
    expect(problems(network({ instance: { readyTimeoutMinutes: 20 } }))[0]).toMatch(
      /^network\.instance\.readyTimeoutMinutes = 20: must be at least \d+, got 20: a cell's step budgets \(minutes: arm_cost_guard \d+, /,
    );
    expect(problems(network({ instance: { readyTimeoutMinutes: 45 } }))).toEqual([]);
  });

  it('names a duplicate cell', () => {
    expect(problems(network({ cells: [cilium(), cilium()] }))).toEqual([
      'network.cells[1].name = "dp-cilium": "dp-cilium" names two cells; each cell needs its own name',
    ]);
  });

  it('warns about ipvs (deprecated) and about cells on different instance types', () => {
    const config = parseLabConfig(
      network({
        cells: [
          { name: 'dp-ipvs', datapath: 'ipvs' },
          { name: 'dp-iptables', datapath: 'iptables', instanceType: 'm7i.2xlarge' },
        ],
      }),
    );
    expect(configWarnings(config)).toEqual([
      "network.cells dp-ipvs: kube-proxy's ipvs mode is deprecated since Kubernetes 1.35 (it still works on 1.36 with the ip_vs modules, which the bootstrap checks)",
      "network.cells: the cells run on different instance types (c7i.2xlarge, m7i.2xlarge): host differences will look like datapath differences; compare against each cell's calibration run",
    ]);
  });

  it('shows only the selected lab in lab config', () => {
    expect(Object.keys(labSettings(parseLabConfig({ lab: 'network' })))).toEqual([
      'lab',
      'stackName',
      'aws',
      'k3s',
      'runner',
      'network',
    ]);
    expect(Object.keys(labSettings(parseLabConfig({})))).not.toContain('network');
  });

  it('compares CIDRs by their shared prefix', () => {
    expect(cidrsOverlap('10.0.0.0/8', '10.0.0.0/16')).toBe(true);
    expect(cidrsOverlap('10.42.0.0/16', '10.0.0.0/16')).toBe(false);
    expect(cidrsOverlap('10.0.255.0/24', '10.0.0.0/16')).toBe(true);
    expect(cidrsOverlap('not-a-cidr', '10.0.0.0/16')).toBe(false);
  });
});
