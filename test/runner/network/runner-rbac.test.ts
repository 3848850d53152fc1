import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { NetworkStudyRunnerChart } from '../../../charts/network/study-runner.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { cellByName, NETWORK_RUNNER_NAME, PLAIN_NAMESPACE } from '../../../lib/network/topology.ts';
import { KubeNetworkCluster } from '../../../lib/runner/kube-cluster.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import { RbacPolicy, serviceAccountSubject } from '../../kube/fake-rbac-policy.ts';
import { tempDir } from '../../temp.ts';
import { type AccessLog, authorizing, networkFace } from '../kube-http-face.ts';
import { unusedGrants, usedPermissions } from '../runner-access-kit.ts';
import { FAST, FakeCell, fakeDeps } from './fake-cell.ts';

/**
 * Each kind of network cell's runner against the RBAC its chart gives it
 * (charts/network/study-runner.ts): the fake cell behind the API's HTTP paths, reached through
 * the runner's real KubeNetworkCluster, every request judged by the chart's Roles, ClusterRole
 * and bindings for `system:serviceaccount:plain:network-study-runner`. The whole study of each
 * cell kind runs (every experiment: E9's Services, E10's host Jobs, the mesh restarts, the Cilium
 * agent's log, ztunnel's pods), so every path that calls the API is taken.
 */

const config = parseLabConfig({
  lab: 'network',
  network: {
    cells: [
      { name: 'mesh', datapath: 'iptables', mesh: 'sidecar' },
      { name: 'dp-cilium', datapath: 'cilium' },
      { name: 'ambient', datapath: 'iptables', mesh: 'ambient' },
    ],
  },
});
const subject = serviceAccountSubject(PLAIN_NAMESPACE, NETWORK_RUNNER_NAME);

function chartObjects(cellName: string): Record<string, unknown>[] {
  const chart = new NetworkStudyRunnerChart(Testing.app(), '90-runner', {
    config,
    cell: cellByName(config.network, cellName),
  });
  return Testing.synth(chart) as Record<string, unknown>[];
}

async function rehearse(cellName: string, objects = chartObjects(cellName), cfg: LabConfig = config) {
  const policy = new RbacPolicy(objects);
  const root = tempDir(`network-rbac-${cellName}-`);
  // Mesh pods created before the namespace label: the runner restarts them into the mesh.
  const fake = new FakeCell(cfg, cellName, root, { meshPodsBeforeLabel: true });
  const log: AccessLog = { requests: [], refused: [] };
  const deps = fakeDeps(fake, new FileNetworkResultStore(root));
  const study = await runNetworkStudy(
    { ...deps, cluster: new KubeNetworkCluster(authorizing(networkFace(fake), policy, subject, log)) },
    cfg,
    networkSmokePlan(cfg, cellName),
    FAST,
  );
  return { study, log, policy };
}

describe('the network runner under its chart’s RBAC', () => {
  const used = new Map<string, string[]>();
  for (const cell of ['mesh', 'dp-cilium', 'ambient']) {
    it(`${cell}: is refused nothing, and uses every permission the chart grants`, async () => {
      const { study, log, policy } = await rehearse(cell);
      expect(log.refused).toEqual([]);
      expect(study.state).toBe('finished');
      // Least privilege: nothing granted that the runner never does.
      expect(unusedGrants(policy, subject, log.requests)).toEqual([]);
      used.set(cell, usedPermissions(log.requests));
    });
  }

  it('the cells differ only where the chart says: the mesh namespaces, kube-system, istio-system', () => {
    const plain = [
      'create jobs.batch in plain',
      'create services in plain',
      'delete jobs.batch in plain',
      'delete services in plain',
      'get /version',
      'get jobs.batch in plain',
      'get pods/log in plain',
      'list endpointslices.discovery.k8s.io in plain',
      'list jobs.batch in plain',
      'list pods in plain',
      'list services in plain',
    ];
    const mesh = [
      'create jobs.batch in mesh',
      'delete jobs.batch in mesh',
      'delete pods in mesh',
      'delete pods in mesh-default',
      'get jobs.batch in mesh',
      'get namespaces mesh in mesh',
      'get namespaces mesh-default in mesh-default',
      'get pods/log in mesh',
      'list jobs.batch in mesh',
      'list pods in mesh',
      'list pods in mesh-default',
      'list services in mesh',
    ];
    expect(used.get('dp-cilium')).toEqual(
      [...plain, 'get pods/log in kube-system', 'list pods in kube-system'].sort(),
    );
    expect(used.get('mesh')).toEqual([...plain, ...mesh].sort());
    expect(used.get('ambient')).toEqual([...plain, ...mesh, 'list pods in istio-system'].sort());
  });

  it('E9 on a mesh cell is refused by the API without `list services` in mesh (the rule this test found missing)', async () => {
    const objects = chartObjects('mesh').map((object) =>
      object.kind === 'Role' && (object.metadata as { namespace: string }).namespace === 'mesh'
        ? {
            ...object,
            rules: (object.rules as { resources: string[] }[]).filter(
              (r) => !r.resources.includes('services'),
            ),
          }
        : object,
    );
    const { study, log } = await rehearse('mesh', objects);
    expect(usedPermissions(log.refused)).toEqual(['list services in mesh']);
    const refusedRuns = study.runs.filter((r) => r.invalidReasons.join().includes('HTTP 403'));
    expect(new Set(refusedRuns.map((r) => r.experiment))).toEqual(new Set(['E9']));
    expect(refusedRuns.length).toBeGreaterThan(0);
    expect(refusedRuns[0].invalidReasons.join()).toContain(
      'HTTP 403: services is forbidden: User "system:serviceaccount:plain:network-study-runner" cannot list resource "services" in API group "" in the namespace "mesh"',
    );
  });
});
