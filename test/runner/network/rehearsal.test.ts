import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { RUNNER_LOG_FILE, STATUS_FILE, STUDY_FILE } from '../../../lib/runner/layout.ts';
import { REHEARSAL_BROKEN, type RehearsedCell, rehearseNetworkStudy } from './rehearsal.ts';

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

describe('rehearsal: the whole default network study against fake cells', () => {
  let cells: RehearsedCell[];
  beforeAll(async () => {
    cells = await rehearseNetworkStudy(config);
  }, 300_000);

  it('finishes the study of every default cell with every run of its plan recorded', () => {
    expect(cells.map((c) => c.cell)).toEqual(['mesh', 'dp-iptables', 'dp-cilium']);
    for (const { cell, study, resultsDir, studyDir } of cells) {
      expect(study.state).toBe('finished');
      expect(study.runs.map((r) => r.id)).toEqual(networkStudyPlan(config, cell).runs.map((r) => r.id));
      const saved = JSON.parse(readFileSync(join(studyDir, STUDY_FILE), 'utf8')) as NetworkStudyRecord;
      expect(saved.runs).toHaveLength(study.runs.length);
      expect(JSON.parse(readFileSync(join(resultsDir, STATUS_FILE), 'utf8'))).toMatchObject({
        state: 'finished',
        recordedRuns: study.runs.length,
      });
      expect(existsSync(join(studyDir, RUNNER_LOG_FILE))).toBe(true);
    }
  });

  it('marks exactly the 1 ms-resolution run and the clustering E9 step invalid, with their reasons', () => {
    const invalid = cells.flatMap(({ cell, study }) =>
      study.runs.filter((r) => !r.valid).map((r) => ({ cell, id: r.id, reasons: r.invalidReasons })),
    );
    expect(invalid.map(({ cell, id }) => `${cell}/${id}`).sort()).toEqual(
      [
        `${REHEARSAL_BROKEN.coarseResolution.cell}/${REHEARSAL_BROKEN.coarseResolution.runId}`,
        `${REHEARSAL_BROKEN.clusteringProber.cell}/${REHEARSAL_BROKEN.clusteringProber.runId}`,
      ].sort(),
    );
    const coarse = invalid.find((r) => r.id === REHEARSAL_BROKEN.coarseResolution.runId);
    expect(coarse?.reasons.join('\n')).toMatch(/bucket position/);
    const prober = invalid.find((r) => r.id === REHEARSAL_BROKEN.clusteringProber.runId);
    expect(prober?.reasons.join('\n')).toMatch(/cluster/);
  });

  it('records the host, the datapath each cell claims, and mesh evidence on mesh arms', () => {
    const byCell = Object.fromEntries(cells.map((c) => [c.cell, c.study]));
    expect(byCell['dp-cilium'].datapathEvidence).toMatchObject({
      kubeProxyReplacement: true,
      kubeSvcChains: 0,
    });
    expect(byCell['dp-iptables'].datapathEvidence?.kubeSvcChains).toBeGreaterThan(0);
    for (const study of Object.values(byCell)) {
      expect(study.host).toMatchObject({ instanceType: 'c7i.2xlarge', availabilityZone: 'us-west-2b' });
      expect(study.host.versions.k3s).toBe('v1.36.4+k3s1');
    }
    const meshRuns = byCell.mesh.runs.filter((r) => r.spec.kind === 'fortio' && r.spec.arm === 'mesh-mtls');
    expect(meshRuns.length).toBeGreaterThan(0);
    for (const run of meshRuns)
      expect(run.mtlsMetrics?.requestsBySecurityPolicy.mutual_tls).toBeGreaterThan(0);
  });

  it('leaves the cells as the charts made them: no Job, no Service of the study, the conntrack limit restored', () => {
    for (const { fake } of cells) {
      expect(fake.activeJobs()).toBe(0);
      expect(fake.allServices()).toBe(0);
      expect(fake.conntrackMax).toBe(fake.conntrackDefault);
    }
  });
});
