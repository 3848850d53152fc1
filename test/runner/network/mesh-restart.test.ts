import { describe, expect, it } from 'vitest';
import { loadLabConfig, parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import type { NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { runNetworkSmokeStudy } from '../../../lib/runner/network/run-network-study.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, type FakeCellOptions, fakeDeps } from './fake-cell.ts';

/**
 * The mesh restart as evidence (docs/facts.md §N2): after a normal bootstrap no pod of a mesh
 * namespace lacks its sidecar (sidecar cell) or its ambient enrolment (ambient cell), so lab plan
 * counts no restart; the runner records on every run that needs the mesh which pods it had to
 * restart, and the smoke checklist shows it, a WARN since the plan did not count it.
 */

const example = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const ambient = parseLabConfig({
  lab: 'network',
  network: { cells: [{ name: 'ambient', datapath: 'iptables', mesh: 'ambient' }] },
});

/** The smoke plan of a cell, cut down to E1's mesh run and the mTLS matrix (both mesh namespaces). */
function meshRuns(config: LabConfig, cell: string): NetworkStudyPlan {
  const plan = networkSmokePlan(config, cell);
  return {
    ...plan,
    runs: plan.runs.filter((r) => ['smoke-e1-mesh-mtls-r1', 'smoke-e2-matrix'].includes(r.id)),
  };
}

async function smoke(config: LabConfig, cell: string, options: FakeCellOptions) {
  const fake = new FakeCell(config, cell, tempDir('network-mesh-restart-'), options);
  const deps = fakeDeps(fake, new FileNetworkResultStore(fake.root));
  const outcome = await runNetworkSmokeStudy(deps, config, meshRuns(config, cell), FAST);
  if (!outcome.checklist) throw new Error(String(outcome.error));
  const preconditions = (runId: string) =>
    outcome.checklist?.entries
      .find((e) => e.runId === runId)
      ?.checks.find((c) => c.proof === 'preconditions');
  return { fake, checklist: outcome.checklist, preconditions };
}

describe('the mesh restart, recorded and shown by the smoke checklist', () => {
  it('after a normal bootstrap: every mesh run records that no pod had to be restarted', async () => {
    const { checklist, preconditions, fake } = await smoke(example, 'mesh', {});
    expect(checklist.passed).toBe(true);
    expect(preconditions('smoke-e1-mesh-mtls-r1')).toMatchObject({
      status: 'pass',
      evidence: 'namespace mesh labelled, pods of mesh in the mesh, none restarted',
    });
    expect(preconditions('smoke-e2-matrix')?.evidence).toBe(
      'namespace mesh labelled, pods of mesh in the mesh, none restarted, namespace mesh-default labelled, pods of mesh-default in the mesh, none restarted',
    );
    expect(fake.serverPods('mesh').every((p) => p.hasSidecar)).toBe(true);
  });

  it('mesh pods created without their sidecar: restarted, named in the record, and a WARN with its fix on a sidecar cell', async () => {
    const { checklist, preconditions, fake } = await smoke(example, 'mesh', { meshPodsBeforeLabel: true });
    // A warning, not a failure: the pods are in the mesh for the run, which stays valid.
    expect(checklist.passed).toBe(true);
    const first = preconditions('smoke-e1-mesh-mtls-r1');
    expect(first?.status).toBe('warn');
    expect(first?.evidence).toMatch(
      /^namespace mesh labelled, pods of mesh in the mesh after restarting 4 created without it \(fortio-7d9f8-\d+, fortio-permissive-7d9f8-\d+, fortio-authz-7d9f8-\d+, sse-server-7d9f8-\d+\)$/,
    );
    expect(first?.fix).toMatch(
      /failurePolicy Fail.*docs\/facts\.md §N2.*lab plan did not count this restart/,
    );
    // The next run finds mesh in order and restarts mesh-default's pod, which E1 did not need.
    const matrix = preconditions('smoke-e2-matrix');
    expect(matrix?.status).toBe('warn');
    expect(matrix?.evidence).toMatch(
      /pods of mesh in the mesh, none restarted, .*pods of mesh-default in the mesh after restarting 1 created without it \(fortio-7d9f8-\d+\)$/,
    );
    expect([...fake.serverPods('mesh'), ...fake.serverPods('mesh-default')].every((p) => p.hasSidecar)).toBe(
      true,
    );
  });

  it('on an ambient cell after a normal bootstrap: no pod had to be restarted', async () => {
    const { checklist, preconditions } = await smoke(ambient, 'ambient', {});
    expect(checklist.passed).toBe(true);
    expect(preconditions('smoke-e1-mesh-mtls-r1')).toMatchObject({
      status: 'pass',
      evidence: 'namespace mesh labelled, pods of mesh in the mesh, none restarted',
    });
  });

  it('on an ambient cell, pods istio-cni did not enrol: restarted, and a WARN with its fix (lab plan counts no restart there either)', async () => {
    const { checklist, preconditions } = await smoke(ambient, 'ambient', { meshPodsBeforeLabel: true });
    expect(checklist.passed).toBe(true);
    const first = preconditions('smoke-e1-mesh-mtls-r1');
    expect(first?.status).toBe('warn');
    expect(first?.evidence).toMatch(/pods of mesh in the mesh after restarting 4 created without it/);
    expect(first?.fix).toMatch(
      /istio-cni enrols every pod.*docs\/facts\.md §N2.*lab plan did not count this restart/,
    );
  });
});
