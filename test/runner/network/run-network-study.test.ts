import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadLabConfig, parseLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { SCALE_SERVICE_LABEL } from '../../../lib/network/topology.ts';
import { STATUS_FILE } from '../../../lib/runner/layout.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import {
  chooseNetworkStudy,
  forEachLimited,
  runNetworkStudy,
  scaleServiceName,
  serviceOfUrl,
} from '../../../lib/runner/network/run-network-study.ts';
import type { StudyStatus } from '../../../lib/runner/status.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, type FakeCellOptions, fakeDeps } from './fake-cell.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
type Any = any;

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

/** The cell's plan, cut down to the runs named (in plan order). */
function planOf(cell: string, ids: readonly string[]): NetworkStudyPlan {
  const full = networkStudyPlan(config, cell);
  const runs = full.runs.filter((r) => ids.includes(r.id));
  expect(runs.map((r) => r.id)).toEqual(full.runs.map((r) => r.id).filter((id) => ids.includes(id)));
  return { ...full, runs };
}

function setup(cell: string, options: FakeCellOptions = {}) {
  const root = tempDir('network-runner-');
  const fake = new FakeCell(config, cell, root, options);
  const store = new FileNetworkResultStore(root);
  const lines: string[] = [];
  const statuses: StudyStatus[] = [];
  const deps = fakeDeps(fake, store, lines);
  const recording = {
    ...deps,
    store: Object.assign(Object.create(Object.getPrototypeOf(store)), store, {
      writeStatus: async (status: StudyStatus) => {
        statuses.push(status);
        await store.writeStatus(status);
      },
    }),
  };
  return { root, fake, store, lines, statuses, deps: recording };
}

describe('runNetworkStudy', () => {
  it('runs fortio arms with the sidecar evidence and the server sidecar counters of mesh arms', async () => {
    const t = setup('mesh');
    const study = await runNetworkStudy(
      t.deps,
      config,
      planOf('mesh', ['e1-plain-r1', 'e1-mesh-mtls-r1']),
      FAST,
    );
    expect(study.state).toBe('finished');
    const [plain, mesh] = study.runs;
    expect(plain.valid, plain.invalidReasons.join('; ')).toBe(true);
    expect(mesh.valid, mesh.invalidReasons.join('; ')).toBe(true);
    expect(plain.result?.kind).toBe('fortio');
    expect(plain.mtlsMetrics).toBeUndefined();
    const client = mesh.pods.find((p) => p.pod.startsWith('net-e1-mesh-mtls-r1'));
    expect(client).toMatchObject({ namespace: 'mesh', hasSidecar: true, node: 'ip-10-0-1-23' });
    expect(plain.pods.find((p) => p.pod.startsWith('net-e1-plain-r1'))?.hasSidecar).toBe(false);
    const count = JSON.parse((mesh.result as { raw: string }).raw).DurationHistogram.Count;
    expect(mesh.mtlsMetrics?.requestsBySecurityPolicy).toEqual({ mutual_tls: count });
    expect(mesh.mtlsProof).toBe('proven');
    expect(plain.mtlsProof).toBeUndefined();
    // The host facts and the datapath are recorded once per study.
    expect(study.host).toMatchObject({ instanceType: 'c7i.2xlarge', kernel: '6.8.0-1016-aws' });
    expect(study.host.cpuFlags).toContain('vaes');
    expect(study.datapathEvidence).toMatchObject({ kubeProxyReplacement: null, nftKubeProxyTable: false });
    // Every Job had backoffLimit 0 (the fake refuses others) and is gone afterwards.
    expect(t.fake.activeJobs()).toBe(0);
  });

  it('retries a transient API 500 and logs the retry', async () => {
    const t = setup('dp-iptables');
    t.fake.failures.set('getJob', [500, 503]);
    const study = await runNetworkStudy(t.deps, config, planOf('dp-iptables', ['c-r1']), FAST);
    expect(study.runs[0].valid, study.runs[0].invalidReasons.join('; ')).toBe(true);
    expect(t.lines.filter((l) => /^retry \d\/4 of get job\//.test(l))).toHaveLength(2);
  });

  it('records a failed Job as invalid, by its counts', async () => {
    const t = setup('dp-iptables');
    t.fake.failJobs = /^net-c-r1$/;
    const study = await runNetworkStudy(t.deps, config, planOf('dp-iptables', ['c-r1', 'c-r2']), FAST);
    expect(study.runs[0]).toMatchObject({ job: 'failed', valid: false });
    expect(study.runs[0].invalidReasons.join('\n')).toMatch(/job\/net-c-r1 failed and left no result file/);
    expect(study.runs[1].valid).toBe(true);
  });

  it('records a run whose Job succeeded without a result file as invalid', async () => {
    const t = setup('dp-iptables');
    t.fake.noOutput = /^net-c-r1$/;
    const study = await runNetworkStudy(t.deps, config, planOf('dp-iptables', ['c-r1']), FAST);
    expect(study.runs[0]).toMatchObject({ job: 'succeeded', valid: false });
    expect(study.runs[0].result).toBeUndefined();
    expect(study.runs[0].invalidReasons).toEqual([
      'job/net-c-r1 succeeded and left no result file (fortio.json)',
      'the run left no result',
    ]);
  });

  it('deletes a Job that does not finish in time and records the run as timed out', async () => {
    const t = setup('dp-iptables');
    t.fake.hangJobs = /^net-c-r1$/;
    const study = await runNetworkStudy(t.deps, config, planOf('dp-iptables', ['c-r1', 'c-r2']), {
      ...FAST,
      jobTimeoutMs: 120_000,
    });
    expect(study.runs[0]).toMatchObject({ job: 'timed-out', valid: false });
    expect(study.runs[0].invalidReasons.join('\n')).toMatch(
      /job\/net-c-r1 timed-out and left no result file/,
    );
    expect(t.lines.some((l) => /job\/net-c-r1 did not finish within 2m00s; deleting it/.test(l))).toBe(true);
    expect(study.runs[1].valid).toBe(true);
    expect(t.fake.activeJobs()).toBe(0);
  });

  it('makes an E9 step on Cilium invalid when the agent logs a full map', async () => {
    const t = setup('dp-cilium');
    t.fake.ciliumAgentLog = 'level=warning msg="Unable to update element for LB map" error="map is full"\n';
    const study = await runNetworkStudy(t.deps, config, planOf('dp-cilium', ['e9-services-100']), FAST);
    const [step] = study.runs;
    if (step.result?.kind !== 'service-scale') throw new Error('not a scale result');
    expect(step.result.scale).toMatchObject({
      lbMapFull: true,
      entriesCommand: 'cilium-dbg bpf lb list | wc -l',
    });
    expect(step.valid).toBe(false);
    expect(step.invalidReasons).toContain('the Cilium agent logged "map full" during the step');
    const entriesJob = t.fake.created.find((j) => j.metadata.name === 'net-entries-e9-services-100');
    expect(entriesJob?.metadata.labels['app.kubernetes.io/component']).toBe('cilium-command');
  });

  it("proves the L4 arm's mTLS by istio_tcp_connections_opened_total{connection_security_policy}, or says it is unproven", async () => {
    const l4 = planOf('mesh', ['e4-mesh-l4-r1']);
    const proven = setup('mesh');
    const [run] = (await runNetworkStudy(proven.deps, config, l4, FAST)).runs;
    expect(run.valid, run.invalidReasons.join('; ')).toBe(true);
    expect(run.mtlsProof).toBe('proven');
    expect(run.mtlsMetrics?.tcpConnectionsBySecurityPolicy).toEqual({ mutual_tls: 16 });
    expect(run.mtlsMetrics?.requestsBySecurityPolicy).toEqual({});

    // A sidecar whose TCP counter has no connection_security_policy proves nothing: a plaintext
    // relay counts connections too.
    const unlabelled = setup('mesh');
    unlabelled.fake.tcpTelemetry = 'unlabelled';
    const [bare] = (await runNetworkStudy(unlabelled.deps, config, l4, FAST)).runs;
    expect(bare.valid).toBe(false);
    expect(bare.mtlsProof).toBe('unproven');
    expect(bare.invalidReasons).toEqual([
      expect.stringMatching(/^mTLS unproven: .*connection_security_policy="mutual_tls"\} did not grow/),
    ]);

    const plaintext = setup('mesh');
    plaintext.fake.tcpTelemetry = 'plaintext-l4';
    const [clear] = (await runNetworkStudy(plaintext.deps, config, l4, FAST)).runs;
    expect(clear.valid).toBe(false);
    expect(clear.mtlsProof).toBe('contradicted');
    expect(clear.invalidReasons.join('; ')).toContain('16 under connection_security_policy="none"');
  });

  it('restarts mesh pods created before the label, before a mesh run', async () => {
    const t = setup('mesh', { meshPodsBeforeLabel: true });
    expect(t.fake.serverPods('mesh').every((p) => !p.hasSidecar)).toBe(true);
    const study = await runNetworkStudy(t.deps, config, planOf('mesh', ['e1-mesh-mtls-r1']), FAST);
    expect(study.runs[0].valid, study.runs[0].invalidReasons.join('; ')).toBe(true);
    expect(t.fake.serverPods('mesh').every((p) => p.hasSidecar)).toBe(true);
    expect(t.lines.some((l) => /pod mesh\/fortio-.* is not in the mesh .*deleting it/.test(l))).toBe(true);
  });

  it('does not start a mesh run when the namespace lacks its label', async () => {
    const t = setup('mesh');
    (t.fake as unknown as { namespaces: Record<string, Record<string, string>> }).namespaces.mesh = {};
    const study = await runNetworkStudy(t.deps, config, planOf('mesh', ['e1-mesh-mtls-r1']), FAST);
    expect(study.runs[0].valid).toBe(false);
    expect(study.runs[0].invalidReasons[0]).toMatch(
      /^not started: namespace mesh lacks the label istio-injection=enabled that mesh sidecar needs/,
    );
    expect(t.fake.created.filter((j) => j.metadata.name.startsWith('net-e1'))).toHaveLength(0);
  });

  it('creates N Services with bounded concurrency, counts entries, probes, and deletes them at the end', async () => {
    const t = setup('dp-iptables');
    let inFlight = 0;
    let most = 0;
    const create = t.fake.createService.bind(t.fake);
    t.fake.createService = async (s) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setImmediate(r));
      inFlight--;
      return create(s);
    };
    let during = 0;
    const entries = t.fake.listServices.bind(t.fake);
    t.fake.listServices = async (ns, selector) => {
      during = Math.max(during, t.fake.scaleServices());
      return entries(ns, selector);
    };
    const study = await runNetworkStudy(
      t.deps,
      config,
      planOf('dp-iptables', ['e9-services-100', 'e9-new-connection-100']),
      FAST,
    );
    const [step, newConnection] = study.runs;
    expect(step.valid, step.invalidReasons.join('; ')).toBe(true);
    expect(newConnection.valid, newConnection.invalidReasons.join('; ')).toBe(true);
    if (step.result?.kind !== 'service-scale') throw new Error('not a scale result');
    expect(step.result.scale).toMatchObject({
      servicesReady: 100,
      entriesCommand: 'iptables-save -t nat | wc -l',
    });
    expect(step.result.scale.entries).toBeGreaterThan(7 * 100);
    expect(step.result.scale.prober?.samples).toHaveLength(config.network.experiments.serviceScale.samples);
    expect(most).toBe(config.network.experiments.serviceScale.createConcurrency);
    expect(during).toBe(100);
    // The study's Services (scale and probe) are gone once it ends.
    expect(t.fake.allServices()).toBe(0);
  });

  it('E9 waits for backendsPerService ready backends behind every Service, and does not start without them', async () => {
    const raw = parse(readFileSync('examples/network-lab.yaml', 'utf8'));
    raw.network.experiments = { ...raw.network.experiments };
    raw.network.experiments.serviceScale = { ...raw.network.experiments.serviceScale, backendsPerService: 2 };
    const two = parseLabConfig(raw);
    expect(two.network.experiments.serviceScale.backendsPerService).toBe(2);
    const plan = { ...networkStudyPlan(two, 'dp-cilium') };
    const runs = plan.runs.filter((r) => r.id === 'e9-services-100');
    for (const [ready, valid] of [
      [2, true],
      [1, false],
    ] as const) {
      const root = tempDir('network-backends-');
      const fake = new FakeCell(two, 'dp-cilium', root, { readyBackends: ready });
      const deps = fakeDeps(fake, new FileNetworkResultStore(root));
      const study = await runNetworkStudy(deps, two, { ...plan, runs }, { ...FAST, readyTimeoutMs: 5_000 });
      expect(study.runs[0].valid, study.runs[0].invalidReasons.join('; ')).toBe(valid);
      if (!valid)
        expect(study.runs[0].invalidReasons[0]).toContain(
          '1 ready scale-backend pods, 2 wanted (experiments.serviceScale.backendsPerService)',
        );
    }
  });

  it('calibrates pod to pod: the C run reaches the server by its pod IP, not through the ClusterIP', async () => {
    const t = setup('dp-iptables');
    const study = await runNetworkStudy(
      t.deps,
      config,
      planOf('dp-iptables', ['c-r1', 'e9-services-0']),
      FAST,
    );
    expect(study.runs[0].valid, study.runs[0].invalidReasons.join('; ')).toBe(true);
    const server = t.fake.serverPods('plain').find((p) => p.app === 'fortio');
    const job = t.fake.created.find((j) => j.metadata.name === 'net-c-r1');
    expect(job).toBeDefined();
    const args: string[] = (job as Any).spec.template.spec.containers[0].args;
    expect(args[args.length - 1]).toMatch(new RegExp(`^http://${server?.podIp.replace(/\./g, '\\.')}:8080/`));
    expect(JSON.stringify(job)).not.toContain('fortio.plain');
  });

  it('conntrack: sets the limit, drives the connections and restores the limit', async () => {
    const t = setup('dp-iptables');
    const study = await runNetworkStudy(
      t.deps,
      config,
      planOf('dp-iptables', ['e10-limit-default', 'e10-limit-2048']),
      FAST,
    );
    const [def, small] = study.runs;
    expect(def.valid && small.valid, [...def.invalidReasons, ...small.invalidReasons].join('; ')).toBe(true);
    if (small.result?.kind !== 'conntrack') throw new Error('not a conntrack result');
    expect(small.result.conntrack).toMatchObject({
      limitBefore: 262_144,
      limit: 2_048,
      baseline: 180,
      limitAfterRestore: 262_144,
    });
    expect(small.result.conntrack.driver?.succeeded).toBeLessThan(2_048 - 180);
    expect(t.fake.conntrackWrites).toEqual([2_048, 262_144]);
    expect(t.fake.conntrackMax).toBe(262_144);
  });

  it('conntrack: ALWAYS restores the limit, even when the driver fails and the first restore fails', async () => {
    const t = setup('dp-iptables');
    t.fake.failJobs = /driver/;
    const plan = planOf('dp-iptables', ['e10-limit-default', 'e10-limit-1024']);
    const step = plan.runs[1];
    // The driver fails; then the first restore Job fails too (its write fails), the second restores.
    const originalWrite = t.fake.conntrackWrites.push.bind(t.fake.conntrackWrites);
    t.fake.conntrackWrites.push = (...values: number[]) => {
      if (values[0] === 1_024) t.fake.failConntrackWrites = 1;
      return originalWrite(...values);
    };
    const study = await runNetworkStudy(t.deps, config, plan, FAST);
    const record = study.runs.find((r) => r.id === step.id);
    expect(record?.valid).toBe(false);
    expect(record?.invalidReasons.join('\n')).toMatch(
      /job\/net-e10-limit-1024-driver failed and left no result file/,
    );
    if (record?.result?.kind !== 'conntrack') throw new Error('not a conntrack result');
    expect(record.result.conntrack.limitAfterRestore).toBe(262_144);
    expect(t.fake.conntrackMax).toBe(262_144);
    expect(t.lines.some((l) => /restoring the conntrack limit failed \(try 1\/2\)/.test(l))).toBe(true);
  });

  it('conntrack: restores the host default read before the first E10 step, not the lowered limit a failed restore left', async () => {
    const t = setup('dp-iptables');
    const plan = planOf('dp-iptables', ['e10-limit-2048', 'e10-limit-1024']);
    // The 2048 step's restore fails twice: the host is left at 2,048, as after a killed run.
    const originalWrite = t.fake.conntrackWrites.push.bind(t.fake.conntrackWrites);
    t.fake.conntrackWrites.push = (...values: number[]) => {
      if (values[0] === 2_048) t.fake.failConntrackWrites = 2;
      return originalWrite(...values);
    };
    const study = await runNetworkStudy(t.deps, config, plan, FAST);
    expect(study.conntrackHostDefault).toBe(262_144);
    const [first, second] = study.runs;
    expect(first.valid).toBe(false);
    if (second.result?.kind !== 'conntrack') throw new Error('not a conntrack result');
    // The next step found 2,048 and still put back the host's own default.
    expect(second.result.conntrack).toMatchObject({
      limitBefore: 2_048,
      limit: 1_024,
      restoredTo: 262_144,
      limitAfterRestore: 262_144,
    });
    expect(second.valid, second.invalidReasons.join('; ')).toBe(true);
    expect(t.fake.conntrackMax).toBe(262_144);
  });

  it('conntrack: a limit that cannot be restored makes the step invalid, naming it', async () => {
    const t = setup('dp-iptables');
    const plan = planOf('dp-iptables', ['e10-limit-2048']);
    const originalWrite = t.fake.conntrackWrites.push.bind(t.fake.conntrackWrites);
    t.fake.conntrackWrites.push = (...values: number[]) => {
      if (values[0] === 2_048) t.fake.failConntrackWrites = 2;
      return originalWrite(...values);
    };
    const study = await runNetworkStudy(t.deps, config, plan, FAST);
    expect(study.runs[0].valid).toBe(false);
    expect(study.runs[0].invalidReasons.join('\n')).toMatch(
      /conntrack limit not restored: job\/net-ct-restore-e10-limit-2048 failed/,
    );
  });

  it('resumes after a restart: recorded runs are skipped, the rest run in the same study folder', async () => {
    const t = setup('dp-iptables');
    const plan = planOf('dp-iptables', ['c-r1', 'c-r2', 'c-r3']);
    // The API refuses the second run's Job on its merits (403: not retried): the study stops.
    let creates = 0;
    const create = t.fake.createJob.bind(t.fake);
    t.fake.createJob = async (job) => {
      if (job.metadata.name === 'net-c-r2' && creates++ === 0)
        throw Object.assign(new Error('HTTP 403: forbidden'), { status: 403 });
      return create(job);
    };
    await expect(runNetworkStudy(t.deps, config, plan, FAST)).rejects.toThrow(/403/);
    const status = JSON.parse(readFileSync(join(t.root, STATUS_FILE), 'utf8')) as StudyStatus;
    expect(status).toMatchObject({ state: 'failed', recordedRuns: 1 });
    const firstId = status.studyId;

    t.fake.created.length = 0;
    const study = await runNetworkStudy(t.deps, config, plan, FAST);
    expect(study.studyId).toBe(firstId);
    expect(study.state).toBe('finished');
    expect(study.runs.map((r) => r.id)).toEqual(['c-r1', 'c-r2', 'c-r3']);
    expect(t.fake.created.map((j) => j.metadata.name).filter((n) => n.startsWith('net-c-'))).toEqual([
      'net-c-r2',
      'net-c-r3',
    ]);
    expect(t.lines.some((l) => l === 'run 1/3 c-r1: recorded earlier, skipped')).toBe(true);
  });

  it('flags a repeat that strays from its repeat group, and never compares runs of different groups', async () => {
    const t = setup('mesh');
    // e1-plain-r4 and the new-connection run at 0 Services are 8% slower than their arms. E9's
    // new-connection runs share experiment, arm and mode across Service counts, but repeat nothing.
    t.fake.slowFortio = /^net-(e1-plain-r4|e9-new-connection-0)$/;
    const repeats = ['e1-plain-r1', 'e1-plain-r2', 'e1-plain-r3', 'e1-plain-r4', 'e1-plain-r5'];
    const ids = [...repeats, 'e9-new-connection-0', 'e9-new-connection-100'];
    const study = await runNetworkStudy(t.deps, config, planOf('mesh', ids), FAST);
    expect(study.runs.map((r) => [r.id, r.valid])).toEqual(ids.map((id) => [id, true]));
    const flagged = study.runs.filter((r) => (r.flags ?? []).length > 0);
    expect(flagged.map((r) => r.id)).toEqual(['e1-plain-r4']);
    expect(flagged[0].flags?.[0]).toMatch(
      /^repeat spread: e1-plain-r4 mean .* above the 5 repeats' mean .* of E1 plain fixed-rate \(repeats of e1-plain\)/,
    );
    expect(study.runs.find((r) => r.id === 'e1-plain-r4')?.repeatGroup).toBe('e1-plain');
    expect(study.runs.find((r) => r.id === 'e9-new-connection-0')?.repeatGroup).toBeUndefined();
    // The flag is in the run's own file too, written when its group changed.
    const saved = await t.store.study(study.studyId).readRuns();
    expect(saved.runs.find((r) => r.id === 'e1-plain-r4')?.flags).toEqual(flagged[0].flags);
  });

  it('compares the records of an older runner, which have no repeat group, when it resumes their study', async () => {
    const t = setup('mesh');
    t.fake.slowFortio = /^net-e1-plain-r4$/;
    const ids = ['e1-plain-r1', 'e1-plain-r2', 'e1-plain-r3', 'e1-plain-r4', 'e1-plain-r5'];
    const plan = planOf('mesh', ids);
    // The first runner stops before r5 (a 403 is not retried).
    let refused = false;
    const create = t.fake.createJob.bind(t.fake);
    t.fake.createJob = async (job) => {
      if (job.metadata.name === 'net-e1-plain-r5' && !refused) {
        refused = true;
        throw Object.assign(new Error('HTTP 403: forbidden'), { status: 403 });
      }
      return create(job);
    };
    await expect(runNetworkStudy(t.deps, config, plan, FAST)).rejects.toThrow(/403/);
    // As an older runner wrote them: no repeatGroup (nor its flags) in study.json and the run files.
    const { studyId } = JSON.parse(readFileSync(join(t.root, STATUS_FILE), 'utf8')) as StudyStatus;
    const folder = join(t.root, 'studies', studyId as string);
    const strip = (path: string) => {
      const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'), (key, value) =>
        key === 'repeatGroup' || key === 'flags' ? undefined : value,
      );
      const text = JSON.stringify(parsed, null, 2);
      writeFileSync(path, text);
      return text;
    };
    expect(strip(join(folder, 'study.json'))).not.toContain('repeatGroup');
    for (const id of ids.slice(0, 4)) strip(join(folder, 'runs', `${id}.json`));

    const study = await runNetworkStudy(t.deps, config, plan, FAST);
    expect(study.studyId).toBe(studyId);
    expect(study.runs.filter((r) => (r.flags ?? []).length > 0).map((r) => r.id)).toEqual(['e1-plain-r4']);
    expect(study.runs.every((r) => r.repeatGroup === 'e1-plain')).toBe(true);
  });

  it('writes status.json with an ETA while it runs, and finished at the end', async () => {
    const t = setup('dp-iptables');
    await runNetworkStudy(t.deps, config, planOf('dp-iptables', ['c-r1', 'c-r2', 'c-r3']), FAST);
    const withEta = t.statuses.filter((s) => s.etaSeconds !== undefined);
    expect(withEta.length).toBeGreaterThan(0);
    expect(withEta.some((s) => s.current?.id === 'c-r3')).toBe(true);
    // 25 s runs plus Job bookkeeping: the ETA of run 2 is about one run.
    const second = withEta.find((s) => s.current?.id === 'c-r2');
    expect(second?.etaSeconds).toBeGreaterThan(20);
    expect(t.statuses.at(-1)).toMatchObject({ state: 'finished', recordedRuns: 3, validRuns: 3 });
  });
});

describe('network runner helpers', () => {
  it('chooses the latest unfinished study of the same cell and configuration', () => {
    const now = new Date('2026-01-02T00:00:00Z');
    const fresh = chooseNetworkStudy([], config, 'mesh', now, false);
    expect(fresh.kind).toBe('new');
    const base = {
      lab: 'network' as const,
      datapath: 'iptables' as const,
      mesh: 'sidecar' as const,
      runs: [],
    };
    const host = { instanceType: 'x', availabilityZone: 'y', kernel: 'k', cpuFlags: [], versions: {} };
    const stored = [
      {
        ...base,
        host,
        studyId: fresh.id.replace(/^\d{8}/, '20251230'),
        cell: 'mesh',
        startedAt: '2025-12-30T00:00:00Z',
        state: 'running' as const,
      },
      {
        ...base,
        host,
        studyId: fresh.id.replace(/^\d{8}/, '20251231'),
        cell: 'mesh',
        startedAt: '2025-12-31T00:00:00Z',
        state: 'failed' as const,
      },
      {
        ...base,
        host,
        studyId: fresh.id.replace(/^\d{8}/, '20260101'),
        cell: 'mesh',
        startedAt: '2026-01-01T00:00:00Z',
        state: 'finished' as const,
      },
      {
        ...base,
        host,
        studyId: fresh.id.replace(/^\d{8}/, '20260101'),
        cell: 'dp-iptables',
        startedAt: '2026-01-01T00:00:00Z',
        state: 'running' as const,
      },
    ];
    expect(chooseNetworkStudy(stored, config, 'mesh', now, false)).toMatchObject({
      kind: 'resume',
      id: stored[1].studyId,
    });
    expect(chooseNetworkStudy(stored, config, 'mesh', now, true).kind).toBe('new');
  });

  it('names E9 Services from the template and finds the Service behind a URL', () => {
    const t = setup('dp-iptables');
    expect(scaleServiceName(t.fake.serviceTemplate, 1234)).toBe('scale-01234');
    expect(t.fake.serviceTemplate.metadata.labels[SCALE_SERVICE_LABEL]).toBe('true');
    expect(serviceOfUrl('http://fortio.mesh.svc.cluster.local:8080/echo?size=1', 'plain')).toEqual({
      service: 'fortio',
      namespace: 'mesh',
    });
    expect(serviceOfUrl('fortio.plain.svc.cluster.local:8079', 'mesh')).toEqual({
      service: 'fortio',
      namespace: 'plain',
    });
  });

  it('forEachLimited never runs more than its limit at once', async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await forEachLimited([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 1));
      running--;
      done.push(n);
    });
    expect(most).toBe(3);
    expect(done.sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });
});
