import { describe, expect, test } from 'vitest';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { lbEntriesPerService } from '../../../lib/config/network-rules.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import {
  DEFAULT_NETWORK_RUN_OVERHEADS,
  ENTRY_MODELS,
  formatNetworkPlan,
  type NetworkRunOverheads,
  planNetworkStudy,
  runSeconds,
} from '../../../lib/network/study/planner.ts';
import { studyStartSeconds } from '../../../lib/network/study/timing.ts';

const allDatapaths = (network: object = {}) =>
  parseLabConfig({
    lab: 'network',
    network: {
      cells: [
        { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
        { name: 'dp-iptables', datapath: 'iptables' },
        { name: 'dp-nftables', datapath: 'nftables' },
        { name: 'dp-ipvs', datapath: 'ipvs' },
        { name: 'dp-cilium', datapath: 'cilium' },
      ],
      ...network,
    },
  });
/** A loaded configuration edited past its own rules, as a plan may be asked about. */
const edited = (config: LabConfig, network: Partial<LabConfig['network']>): LabConfig => ({
  ...config,
  network: { ...config.network, ...network },
});
const cellOf = (config: LabConfig, name: string) => {
  const cell = planNetworkStudy(config).cells.find((c) => c.cell === name);
  if (!cell) throw new Error(`no cell ${name}`);
  return cell;
};

describe('E9 entries per datapath (docs/facts.md §N7)', () => {
  test('per Service, from the sources: one endpoint (iptables 7 lines, nftables 11, ipvs 2, Cilium 3) and two', () => {
    const at = (b: number) =>
      Object.fromEntries(Object.values(ENTRY_MODELS).map((m) => [m.datapath, m.perService(b)]));
    expect(at(1)).toEqual({ iptables: 7, nftables: 11, ipvs: 2, cilium: 3 });
    expect(at(2)).toEqual({ iptables: 11, nftables: 16, ipvs: 3, cilium: 4 });
  });

  test("iptables: syncProxyRules' lines per Service, 3 + 4B; Cilium: the wildcard entry beside frontend and backend slots", () => {
    // 1 KUBE-SERVICES rule; KUBE-SVC chain, its masquerade rule and B jumps; B KUBE-SEP chains
    // with a masquerade and a DNAT rule each.
    expect(ENTRY_MODELS.iptables.perService(10)).toBe(1 + 1 + 1 + 10 + 3 * 10);
    // <ip>/ANY slot 0 + <ip>:port slot 0 + B backend slots; lab plan and lab check use the same function.
    expect(ENTRY_MODELS.cilium.perService).toBe(lbEntriesPerService);
    expect(lbEntriesPerService(1)).toBe(3);
    expect(lbEntriesPerService(2)).toBe(4);
    for (const model of Object.values(ENTRY_MODELS)) {
      expect(model.basis, model.datapath).toBe('estimate');
      expect(model.source, model.datapath).toMatch(/proxier\.go|cilium/);
    }
  });

  test('each step predicts Services x entries per Service, labelled estimate where not confirmed', () => {
    const config = allDatapaths();
    expect(cellOf(config, 'dp-iptables').entries).toMatchObject({
      command: 'iptables-save -t nat | wc -l',
      perService: 7,
      basis: 'estimate',
      steps: [
        { services: 0, entriesAdded: 0 },
        { services: 100, entriesAdded: 700 },
        { services: 1000, entriesAdded: 7000 },
        { services: 5000, entriesAdded: 35_000 },
        { services: 10_000, entriesAdded: 70_000 },
      ],
    });
    expect(cellOf(config, 'dp-nftables').entries.steps.at(-1)?.entriesAdded).toBe(110_000);
    expect(cellOf(config, 'dp-ipvs').entries.steps.at(-1)?.entriesAdded).toBe(20_000);
    expect(cellOf(config, 'dp-cilium').entries.basis).toBe('estimate');
    const two = allDatapaths({ experiments: { serviceScale: { backendsPerService: 2 } } });
    expect(cellOf(two, 'dp-cilium').entries.steps.at(-1)?.entriesAdded).toBe(40_000);
    expect(formatNetworkPlan(planNetworkStudy(config))).toMatch(
      /^ {2}dp-iptables +7 \(iptables\) +0 +700 +7,000 +35,000 +70,000 +estimate$/m,
    );
  });
});

describe('Cilium LB map headroom', () => {
  test('the default map leaves headroom at 10,000 Services; only Cilium cells have one', () => {
    const config = allDatapaths();
    expect(cellOf(config, 'dp-cilium').entries.steps.at(-1)).toEqual({
      services: 10_000,
      entriesAdded: 30_000,
      lbMapEntries: 30_000,
      lbMapHeadroom: 35_536,
      lbMapOverflow: false,
    });
    expect(cellOf(config, 'dp-iptables').lbMapMax).toBeUndefined();
    expect(cellOf(config, 'dp-iptables').entries.steps.at(-1)?.lbMapOverflow).toBeUndefined();
  });

  test('a map smaller than the largest step is flagged as overflow, the step and the setting named', () => {
    const base = allDatapaths();
    const config = edited(base, { cilium: { ...base.network.cilium, lbMapMax: 25_000 } });
    const cilium = cellOf(config, 'dp-cilium');
    expect(cilium.entries.steps.map((s) => s.lbMapOverflow)).toEqual([false, false, false, false, true]);
    expect(cilium.entries.steps.at(-1)?.lbMapHeadroom).toBe(-5000);
    expect(cilium.warnings).toContainEqual(
      expect.stringContaining(
        'e9-services-10000: 30,000 LB map entries overflow network.cilium.lbMapMax 25,000',
      ),
    );
    expect(formatNetworkPlan(planNetworkStudy(config))).toContain(
      'dp-cilium: LB map 30,000 of 25,000 entries at 10,000 Services, headroom -5,000 - OVERFLOW',
    );
  });

  test('a map above 90% full is a warning without overflow', () => {
    const base = allDatapaths();
    const config = edited(base, { cilium: { ...base.network.cilium, lbMapMax: 31_000 } });
    const cilium = cellOf(config, 'dp-cilium');
    expect(cilium.entries.steps.at(-1)?.lbMapOverflow).toBe(false);
    expect(cilium.warnings).toContainEqual(
      expect.stringContaining('e9-services-10000: 30,000 LB map entries are above 90%'),
    );
  });
});

describe('E10 conntrack expectations', () => {
  test('limit minus a baseline below its threshold; every connection at the host default', () => {
    expect(cellOf(allDatapaths(), 'dp-iptables').conntrack).toEqual([
      {
        runId: 'e10-limit-default',
        limit: 'default',
        connections: 4000,
        expectedSucceededMin: 4000,
        expectedSucceededMax: 4000,
      },
      {
        runId: 'e10-limit-2048',
        limit: 2048,
        connections: 4000,
        expectedSucceededMin: 1548,
        expectedSucceededMax: 2048,
      },
      {
        runId: 'e10-limit-1024',
        limit: 1024,
        connections: 4000,
        expectedSucceededMin: 524,
        expectedSucceededMax: 1024,
      },
    ]);
  });

  test('a limit the connections cannot fill, and one at or below the baseline, are warnings', () => {
    const config = allDatapaths({ experiments: { conntrack: { limits: [8192, 400] } } });
    const cell = cellOf(config, 'dp-iptables');
    expect(cell.conntrack.find((p) => p.limit === 400)).toMatchObject({
      expectedSucceededMin: 0,
      expectedSucceededMax: 400,
    });
    expect(cell.warnings).toContainEqual(
      expect.stringContaining('e10-limit-8192: nf_conntrack_max 8192 holds all 4000 connections'),
    );
    expect(cell.warnings).toContainEqual(
      expect.stringContaining(
        'e10-limit-400: nf_conntrack_max 400 is at most the allowed baseline (500 entries)',
      ),
    );
    expect(cellOf(allDatapaths(), 'dp-iptables').warnings).toEqual([]);
  });
});

describe('warnings for configurations that cannot measure what they claim', () => {
  test("a prober attempt timeout above a tenth of the datapath's programming latency", () => {
    const at = (ms: number) =>
      allDatapaths({ experiments: { serviceScale: { proberAttemptTimeoutMs: ms } } });
    expect(cellOf(at(200), 'dp-iptables').warnings).toContainEqual(
      expect.stringContaining(
        "proberAttemptTimeoutMs 200 ms is coarser than a tenth of the expected programming latency on iptables (1000 ms, kube-proxy's minSyncPeriod (1 s default))",
      ),
    );
    expect(cellOf(at(100), 'dp-iptables').warnings).toEqual([]);
    expect(cellOf(at(100), 'dp-cilium').warnings).toContainEqual(
      expect.stringContaining('use at most 20 ms'),
    );
    expect(cellOf(at(20), 'dp-cilium').warnings).toEqual([]);
  });

  test("the configuration's own rules: a pod range overlapping the VPC, a coarse fortio resolution", () => {
    const base = allDatapaths();
    const overlapping = planNetworkStudy(edited(base, { podCidr: '10.0.0.0/8' }));
    expect(overlapping.warnings).toContainEqual(
      expect.stringContaining('network.podCidr: the pod range 10.0.0.0/8 overlaps the lab VPC 10.0.0.0/16'),
    );
    const coarse = planNetworkStudy(
      edited(base, { fortio: { ...base.network.fortio, resolutionSeconds: 0.001 } }),
    );
    expect(coarse.warnings).toContainEqual(
      expect.stringContaining(
        'network.fortio.resolutionSeconds: 0.001 s is coarser than a tenth of the smallest expected latency',
      ),
    );
    expect(planNetworkStudy(base).warnings).toEqual([
      expect.stringContaining("network.cells dp-ipvs: kube-proxy's ipvs mode is deprecated"),
    ]);
  });

  test("the printed plan lists every warning, each cell's with its name", () => {
    const base = allDatapaths();
    const text = formatNetworkPlan(
      planNetworkStudy(edited(base, { cilium: { ...base.network.cilium, lbMapMax: 25_000 } })),
    );
    expect(text).toMatch(
      /^Warnings:\n {2}- network\.experiments\.serviceScale\.steps: 10,000 Services x 3 LB map entries/m,
    );
    expect(text).toMatch(/^ {2}- network\.cells dp-ipvs: kube-proxy's ipvs mode is deprecated/m);
    expect(text).toMatch(/^ {2}- dp-cilium: e9-services-10000: 30,000 LB map entries overflow/m);
    expect(text).not.toContain('No warnings');
  });

  test('a study longer than the host lives, and a cell priced by another instance type', () => {
    const base = allDatapaths();
    const short = edited(base, { instance: { ...base.network.instance, maxLifetimeHours: 1.5 } });
    expect(cellOf(short, 'mesh').warnings).toContainEqual(
      expect.stringContaining(
        'outlives network.instance.maxLifetimeHours 1.5: the host would terminate itself first',
      ),
    );
    expect(cellOf(short, 'dp-iptables').warnings).toEqual([]);
    const bigger = parseLabConfig({
      lab: 'network',
      network: { cells: [{ name: 'dp-iptables', datapath: 'iptables', instanceType: 'c7i.4xlarge' }] },
    });
    expect(cellOf(bigger, 'dp-iptables')).toMatchObject({
      instanceType: 'c7i.4xlarge',
      pricePerHourUsd: 0.357,
    });
    expect(cellOf(bigger, 'dp-iptables').warnings).toContainEqual(
      expect.stringContaining("the price of c7i.2xlarge, not of this cell's c7i.4xlarge"),
    );
  });
});

describe('runs, duration and cost per cell', () => {
  test('runs per cell come from the plan', () => {
    const config = allDatapaths();
    const mesh = cellOf(config, 'mesh');
    expect(mesh.runs).toBe(networkStudyPlan(config, 'mesh').runs.length);
    expect(mesh.runsByExperiment).toEqual({
      C: 3,
      E1: 10,
      E1s: 6,
      E2: 1,
      E3: 24,
      E4: 15,
      E5: 6,
      E6: 6,
      E7: 6,
      E8: 1,
      E9: 10,
      E10: 3,
    });
    expect(cellOf(config, 'dp-cilium').runsByExperiment).toEqual({ C: 3, E9: 10, E10: 3 });
    expect(planNetworkStudy(config).runs).toBe(91 + 4 * 16);
  });

  test('run seconds: load from the spec, overheads from the named assumptions', () => {
    const config = allDatapaths();
    const runs = networkStudyPlan(config, 'mesh').runs;
    const o = DEFAULT_NETWORK_RUN_OVERHEADS;
    const at = (id: string) => {
      const i = runs.findIndex((r) => r.id === id);
      return runSeconds(runs[i], runs.slice(0, i), o);
    };
    expect(at('e1-plain-r1')).toEqual({ load: 25, overhead: o.jobStartSeconds + o.runnerSeconds });
    expect(at('e1s-plain-r1').load).toBe(20);
    expect(at('e7-plain-r1').load).toBe(4);
    expect(at('e6-plain-r1').load).toBeCloseTo(1);
    // Seven curls (the no-PeerAuthentication row and the port-exception row are two of them) from
    // four client pods: out of the mesh, and in it as good, bad and default.
    expect(at('e2-matrix')).toEqual({
      load: 7 * o.curlSeconds,
      overhead: 4 * o.jobStartSeconds + o.runnerSeconds,
    });
    // E8's two out-of-mesh curls share one pod.
    expect(at('e8-strict-exceptions')).toEqual({
      load: 2 * o.curlSeconds,
      overhead: o.jobStartSeconds + o.runnerSeconds,
    });
    // Step 1,000 creates the 900 Services step 100 did not; EndpointSlices at 20/s pace it. Two
    // Jobs: the entries count (a host command) and the prober.
    expect(at('e9-services-1000')).toEqual({
      load: 20 * o.proberSampleSeconds,
      overhead: 900 / 20 + 2 * o.jobStartSeconds + o.entriesCountSeconds + o.runnerSeconds,
    });
    // An E10 step starts four Jobs: the baseline read (the first one gives the host default too),
    // the limit set, the driver and the restore.
    expect(at('e10-limit-default')).toEqual({
      load: 5,
      overhead: o.conntrackSettleSeconds + 4 * o.jobStartSeconds + 3 * o.hostCommandSeconds + o.runnerSeconds,
    });
    expect(at('e10-limit-2048')).toEqual({
      load: 5,
      overhead: o.conntrackSettleSeconds + 4 * o.jobStartSeconds + 3 * o.hostCommandSeconds + o.runnerSeconds,
    });
  });

  test("the mesh pods' restart: not planned on a sidecar cell (istiod's injector fails closed before any pod) nor on ambient (istio-cni enrols every pod)", () => {
    const twoMeshes = parseLabConfig({
      lab: 'network',
      network: {
        cells: [
          { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
          { name: 'ambient', datapath: 'iptables', mesh: 'ambient' },
        ],
      },
    });
    const sidecar = cellOf(twoMeshes, 'mesh');
    const ambient = cellOf(twoMeshes, 'ambient');
    expect(sidecar.meshRestart).toMatchObject({
      seconds: 0,
      why: expect.stringContaining('failurePolicy Fail'),
    });
    expect(ambient.meshRestart).toMatchObject({
      seconds: 0,
      why: expect.stringContaining('istio-cni enrols every pod of a labelled namespace'),
    });
    // Neither cell counts a restart: an ambient cell's smoke and study take what the same runs on a
    // cell without a mesh restart would (the runs differ only in their mesh arms).
    const text = formatNetworkPlan(planNetworkStudy(twoMeshes));
    expect(text).toContain(
      "mesh: mesh pods' restart not planned: the bootstrap installs istiod's injector (failurePolicy Fail)",
    );
    expect(text).toContain(
      "ambient: mesh pods' restart not planned: the bootstrap installs istio-cni and ztunnel before any mesh pod",
    );
  });

  test('the study counts its start: one host Job for host facts and datapath, and Cilium status on a Cilium cell', () => {
    const o = DEFAULT_NETWORK_RUN_OVERHEADS;
    expect(studyStartSeconds('iptables', o)).toBe(o.jobStartSeconds + o.hostCommandSeconds);
    expect(studyStartSeconds('cilium', o)).toBe(2 * (o.jobStartSeconds + o.hostCommandSeconds));
    const plan = planNetworkStudy(allDatapaths());
    const iptables = plan.cells.find((c) => c.cell === 'dp-iptables');
    const cilium = plan.cells.find((c) => c.cell === 'dp-cilium');
    // The same runs, one more Job on Cilium: the start's cilium-dbg status.
    expect((cilium?.jobStarts ?? 0) - (iptables?.jobStarts ?? 0)).toBe(1);
    expect((cilium?.overheadSeconds ?? 0) - (iptables?.overheadSeconds ?? 0)).toBeCloseTo(
      o.jobStartSeconds + o.hostCommandSeconds,
    );
  });

  test('duration adds load and overheads; cost is duration x price; cells run in parallel', () => {
    const zero: NetworkRunOverheads = {
      jobStartSeconds: 0,
      hostCommandSeconds: 0,
      runnerSeconds: 0,
      curlSeconds: 0,
      downloadBytesPerSecond: Number.POSITIVE_INFINITY,
      apiCallSeconds: 0,
      endpointSlicesPerSecond: Number.POSITIVE_INFINITY,
      proberSampleSeconds: 0,
      entriesCountSeconds: 0,
      conntrackSettleSeconds: 0,
    };
    const plan = planNetworkStudy(allDatapaths(), { overheads: zero });
    const cilium = plan.cells.find((c) => c.cell === 'dp-cilium');
    // Calibration 3 x 25 s, E9 five new-connection runs of 25 s, E10 three 5 s connect timeouts.
    expect(cilium).toMatchObject({
      loadSeconds: 3 * 25 + 5 * 25 + 3 * 5,
      overheadSeconds: 0,
      durationSeconds: 215,
    });
    expect(cilium?.costUsd).toBeCloseTo((215 / 3600) * 0.357, 10);
    const mesh = plan.cells.find((c) => c.cell === 'mesh');
    expect(plan.durationSeconds).toBe(mesh?.durationSeconds);
    expect(plan.costUsd).toBeCloseTo(
      plan.cells.reduce((s, c) => s + c.costUsd, 0),
      10,
    );
    const withDefaults = cellOf(allDatapaths(), 'mesh');
    expect(withDefaults.overheadSeconds).toBeGreaterThan(0);
    expect(withDefaults.durationSeconds).toBe(withDefaults.loadSeconds + withDefaults.overheadSeconds);
  });

  test('only the named cells are planned', () => {
    const plan = planNetworkStudy(allDatapaths(), { cells: ['dp-ipvs'] });
    expect(plan.cells.map((c) => c.cell)).toEqual(['dp-ipvs']);
    expect(plan.runs).toBe(16);
  });
});
