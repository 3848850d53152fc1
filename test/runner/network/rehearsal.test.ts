import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import { type WatchProberOutput, watchResult } from '../../../lib/network/probes/service-prober.ts';
import { freeStaticClusterIps } from '../../../lib/network/service-range.ts';
import type { NetworkStudyRecord, ServiceScaleRunSpec } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { serviceScaleCheck } from '../../../lib/network/study/validity.ts';
import { loadNetworkStudies, networkStudyFiles } from '../../../lib/report/network/load.ts';
import { networkReportTables } from '../../../lib/report/network/tables.ts';
import { writeNetworkReport } from '../../../lib/report/network/write.ts';
import { RUNNER_LOG_FILE, STATUS_FILE, STUDY_FILE } from '../../../lib/runner/layout.ts';
import { OUTPUT_FILES, proberJob } from '../../../lib/runner/network/jobs.ts';
import { jobOutputDir } from '../../../lib/runner/network/layout.ts';
import { withChromium } from '../../report/browser.ts';
import { NETWORK_SECTIONS } from '../../report/network/fixture.ts';
import { tempDir } from '../../temp.ts';
import { CHROMIUM, needs } from '../../tools.ts';
import { FakeCell } from './fake-cell.ts';
import { REHEARSAL_BROKEN, type RehearsedCell, rehearseNetworkStudy } from './rehearsal.ts';

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;
const canRenderInChromium = needs(CHROMIUM, import.meta.url, 'the Chromium part of the report test');

/**
 * The whole default network study, rehearsed by the first test that reads it and shared by every
 * test of this file, the report's included (about 8 s of CPU per rehearsal: it used to run twice,
 * here and in the report's own file). Made inside a test, not in `beforeAll`, so that the file's
 * measured time (test/file-weights.json, from vitest's per-test times) counts it. Not cached for
 * other files: its folders are tempDir()s, removed after this file.
 */
let made: Promise<RehearsedCell[]> | undefined;
const rehearsal = (): Promise<RehearsedCell[]> => {
  made ??= rehearseNetworkStudy(config);
  return made;
};

describe('rehearsal: the whole default network study against fake cells', () => {
  it('finishes the study of every default cell with every run of its plan recorded', async () => {
    const cells = await rehearsal();
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

  it('marks exactly the 1 ms-resolution run and the coarse-prober E9 step invalid, with their reasons', async () => {
    const cells = await rehearsal();
    const invalid = cells.flatMap(({ cell, study }) =>
      study.runs.filter((r) => !r.valid).map((r) => ({ cell, id: r.id, reasons: r.invalidReasons })),
    );
    expect(invalid.map(({ cell, id }) => `${cell}/${id}`).sort()).toEqual(
      [
        `${REHEARSAL_BROKEN.coarseResolution.cell}/${REHEARSAL_BROKEN.coarseResolution.runId}`,
        `${REHEARSAL_BROKEN.coarseProber.cell}/${REHEARSAL_BROKEN.coarseProber.runId}`,
      ].sort(),
    );
    const coarse = invalid.find((r) => r.id === REHEARSAL_BROKEN.coarseResolution.runId);
    expect(coarse?.reasons.join('\n')).toMatch(/bucket position/);
    const prober = invalid.find((r) => r.id === REHEARSAL_BROKEN.coarseProber.runId);
    expect(prober?.reasons.join('\n')).toMatch(/quantized to 200\.\d+ ms|quantized to 200 ms/);
  });

  it('flags repeat spreads only among repeats of an arm, never across E9 Service counts', async () => {
    const cells = await rehearsal();
    for (const { study } of cells) {
      for (const run of study.runs.filter((r) => r.repeat === undefined))
        expect(run.flags ?? [], run.id).toEqual([]);
    }
  });

  it('records the host, the datapath each cell claims, and mesh evidence on mesh arms', async () => {
    const cells = await rehearsal();
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

  it('leaves the cells as the charts made them: no Job, no Service of the study, the conntrack limit restored', async () => {
    const cells = await rehearsal();
    for (const { fake } of cells) {
      expect(fake.activeJobs()).toBe(0);
      expect(fake.allServices()).toBe(0);
      expect(fake.conntrackMax).toBe(fake.conntrackDefault);
    }
  });
});

describe('rehearsal: E9 measures the datapath, not a pod start', () => {
  /** Median new-Service latency (ms) of each valid E9 step of a cell, by Service count. */
  function medians(cells: readonly RehearsedCell[], cell: string): Map<number, number> {
    const study = cells.find((c) => c.cell === cell)?.study;
    const out = new Map<number, number>();
    for (const run of study?.runs ?? []) {
      if (run.spec.kind !== 'service-scale' || run.result?.kind !== 'service-scale' || !run.valid) continue;
      const p50 = run.result.scale.prober?.latency?.p50Ms;
      if (p50 !== undefined) out.set(run.spec.services, p50);
    }
    return out;
  }

  it("shows iptables' new-Service latency growing with the Service count and Cilium's flat", async () => {
    const cells = await rehearsal();
    const iptables = medians(cells, 'dp-iptables');
    const cilium = medians(cells, 'dp-cilium');
    expect([...iptables.keys()]).toEqual([0, 100, 5000, 10000]);
    expect([...cilium.keys()]).toEqual([0, 100, 1000, 5000, 10000]);
    // kube-proxy: the endpoint's sync waits minSyncPeriod (1 s) and each sync grows with the rules.
    expect(iptables.get(0)).toBeGreaterThan(1_000);
    expect((iptables.get(10000) as number) - (iptables.get(0) as number)).toBeGreaterThan(800);
    // Cilium: a few ms whatever the count; the prober resolves it because it was already probing.
    for (const p50 of cilium.values()) expect(p50).toBeLessThan(40);
    expect(Math.max(...cilium.values()) - Math.min(...cilium.values())).toBeLessThan(20);
    for (const { study } of cells.filter((c) => c.cell !== 'mesh'))
      for (const run of study.runs)
        if (run.result?.kind === 'service-scale' && run.valid)
          for (const sample of run.result.scale.prober?.samples ?? []) {
            expect(sample.attempts).toBeGreaterThan(1);
            expect(sample.firstAttemptAfterMs).toBeLessThanOrEqual(25);
          }
  });

  it('catches the old order (Services created first, then the prober started) as invalid', async () => {
    const fake = new FakeCell(config, 'dp-iptables', tempDir('network-old-order-'));
    const spec = networkStudyPlan(config, 'dp-iptables').runs.find((r) => r.spec.kind === 'service-scale')
      ?.spec as ServiceScaleRunSpec;
    const ips = freeStaticClusterIps(config.network.serviceCidr, [], spec.samples);
    const accepted = new Map<string, number>();
    for (const [i, ip] of ips.entries()) {
      await fake.createService({
        ...fake.serviceTemplate,
        metadata: { ...fake.serviceTemplate.metadata, name: `probe-${i}`, labels: { probe: 'true' } },
        spec: { ...fake.serviceTemplate.spec, clusterIP: ip },
      });
      accepted.set(`${ip}:8080`, fake.clock.ms);
    }
    const job = proberJob(
      fake.context,
      'net-old-order-prober',
      'old-order',
      [...accepted.keys()],
      20,
      60_000,
    );
    await fake.createJob(job);
    while (!(await fake.getJob('plain', job.metadata.name))?.succeeded) await fake.clock.sleep(1_000);
    const output = JSON.parse(
      readFileSync(join(fake.root, jobOutputDir(job.metadata.name), OUTPUT_FILES.prober), 'utf8'),
    ) as WatchProberOutput;
    const prober = watchResult(output, accepted);
    // Each sample includes the prober pod's start, about 4 s, in one attempt.
    expect(prober.latency?.p50Ms).toBeGreaterThan(3_000);
    const reasons = serviceScaleCheck(
      spec,
      { servicesReady: spec.services, entries: 1, entriesCommand: 'x', prober },
      [],
      'iptables',
      0,
    );
    expect(reasons.join('\n')).toContain("connected on the prober's first attempt");
  });
});

/**
 * The Done-when for the network report: the rehearsal's study folders read back from disk,
 * and their report: exactly the rehearsal's broken runs invalid, every table and chart rendered in
 * Chromium. Here, not in test/report/network, to read this file's rehearsal instead of running
 * the whole study a second time.
 */
describe('the report of the rehearsed default network study', () => {
  it('reads every cell from its results folder, marks exactly the broken runs invalid and renders in Chromium', async () => {
    const cells = await rehearsal();
    const files = (await Promise.all(cells.map((cell) => networkStudyFiles(cell.resultsDir)))).flat();
    expect(files).toEqual(cells.map((cell) => join(cell.studyDir, 'study.json')));

    const tables = networkReportTables(await loadNetworkStudies(files));
    expect(tables.invalid.map((r) => `${r.cell}/${r.runId}`).sort()).toEqual(
      Object.values(REHEARSAL_BROKEN)
        .map((b) => `${b.cell}/${b.runId}`)
        .sort(),
    );
    expect(tables.invalid.every((r) => r.reasons.length > 0)).toBe(true);
    expect(tables.cells.map((c) => c.state)).toEqual(cells.map(() => 'finished'));
    expect(tables.attribution.every((a) => a.available)).toBe(true);
    expect(tables.mtls.length).toBeGreaterThan(0);
    expect(tables.scale.length).toBeGreaterThan(0);
    expect(tables.conntrack.length).toBeGreaterThan(0);

    const out = tempDir('lab-net-rehearsal-report-');
    const { html, banner } = await writeNetworkReport(files, out);
    expect(banner).toBeUndefined();
    if (!canRenderInChromium) return;
    await withChromium(async (context) => {
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('console', (message) => {
        if (message.type() === 'error' || message.type() === 'warning') problems.push(message.text());
      });
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(pathToFileURL(html).href);
      // Every table but Flagged runs: the rehearsal flags no run.
      for (const id of NETWORK_SECTIONS.filter((section) => section !== 'flagged')) {
        expect(await page.locator(`section#${id} table tbody tr`).count(), `section ${id}`).toBeGreaterThan(
          0,
        );
      }
      expect(await page.locator('section#invalid tbody tr').count()).toBe(
        Object.keys(REHEARSAL_BROKEN).length,
      );
      expect(await page.locator('figure.chart svg').count()).toBe(4);
      expect(problems).toEqual([]);
    });
  });
});
