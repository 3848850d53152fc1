import { describe, expect, test } from 'vitest';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { NetworkRun, NetworkRunSpec } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';

const config = (network: object = {}) => parseLabConfig({ lab: 'network', network });
const withAmbient = () =>
  config({
    cells: [
      { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
      { name: 'ambient', datapath: 'iptables', mesh: 'ambient' },
      { name: 'dp-cilium', datapath: 'cilium' },
    ],
  });
const ids = (runs: readonly NetworkRun[]) => runs.map((r) => r.id);
const ofExperiment = (runs: readonly NetworkRun[], experiment: string) =>
  runs.filter((r) => r.experiment === experiment);
function specOf<K extends NetworkRunSpec['kind']>(run: NetworkRun | undefined, kind: K) {
  expect(run?.spec.kind).toBe(kind);
  return run?.spec as Extract<NetworkRunSpec, { kind: K }>;
}

describe('which cell runs what (docs/facts.md §N3)', () => {
  test('a cell without a mesh runs the calibration, E9 and E10 only', () => {
    const plan = networkStudyPlan(config(), 'dp-iptables');
    expect(plan).toMatchObject({ cell: 'dp-iptables', datapath: 'iptables', mesh: 'none' });
    expect([...new Set(plan.runs.map((r) => r.experiment))]).toEqual(['C', 'E9', 'E10']);
  });

  test('a sidecar cell runs every experiment, in order', () => {
    const plan = networkStudyPlan(config(), 'mesh');
    expect([...new Set(plan.runs.map((r) => r.experiment))]).toEqual([
      'C',
      'E1',
      'E1s',
      'E2',
      'E3',
      'E4',
      'E5',
      'E6',
      'E7',
      'E8',
      'E9',
      'E10',
    ]);
  });

  test('an ambient cell skips E3 (no mTLS-off arm under ztunnel) and E4 (no L4/L7 split without a waypoint)', () => {
    const plan = networkStudyPlan(withAmbient(), 'ambient');
    const experiments = new Set(plan.runs.map((r) => r.experiment));
    expect(experiments.has('E3')).toBe(false);
    expect(experiments.has('E4')).toBe(false);
    expect([...experiments]).toEqual(['C', 'E1', 'E1s', 'E2', 'E5', 'E6', 'E7', 'E8', 'E9', 'E10']);
  });

  test('an unknown cell is an error naming the cells there are', () => {
    expect(() => networkStudyPlan(config(), 'dp-nft')).toThrow(
      'no cell named "dp-nft" in network.cells (cells: mesh, dp-iptables, dp-cilium)',
    );
  });
});

describe('run ids', () => {
  test('are unique in every cell and stable', () => {
    for (const cell of ['mesh', 'ambient', 'dp-cilium']) {
      const runIds = ids(networkStudyPlan(withAmbient(), cell).runs);
      expect(new Set(runIds).size).toBe(runIds.length);
    }
    const runIds = ids(networkStudyPlan(config(), 'mesh').runs);
    expect(runIds).toEqual(expect.arrayContaining(['c-r1', 'c-r3', 'e1-plain-r1', 'e1-mesh-mtls-r5']));
    expect(runIds).toEqual(expect.arrayContaining(['e1s-mesh-mtls-r3', 'e2-matrix', 'e8-strict-exceptions']));
    expect(runIds).toEqual(
      expect.arrayContaining(['e3-fixed-mesh-mtls-off-r5', 'e3-saturation-mesh-mtls-r3', 'e4-mesh-l4-r5']),
    );
    expect(runIds).toEqual(expect.arrayContaining(['e5-plain-r3', 'e6-mesh-mtls-r1', 'e7-plain-r2']));
    expect(runIds).toEqual(expect.arrayContaining(['e9-services-1000', 'e9-new-connection-10000']));
    expect(runIds.slice(-3)).toEqual(['e10-limit-default', 'e10-limit-2048', 'e10-limit-1024']);
    // Same configuration, same plan.
    expect(ids(networkStudyPlan(config(), 'mesh').runs)).toEqual(runIds);
  });

  test('a repeated conntrack limit is an error instead of two runs with one id', () => {
    expect(() =>
      networkStudyPlan(config({ experiments: { conntrack: { limits: [2048, 2048] } } }), 'dp-iptables'),
    ).toThrow('two runs of cell dp-iptables would both be "e10-limit-2048"');
  });
});

describe('interleaving and repeats', () => {
  test('E1 alternates its arms A B A B and keeps every repeat', () => {
    const e1 = ofExperiment(networkStudyPlan(config(), 'mesh').runs, 'E1');
    expect(ids(e1)).toEqual([
      'e1-plain-r1',
      'e1-mesh-mtls-r1',
      'e1-plain-r2',
      'e1-mesh-mtls-r2',
      'e1-plain-r3',
      'e1-mesh-mtls-r3',
      'e1-plain-r4',
      'e1-mesh-mtls-r4',
      'e1-plain-r5',
      'e1-mesh-mtls-r5',
    ]);
    expect(e1.map((r) => r.repeat)).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
  });

  test('E3 interleaves three arms, at the fixed rate then at saturation', () => {
    const e3 = ids(ofExperiment(networkStudyPlan(config(), 'mesh').runs, 'E3'));
    expect(e3.slice(0, 6)).toEqual([
      'e3-fixed-plain-r1',
      'e3-fixed-mesh-mtls-off-r1',
      'e3-fixed-mesh-mtls-r1',
      'e3-fixed-plain-r2',
      'e3-fixed-mesh-mtls-off-r2',
      'e3-fixed-mesh-mtls-r2',
    ]);
    expect(e3).toHaveLength(5 * 3 + 3 * 3);
    expect(e3.at(-1)).toBe('e3-saturation-mesh-mtls-r3');
  });

  test('a repeat group holds the repeats of one run: same experiment, arm and load, numbered 1..n', () => {
    for (const cell of ['mesh', 'ambient', 'dp-cilium']) {
      const runs = networkStudyPlan(withAmbient(), cell).runs;
      const groups = new Map<string, NetworkRun[]>();
      for (const run of runs) {
        // `repeat` and `repeatGroup` come together, and the id is the group's `-rN`.
        expect(run.repeat === undefined, run.id).toBe(run.repeatGroup === undefined);
        if (run.repeatGroup === undefined) continue;
        expect(run.id).toBe(`${run.repeatGroup}-r${run.repeat}`);
        groups.set(run.repeatGroup, [...(groups.get(run.repeatGroup) ?? []), run]);
      }
      for (const [group, members] of groups) {
        expect(
          members.map((r) => r.repeat),
          group,
        ).toEqual(members.map((_, i) => i + 1));
        for (const member of members) {
          expect(member.experiment, member.id).toBe(members[0].experiment);
          expect(member.spec, member.id).toEqual(members[0].spec);
        }
      }
      if (cell === 'mesh') {
        expect([...groups.keys()]).toContain('e3-fixed-mesh-mtls-off');
        expect(groups.get('c')?.map((r) => r.id)).toEqual(['c-r1', 'c-r2', 'c-r3']);
      }
    }
  });

  test("E9's new-connection runs at different Service counts repeat nothing", () => {
    const e9 = ofExperiment(networkStudyPlan(config(), 'dp-iptables').runs, 'E9');
    const newConnection = e9.filter((r) => r.id.startsWith('e9-new-connection-'));
    expect(newConnection.length).toBeGreaterThan(1);
    for (const run of e9) expect([run.repeat, run.repeatGroup], run.id).toEqual([undefined, undefined]);
  });

  test('repeats come from network.experiments.repeats', () => {
    const plan = networkStudyPlan(
      config({ experiments: { repeats: { fixedRate: 2, saturation: 1, protocols: 4, calibration: 1 } } }),
      'mesh',
    );
    const count = (experiment: string) => ofExperiment(plan.runs, experiment).length;
    expect([count('C'), count('E1'), count('E1s'), count('E3'), count('E4')]).toEqual([
      1,
      4,
      2,
      2 * 3 + 3,
      6,
    ]);
    expect([count('E5'), count('E6'), count('E7')]).toEqual([8, 8, 8]);
  });
});

describe('load parameters and targets', () => {
  const runs = networkStudyPlan(config(), 'mesh').runs;
  const run = (id: string) => runs.find((r) => r.id === id);

  test('fixed-rate and saturation runs take fortio settings from the configuration', () => {
    expect(specOf(run('e1-plain-r1'), 'fortio')).toEqual({
      kind: 'fortio',
      arm: 'plain',
      mode: 'fixed-rate',
      clientNamespace: 'plain',
      url: 'http://fortio.plain.svc.cluster.local:8080/echo',
      qps: 500,
      seconds: 25,
      connections: 16,
      resolutionSeconds: 0.000_01,
    });
    expect(specOf(run('e1s-mesh-mtls-r1'), 'fortio')).toMatchObject({
      mode: 'saturation',
      clientNamespace: 'mesh',
      url: 'http://fortio.mesh.svc.cluster.local:8080/echo',
      qps: 0,
      seconds: 20,
    });
    expect(specOf(run('c-r2'), 'fortio')).toEqual(specOf(run('e1-plain-r1'), 'fortio'));
    const custom = networkStudyPlan(
      config({ fortio: { qps: 800, connections: 8, fixedRateSeconds: 30, resolutionSeconds: 0.000_005 } }),
      'dp-iptables',
    );
    expect(specOf(custom.runs[0], 'fortio')).toMatchObject({
      qps: 800,
      connections: 8,
      seconds: 30,
      resolutionSeconds: 0.000_005,
    });
  });

  test("E3's mTLS-off arm goes to the permissive server's exception port; E4's L4 arm to the tcp- port", () => {
    expect(specOf(run('e3-fixed-mesh-mtls-off-r1'), 'fortio').url).toBe(
      'http://fortio-permissive.mesh.svc.cluster.local:8080/echo',
    );
    expect(specOf(run('e4-mesh-l4-r1'), 'fortio')).toMatchObject({
      url: 'http://fortio.mesh.svc.cluster.local:8082/echo',
      qps: 500,
      seconds: 20,
      mode: 'fixed-rate',
    });
    expect(specOf(run('e4-mesh-l7-r1'), 'fortio').url).toBe('http://fortio.mesh.svc.cluster.local:8080/echo');
  });

  test('E5 is gRPC to host:port, E6 a download of largeBodyMiB through /echo?size=, E7 an SSE stream', () => {
    expect(specOf(run('e5-mesh-mtls-r1'), 'fortio')).toMatchObject({
      mode: 'grpc',
      url: 'fortio.mesh.svc.cluster.local:8079',
      qps: 500,
    });
    expect(specOf(run('e6-plain-r1'), 'download')).toEqual({
      kind: 'download',
      arm: 'plain',
      clientNamespace: 'plain',
      url: `http://fortio.plain.svc.cluster.local:8080/echo?size=${100 * 1024 * 1024}`,
      bytes: 104_857_600,
    });
    expect(specOf(run('e7-mesh-mtls-r2'), 'sse')).toEqual({
      kind: 'sse',
      arm: 'mesh-mtls',
      clientNamespace: 'mesh',
      url: 'http://sse-server.mesh.svc.cluster.local:8080/events',
      events: 200,
      intervalMs: 20,
    });
  });

  test('E9 has a step and a new-connection run per Service count; E10 a step per limit after the default', () => {
    const e9 = ofExperiment(runs, 'E9');
    expect(ids(e9)).toEqual(
      [0, 100, 1000, 5000, 10000].flatMap((n) => [`e9-services-${n}`, `e9-new-connection-${n}`]),
    );
    expect(specOf(run('e9-services-5000'), 'service-scale')).toEqual({
      kind: 'service-scale',
      services: 5000,
      samples: 20,
      attemptTimeoutMs: 20,
      createConcurrency: 50,
      backendsPerService: 1,
    });
    expect(specOf(run('e9-new-connection-100'), 'fortio')).toMatchObject({
      mode: 'new-connection',
      arm: 'plain',
    });
    expect(ofExperiment(runs, 'E10').map((r) => specOf(r, 'conntrack'))).toEqual(
      ['default', 2048, 1024].map((limit) => ({
        kind: 'conntrack',
        limit,
        connections: 4000,
        connectTimeoutSeconds: 5,
        baselineMax: 500,
      })),
    );
  });
});

describe('preconditions', () => {
  const runs = networkStudyPlan(config(), 'mesh').runs;
  const run = (id: string) => runs.find((r) => r.id === id);
  const meshReady = [
    { kind: 'namespace-labelled', namespace: 'mesh' },
    { kind: 'pods-restarted-after-label', namespace: 'mesh' },
  ];

  test('mesh arms need the labelled namespace with pods restarted after the label; plain arms need nothing', () => {
    for (const id of ['e1-mesh-mtls-r1', 'e3-fixed-mesh-mtls-off-r2', 'e4-mesh-l4-r1', 'e6-mesh-mtls-r3']) {
      expect(run(id)?.preconditions).toEqual(meshReady);
    }
    // E2's no-policy row calls the server in mesh-default: that namespace joins the mesh too.
    expect(run('e2-matrix')?.preconditions).toEqual([
      ...meshReady,
      { kind: 'namespace-labelled', namespace: 'mesh-default' },
      { kind: 'pods-restarted-after-label', namespace: 'mesh-default' },
    ]);
    for (const id of ['c-r1', 'e1-plain-r1', 'e5-plain-r1', 'e7-plain-r3']) {
      expect(run(id)?.preconditions).toEqual([]);
    }
  });

  test('an E9 step needs its Services ready; an E10 step a conntrack baseline below the threshold', () => {
    expect(run('e9-services-1000')?.preconditions).toEqual([{ kind: 'services-ready', count: 1000 }]);
    expect(run('e9-new-connection-1000')?.preconditions).toEqual([{ kind: 'services-ready', count: 1000 }]);
    expect(run('e10-limit-2048')?.preconditions).toEqual([{ kind: 'conntrack-baseline-below', max: 500 }]);
    const custom = networkStudyPlan(
      config({ experiments: { conntrack: { baselineMax: 200 } } }),
      'dp-cilium',
    );
    expect(custom.runs.at(-1)?.preconditions).toEqual([{ kind: 'conntrack-baseline-below', max: 200 }]);
  });
});

describe('the mTLS matrix and STRICT exceptions (E2, E8)', () => {
  const cases = (cfg: ReturnType<typeof config>, cell: string, id: string) =>
    specOf(
      networkStudyPlan(cfg, cell).runs.find((r) => r.id === id),
      'mtls',
    ).cases;

  test('STRICT drops an out-of-mesh client (exit 56, HTTP 000), the policy denies with 403', () => {
    const matrix = cases(config(), 'mesh', 'e2-matrix');
    const outcome = Object.fromEntries(matrix.map((c) => [c.id, c.expected]));
    expect(outcome).toEqual({
      'no-policy-out-of-mesh': { httpCode: '200', curlExit: 0 },
      'port-exception-out-of-mesh': { httpCode: '200', curlExit: 0 },
      'strict-out-of-mesh': { httpCode: '000', curlExit: 56 },
      'strict-in-mesh': { httpCode: '200', curlExit: 0 },
      'authz-allowed': { httpCode: '200', curlExit: 0 },
      'authz-denied': { httpCode: '403', curlExit: 0 },
      'authz-default': { httpCode: '403', curlExit: 0 },
    });
    expect(matrix.find((c) => c.id === 'strict-out-of-mesh')).toMatchObject({
      clientNamespace: 'plain',
      serviceAccount: 'default',
      inMesh: false,
      url: 'http://fortio.mesh.svc.cluster.local:8080/echo',
    });
    expect(matrix.find((c) => c.id === 'authz-denied')).toMatchObject({
      clientNamespace: 'mesh',
      serviceAccount: 'bad',
      inMesh: true,
      url: 'http://fortio-authz.mesh.svc.cluster.local:8080/echo',
    });
    expect(matrix.find((c) => c.id === 'authz-allowed')?.serviceAccount).toBe('good');
  });

  test("E2's two PERMISSIVE rows: no PeerAuthentication at all (mesh-default) and STRICT's port-level exception", () => {
    const matrix = cases(config(), 'mesh', 'e2-matrix');
    const noPolicy = matrix.find((c) => c.id === 'no-policy-out-of-mesh');
    const exception = matrix.find((c) => c.id === 'port-exception-out-of-mesh');
    expect(noPolicy).toMatchObject({
      inMesh: false,
      clientNamespace: 'plain',
      url: 'http://fortio.mesh-default.svc.cluster.local:8080/echo',
    });
    expect(noPolicy?.title).toMatch(/No PeerAuthentication \(the mesh default, PERMISSIVE\)/);
    expect(exception).toMatchObject({
      inMesh: false,
      clientNamespace: 'plain',
      url: 'http://fortio-permissive.mesh.svc.cluster.local:8080/echo',
    });
    expect(exception?.title).toMatch(/port-level PERMISSIVE exception on 8080/);
    // Distinct rows, each with its own curl Job.
    expect(new Set(matrix.map((c) => c.url)).size).toBe(4);
    expect(cases(withAmbient(), 'ambient', 'e2-matrix').map((c) => c.id)).toContain('no-policy-out-of-mesh');
  });

  test('on an ambient cell the L4 policy closes the connection instead of answering 403', () => {
    const matrix = cases(withAmbient(), 'ambient', 'e2-matrix');
    expect(matrix.find((c) => c.id === 'authz-denied')?.expected).toEqual({ httpCode: '000', curlExit: 56 });
    expect(matrix.find((c) => c.id === 'authz-allowed')?.expected).toEqual({ httpCode: '200', curlExit: 0 });
  });

  test('E8: STRICT drops the plaintext curl, the port-level PERMISSIVE exception answers it', () => {
    expect(cases(config(), 'mesh', 'e8-strict-exceptions')).toEqual([
      expect.objectContaining({ id: 'strict', inMesh: false, expected: { httpCode: '000', curlExit: 56 } }),
      expect.objectContaining({
        id: 'strict-port-permissive',
        inMesh: false,
        url: 'http://fortio-permissive.mesh.svc.cluster.local:8080/echo',
        expected: { httpCode: '200', curlExit: 0 },
      }),
    ]);
  });
});
