import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { runJobStarts, studyStartJobs } from '../../../lib/network/study/job-starts.ts';
import type { NetworkStudyPlan, NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { cellExperiments, networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { planNetworkStudy } from '../../../lib/network/study/planner.ts';
import { NETWORK_SMOKE_TARGET_MINUTES, networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import type { NetworkProof } from '../../../lib/network/study/smoke-checklist.ts';
import {
  conflict,
  SMOKE_CONCURRENCY,
  scheduleItems,
  smokeSchedule,
} from '../../../lib/network/study/smoke-schedule.ts';
import { cellByName } from '../../../lib/network/topology.ts';
import { networkStudyFiles } from '../../../lib/report/network/load.ts';
import {
  SMOKE_CHECKLIST_FILE,
  SMOKE_CHECKLIST_TEXT_FILE,
  SMOKE_REQUEST_FILE,
  STATUS_FILE,
  STUDY_FILE,
  studyDir,
} from '../../../lib/runner/layout.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { NETWORK_RUN_LABEL } from '../../../lib/runner/network/jobs.ts';
import { runNetworkLabStudy } from '../../../lib/runner/network/lab-study.ts';
import {
  type NetworkSmokeOutcome,
  runNetworkSmokeStudy,
  runNetworkStudy,
} from '../../../lib/runner/network/run-network-study.ts';
import type { StudyStatus } from '../../../lib/runner/status.ts';
import type { SmokeChecklist } from '../../../lib/study/smoke-checklist.ts';
import { tempDir } from '../../temp.ts';
import { FAST, FakeCell, type FakeJob, fakeDeps } from './fake-cell.ts';
import { SilentTelemetryCell } from './fake-cell-breaks.ts';

/**
 * The network lab's smoke study (issue 27) against fake cells: every default cell's smoke study,
 * its checklist, one cell broken on purpose (a mesh whose proxies export no Istio metrics, so no
 * mTLS is proven) failing only its own proofs, and the full study stopping on the same break
 * before its first long run.
 */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

interface SmokedCell {
  readonly cell: string;
  readonly root: string;
  readonly fake: FakeCell;
  readonly outcome: NetworkSmokeOutcome;
  readonly checklist: SmokeChecklist<NetworkProof>;
  /** Fake-clock milliseconds the smoke study took. */
  readonly elapsedMs: number;
  /** The runner's log lines. */
  readonly lines: readonly string[];
}

async function smoke(cell: string, fake: FakeCell, root: string): Promise<SmokedCell> {
  const started = fake.clock.ms;
  const lines: string[] = [];
  const outcome = await runNetworkSmokeStudy(
    fakeDeps(fake, new FileNetworkResultStore(root), lines),
    config,
    networkSmokePlan(config, cell),
    FAST,
  );
  if (!outcome.checklist) throw new Error(`no checklist for ${cell}: ${String(outcome.error)}`);
  return {
    cell,
    root,
    fake,
    outcome,
    checklist: outcome.checklist,
    elapsedMs: fake.clock.ms - started,
    lines,
  };
}

/** Each cell's failed proofs as `<run-id> <proof>`. */
function failures(checklist: SmokeChecklist<NetworkProof>): string[] {
  return checklist.entries.flatMap((e) =>
    e.checks.filter((c) => c.status === 'fail').map((c) => `${e.runId} ${c.proof}`),
  );
}

let healthy: SmokedCell[];
let broken: SmokedCell[];
beforeAll(async () => {
  healthy = [];
  broken = [];
  for (const { name } of config.network.cells) {
    const root = tempDir(`network-smoke-${name}-`);
    healthy.push(await smoke(name, new FakeCell(config, name, root), root));
    const brokenRoot = tempDir(`network-smoke-broken-${name}-`);
    const fake =
      name === 'mesh'
        ? new SilentTelemetryCell(config, name, brokenRoot)
        : new FakeCell(config, name, brokenRoot);
    broken.push(await smoke(name, fake, brokenRoot));
  }
}, 300_000);

describe('the network smoke study of the default lab', () => {
  it("runs every experiment of each cell, each arm once, and every proof passes, within the plan's estimate", () => {
    const plan = planNetworkStudy(config);
    for (const { cell, checklist, outcome, elapsedMs, root, fake } of healthy) {
      expect(outcome.error, cell).toBeUndefined();
      expect(failures(checklist), cell).toEqual([]);
      expect(checklist.passed).toBe(true);
      expect(checklist.cell).toBe(cell);
      const experiments = new Set(checklist.entries.slice(1).map((e) => e.subject.split(' ')[0]));
      expect([...experiments]).toEqual(cellExperiments(cellByName(config.network, cell)));
      // One repeat of each arm: no run id repeats an arm.
      expect(
        checklist.entries.every((e) => e.runId === 'study' || /-r1$|^smoke-e(2|8|9|10)-/.test(e.runId)),
      ).toBe(true);
      // Every cell within the 5-minute target and within what lab plan says (its overheads are
      // assumptions; the mesh cell's 19 runs overlap on the planned schedule).
      const estimate = plan.cells.find((c) => c.cell === cell)?.smoke;
      expect(elapsedMs / 1000, cell).toBeLessThanOrEqual(estimate?.durationSeconds ?? 0);
      expect(elapsedMs, cell).toBeLessThanOrEqual(NETWORK_SMOKE_TARGET_MINUTES * 60_000);
      expect(estimate?.overTarget, cell).toBe(false);
      // Its own folder, profile smoke, the checklist beside the records and in status.json.
      const folder = join(root, studyDir(checklist.studyId));
      expect(readJson<NetworkStudyRecord>(join(folder, STUDY_FILE))).toMatchObject({
        profile: 'smoke',
        state: 'finished',
      });
      expect(readJson<SmokeChecklist>(join(folder, SMOKE_CHECKLIST_FILE)).passed).toBe(true);
      expect(readFileSync(join(folder, SMOKE_CHECKLIST_TEXT_FILE), 'utf8')).toContain(
        `smoke checklist of study ${checklist.studyId} of cell ${cell}`,
      );
      expect(readJson<StudyStatus>(join(root, STATUS_FILE))).toMatchObject({
        state: 'finished',
        profile: 'smoke',
        checklist: { passed: true, cell },
      });
      // And leaves the cell as the charts made it.
      expect(fake.activeJobs()).toBe(0);
      expect(fake.allServices()).toBe(0);
      expect(fake.conntrackMax).toBe(fake.conntrackDefault);
    }
  });

  it('exercises every run-time proof the full study relies on, each with its evidence', () => {
    const passes = (cell: string, proof: NetworkProof) =>
      healthy
        .find((c) => c.cell === cell)
        ?.checklist.entries.flatMap((e) => e.checks.filter((c) => c.proof === proof && c.status === 'pass'))
        .map((c) => c.evidence) ?? [];
    expect(passes('dp-cilium', 'datapath')).toEqual([expect.stringContaining('KubeProxyReplacement true')]);
    expect(passes('dp-iptables', 'datapath')[0]).toMatch(/^iptables: [1-9]\d* KUBE-SVC chains/);
    // Mesh injection and mTLS proven on every mesh arm: the sidecar's counters by policy.
    expect(
      passes('mesh', 'sidecar').some((e) => /mesh\/net-smoke-e1-mesh-mtls-r1-\d+ with istio-proxy/.test(e)),
    ).toBe(true);
    const mtls = passes('mesh', 'mtls');
    // E1, E1s, E5, E6, E7 mesh-mtls; E3 mesh-mtls-off; E4 mesh-l4 (E3's mesh-mtls and E4's mesh-l7
    // are E1's mesh-mtls run at the smoke's load).
    expect(mtls.filter((e) => e.startsWith('proven by'))).toHaveLength(7);
    expect(mtls.some((e) => e.includes('istio_requests_total none +'))).toBe(true); // mTLS off, as configured
    expect(mtls.filter((e) => e.startsWith('every case observed as expected'))).toHaveLength(2); // E2, E8
    for (const cell of ['mesh', 'dp-iptables', 'dp-cilium']) {
      expect(passes(cell, 'services')).toEqual([
        expect.stringMatching(/method datapath \(first-attempt connects 0/),
        expect.stringMatching(/method datapath \(first-attempt connects 0/),
      ]);
      expect(passes(cell, 'conntrack')).toEqual([
        expect.stringMatching(/1024 during .* restored to 262144 \(read back 262144\)/),
      ]);
    }
  });
});

describe("lab plan's Job starts against the runner's", () => {
  it('counts every Job the runner creates on each cell, run by run, the study-start host Jobs and E10 host commands included', () => {
    for (const { cell, fake } of healthy) {
      const plan = networkSmokePlan(config, cell);
      const byRun = new Map<string, number>();
      for (const job of fake.created) {
        const run = job.metadata.labels[NETWORK_RUN_LABEL];
        byRun.set(run, (byRun.get(run) ?? 0) + 1);
      }
      const planned = new Map<string, number>([['study', studyStartJobs(plan.datapath).length]]);
      for (const run of plan.runs) planned.set(run.id, runJobStarts(run).length);
      expect(Object.fromEntries(byRun), cell).toEqual(Object.fromEntries(planned));
      expect(planNetworkStudy(config).cells.find((c) => c.cell === cell)?.smoke.jobStarts, cell).toBe(
        fake.created.length,
      );
    }
    // E10's step: the baseline read (which gives the host default too), the limit set, the
    // driver, the restore; the study's start one host Job for the host facts and the datapath.
    const { fake } = healthy[0];
    const jobsOf = (run: string) => fake.created.filter((j) => j.metadata.labels[NETWORK_RUN_LABEL] === run);
    expect(
      jobsOf('smoke-e10-limit-1024').map((j) => j.metadata.labels['app.kubernetes.io/component']),
    ).toEqual(['host-command', 'host-command', 'conntrack-driver', 'host-command']);
    expect(jobsOf('study').map((j) => j.metadata.name)).toEqual(['net-host-facts']);
  });
});

/** Each run's time on the cell: from its first Job's creation to its last Job's delete, in order of start. */
function runSpans(history: readonly FakeJob[]): { run: string; from: number; to: number }[] {
  const spans = new Map<string, { run: string; from: number; to: number }>();
  for (const j of history) {
    const run = j.job.metadata.labels[NETWORK_RUN_LABEL];
    if (run === 'study') continue;
    const to = j.deletedAtMs ?? Number.POSITIVE_INFINITY;
    const span = spans.get(run);
    if (span) span.to = Math.max(span.to, to);
    else spans.set(run, { run, from: j.createdAtMs, to });
  }
  return [...spans.values()];
}

/** How long at least one of the spans was going on. */
function coveredMs(spans: readonly { from: number; to: number }[]): number {
  let covered = 0;
  let until = Number.NEGATIVE_INFINITY;
  for (const s of [...spans].sort((a, b) => a.from - b.from)) {
    covered += Math.max(0, s.to - Math.max(s.from, until));
    until = Math.max(until, s.to);
  }
  return covered;
}

/** The most Jobs alive on the cell at once (created and not yet deleted). */
function mostJobsAlive(history: readonly FakeJob[]): number {
  const edges = history.flatMap((j) => [
    { at: j.createdAtMs, d: 1 },
    { at: j.deletedAtMs ?? Number.POSITIVE_INFINITY, d: -1 },
  ]);
  // A delete before a creation at the same instant: the runner waits for the one to go first.
  edges.sort((a, b) => a.at - b.at || a.d - b.d);
  let alive = 0;
  let most = 0;
  for (const e of edges) {
    alive += e.d;
    most = Math.max(most, alive);
  }
  return most;
}

describe("the smoke study's schedule on the cells (lib/network/study/smoke-schedule.ts)", () => {
  it('starts the runs in the order lab plan times, overlapping them, at most SMOKE_CONCURRENCY Jobs at once', () => {
    const mesh = healthy.find((c) => c.cell === 'mesh') as SmokedCell;
    const plan = networkSmokePlan(config, 'mesh');
    const schedule = smokeSchedule(plan.runs, plan.mesh);
    const spans = runSpans(mesh.fake.history);
    // The runner's start order (each run's `starting` line) is the planned one, run for run.
    const started = mesh.lines.flatMap((l) => /^run \d+\/\d+ (\S+): starting \(/.exec(l)?.[1] ?? []);
    expect(started).toEqual(schedule.order.map((r) => r.item.run.id));
    // Not serial: the plan assumes up to 3 runs at once, and the runner had that many Jobs alive.
    expect(schedule.maxConcurrent).toBe(SMOKE_CONCURRENCY);
    expect(mostJobsAlive(mesh.fake.history)).toBe(SMOKE_CONCURRENCY);
    // Overlap in time, not only in count: the runs' times on the cell added up exceed the time
    // they covered together by more than half a minute (one at a time, they would be equal).
    const sum = spans.reduce((total, s) => total + (s.to - s.from), 0);
    expect(sum - coveredMs(spans)).toBeGreaterThan(30_000);
    // The cells without a mesh plan one run at a time (E9 and E10 alone, one fortio run before).
    for (const cell of ['dp-iptables', 'dp-cilium']) {
      const smoked = healthy.find((c) => c.cell === cell) as SmokedCell;
      expect(mostJobsAlive(smoked.fake.history), cell).toBe(1);
    }
  });

  it('never overlaps two runs that conflict: E9 and E10 alone, a destination whose counters are read, a saturating run beside timed ones', () => {
    for (const { cell, fake } of [...healthy, ...broken]) {
      const plan = networkSmokePlan(config, cell);
      const items = new Map(scheduleItems(plan.runs, plan.mesh).map((i) => [i.run.id, i]));
      const spans = runSpans(fake.history);
      const overlapping: string[] = [];
      for (const a of spans)
        for (const b of spans)
          if (a.run < b.run && a.from < b.to && b.from < a.to) {
            const why = conflict(items.get(a.run) as never, items.get(b.run) as never);
            if (why) overlapping.push(`${a.run} with ${b.run}: ${why}`);
          }
      expect(overlapping, cell).toEqual([]);
      // The runs that must be alone had the cell to themselves.
      for (const span of spans.filter((s) => items.get(s.run)?.footprint.alone))
        expect(
          spans.filter((o) => o.run !== span.run && o.from < span.to && span.from < o.to).map((o) => o.run),
          span.run,
        ).toEqual([]);
    }
  });

  it("keeps the checklist and the records in the plan's order, though runs end out of it", () => {
    const mesh = healthy.find((c) => c.cell === 'mesh') as SmokedCell;
    const plan = networkSmokePlan(config, 'mesh');
    expect(mesh.checklist.entries.map((e) => e.runId)).toEqual(['study', ...plan.runs.map((r) => r.id)]);
    const study = readJson<NetworkStudyRecord>(join(mesh.root, studyDir(mesh.checklist.studyId), STUDY_FILE));
    expect(study.runs.map((r) => r.id)).toEqual(plan.runs.map((r) => r.id));
    const ends = study.runs.map((r) => Date.parse(r.finishedAt));
    expect(ends.some((end, i) => i > 0 && end < ends[i - 1])).toBe(true);
  });
});

describe('the smoke checklist with one cell broken on purpose', () => {
  it("fails only the broken mesh cell's mTLS proofs, each with its evidence and fix; the other cells pass", () => {
    for (const { cell, checklist } of broken) {
      if (cell !== 'mesh') {
        expect(failures(checklist), cell).toEqual([]);
        continue;
      }
      const failed = failures(checklist);
      // Every mesh arm that carries load (E1, E1s, E3, E4, E5, E6, E7), and nothing else.
      const meshArms = networkSmokePlan(config, 'mesh').runs.filter(
        (r) => 'arm' in r.spec && r.spec.arm !== 'plain',
      );
      expect(failed.sort()).toEqual(meshArms.map((r) => `${r.id} mtls`).sort());
      const check = checklist.entries
        .find((e) => e.runId === 'smoke-e1-mesh-mtls-r1')
        ?.checks.find((c) => c.proof === 'mtls');
      expect(check?.evidence).toMatch(
        /^mTLS unproven: istio_requests_total\{connection_security_policy="mutual_tls"\} grew by 0/,
      );
      expect(check?.fix).toContain(':15020/stats/prometheus');
      expect(checklist.passed).toBe(false);
    }
  });
});

describe('the full network study checks first and stops on the same break', () => {
  it('stops the mesh cell before its first long run, with the checklist; once mended, lab run resumes it', async () => {
    const root = tempDir('network-full-broken-');
    const fake = new SilentTelemetryCell(config, 'mesh', root);
    const deps = fakeDeps(fake, new FileNetworkResultStore(root));
    const checks = networkSmokePlan(config, 'mesh');
    const started = fake.clock.ms;
    await expect(
      runNetworkStudy(deps, config, networkStudyPlan(config, 'mesh'), FAST, { checks }),
    ).rejects.toThrow(
      /the smoke checks of cell mesh failed before the first long run: E1 mesh-mtls: mTLS evidence: mTLS unproven/,
    );
    // Minutes, not the study's hour: the smoke checks alone.
    const plan = planNetworkStudy(config).cells.find((c) => c.cell === 'mesh');
    expect(fake.clock.ms - started).toBeLessThan(((plan?.smoke.durationSeconds ?? 0) + 60) * 1000);
    const status = readJson<StudyStatus>(join(root, STATUS_FILE));
    expect(status.state).toBe('failed');
    expect(status.checklist?.passed).toBe(false);
    const study = readJson<NetworkStudyRecord>(join(root, studyDir(status.studyId as string), STUDY_FILE));
    expect(study.state).toBe('failed');
    expect(study.runs).toEqual([]);
    expect(study.checks?.passed).toBe(false);
    expect(study.checks?.failures.every((f) => f.includes('mTLS evidence: mTLS unproven'))).toBe(true);

    // Mended: the same study resumes, checks again, passes, and runs (two runs of it, for speed).
    fake.silent = false;
    const short: NetworkStudyPlan = {
      ...networkStudyPlan(config, 'mesh'),
      runs: networkStudyPlan(config, 'mesh').runs.filter((r) => ['c-r1', 'e1-mesh-mtls-r1'].includes(r.id)),
    };
    const resumed = await runNetworkStudy(deps, config, short, FAST, { checks });
    expect(resumed.studyId).toBe(study.studyId);
    expect(resumed.checks?.passed).toBe(true);
    expect(resumed.runs.map((r) => [r.id, r.valid])).toEqual([
      ['c-r1', true],
      ['e1-mesh-mtls-r1', true],
    ]);
  });
});

describe('what a cell runner starts', () => {
  const tiny = (cfg: LabConfig) => {
    const full = networkStudyPlan(cfg, 'dp-iptables');
    const smokePlan = networkSmokePlan(cfg, 'dp-iptables');
    return {
      full: { ...full, runs: full.runs.filter((r) => r.id === 'c-r1') },
      smoke: { ...smokePlan, runs: smokePlan.runs.filter((r) => r.id === 'smoke-c-r1') },
    };
  };

  it('lab run --smoke --cell: the smoke study, once; then the full study with its checks', async () => {
    const root = tempDir('network-lab-study-');
    const deps = fakeDeps(new FakeCell(config, 'dp-iptables', root), new FileNetworkResultStore(root));
    writeFileSync(join(root, SMOKE_REQUEST_FILE), '');
    const first = await runNetworkLabStudy(deps, config, tiny(config), FAST);
    expect(first.kind).toBe('smoke');
    expect(existsSync(join(root, SMOKE_REQUEST_FILE))).toBe(false);
    const second = await runNetworkLabStudy(deps, config, tiny(config), FAST);
    expect(second.kind).toBe('full');
    if (second.kind === 'full') expect(second.study.checks?.passed).toBe(true);
    // A later smoke study: lab report still reads the cell's full study, never a smoke study.
    writeFileSync(join(root, SMOKE_REQUEST_FILE), '');
    expect((await runNetworkLabStudy(deps, config, tiny(config), FAST)).kind).toBe('smoke');
    const full = second.kind === 'full' ? second.study.studyId : '';
    expect(await networkStudyFiles(root)).toEqual([join(root, studyDir(full), STUDY_FILE)]);
  });

  it('study.profile smoke: the smoke study until one of this configuration has finished', async () => {
    const profiled: LabConfig = { ...config, study: { ...config.study, profile: 'smoke' } };
    const root = tempDir('network-profile-');
    const deps = fakeDeps(new FakeCell(profiled, 'dp-iptables', root), new FileNetworkResultStore(root));
    expect((await runNetworkLabStudy(deps, profiled, tiny(profiled), FAST)).kind).toBe('smoke');
    expect((await runNetworkLabStudy(deps, profiled, tiny(profiled), FAST)).kind).toBe('full');
  });
});
