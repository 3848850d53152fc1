import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../../lib/config/load.ts';
import type { NetworkStudyPlan, NetworkStudyRecord } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { KubeApiError } from '../../../lib/runner/kube-cluster.ts';
import { STATUS_FILE } from '../../../lib/runner/layout.ts';
import { retryingNetworkCluster } from '../../../lib/runner/network/cluster-retry.ts';
import { FileNetworkResultStore } from '../../../lib/runner/network/file-store.ts';
import { hostCommandJob } from '../../../lib/runner/network/jobs.ts';
import { runNetworkSmokeStudy, runNetworkStudy } from '../../../lib/runner/network/run-network-study.ts';
import type { NetworkCluster, NetworkResultStore } from '../../../lib/runner/ports.ts';
import type { StudyStatus } from '../../../lib/runner/status.ts';
import { linkPython3 } from '../../host-python.ts';
import { tempDir } from '../../temp.ts';
import { killAfterWrite, RunnerKilled } from '../rehearsal-kit.ts';
import { FakeCell, fakeDeps } from './fake-cell.ts';

/**
 * Issue 25 for the network runner: the study runner's findings where the network runner does the
 * same thing (an API outage, a killed runner's files and Jobs), each against the fake cell on its
 * fake clock.
 */

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

/** Fast polls; the error policy's defaults (the runner pod's), so the outage limit is the product's. */
const POLLS = { pollIntervalMs: 1_000 };

function planOf(cell: string, ids: readonly string[]): NetworkStudyPlan {
  const full = networkStudyPlan(config, cell);
  return { ...full, runs: full.runs.filter((r) => ids.includes(r.id)) };
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

function cellLab(cell: string) {
  const root = tempDir('network-findings-');
  const fake = new FakeCell(config, cell, root);
  const lines: string[] = [];
  const store = new FileNetworkResultStore(root);
  return { root, fake, lines, store, deps: fakeDeps(fake, store, lines) };
}

/** The folder of the study the cell's last runner worked on. */
function studyFolder(root: string): string {
  return join(root, 'studies', readJson<StudyStatus>(join(root, STATUS_FILE)).studyId as string);
}

/** Every call of the cell's API passes through `fault` first (which may throw), by method name. */
function faulty(
  cluster: NetworkCluster,
  fault: (method: string, args: readonly unknown[]) => void,
): NetworkCluster {
  return new Proxy(cluster, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        fault(String(prop), args);
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
}

/** A connection the API server refused: what a K3s server restart looks like to a client. */
function refused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 10.43.0.1:443'), { code: 'ECONNREFUSED' });
}

/** Every file under a folder, by path relative to it. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix)).flatMap((name) => {
    const path = prefix ? `${prefix}/${name}` : name;
    return statSync(join(dir, path)).isDirectory() ? filesUnder(dir, path) : [path];
  });
}

/**
 * Runs the host's lab-terminate-when-done.sh (runner.terminateWhenDone) on a status.json, with
 * `shutdown` and the results sync replaced by recorders: whether it would have ended the host.
 */
function terminateWhenDoneWouldEnd(statusFile: string): boolean {
  const dir = tempDir('terminate-when-done-');
  const shutdownMark = join(dir, 'shutdown-called');
  for (const [name, body] of [
    ['shutdown', `#!/bin/sh\necho "$@" > ${shutdownMark}\n`],
    ['sync', '#!/bin/sh\nexit 0\n'],
  ]) {
    writeFileSync(join(dir, name), body);
    chmodSync(join(dir, name), 0o755);
  }
  linkPython3(dir);
  const settings = join(dir, 'settings.env');
  writeFileSync(
    settings,
    `STATUS_FILE=${statusFile}\nLOG_FILE=${join(dir, 'log')}\nSYNC_SCRIPT=${join(dir, 'sync')}\n`,
  );
  const run = spawnSync('bash', ['lib/aws/bootstrap/sh/host/lab-terminate-when-done.sh'], {
    env: { ...process.env, LAB_SETTINGS: settings, PATH: `${dir}:${process.env.PATH}` },
    encoding: 'utf8',
  });
  expect(run.status, run.stderr).toBe(0);
  return existsSync(shutdownMark);
}

describe('network runner: an API outage is ridden out up to runner.retry.outageMinutes', () => {
  it('finishes every run valid through a 5-minute outage of the cell’s API server', async () => {
    const t = cellLab('dp-iptables');
    const from = t.fake.clock.ms + 40_000;
    const until = from + 5 * 60_000;
    const study = await runNetworkStudy(
      {
        ...t.deps,
        cluster: faulty(t.fake, () => {
          if (t.fake.clock.ms >= from && t.fake.clock.ms < until) throw refused();
        }),
      },
      config,
      planOf('dp-iptables', ['c-r1', 'c-r2', 'c-r3']),
      POLLS,
    );
    expect(t.fake.clock.ms).toBeGreaterThan(until);
    expect(study.state).toBe('finished');
    expect(study.runs.map((r) => [r.id, r.valid, r.invalidReasons])).toEqual([
      ['c-r1', true, []],
      ['c-r2', true, []],
      ['c-r3', true, []],
    ]);
    // The status line of the outage: how long it has failed, how long the runner waits.
    expect(
      t.lines.some((l) => /^retry \d+ of .* \(failing for \d+m\d+s, waiting up to 15m00s\)/.test(l)),
      t.lines.join('\n'),
    ).toBe(true);
  });

  it('stops an outage past the limit as interrupted (study.json and status.json), which terminateWhenDone leaves alone, and resumes', async () => {
    const t = cellLab('dp-iptables');
    const plan = planOf('dp-iptables', ['c-r1', 'c-r2', 'c-r3']);
    const from = t.fake.clock.ms + 40_000;
    let down = true;
    await expect(
      runNetworkStudy(
        {
          ...t.deps,
          cluster: faulty(t.fake, () => {
            if (down && t.fake.clock.ms >= from) throw refused();
          }),
        },
        config,
        plan,
        { ...POLLS, retry: { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000, outageMs: 3 * 60_000 } },
      ),
    ).rejects.toThrow(/the Kubernetes API did not answer .* for 3m\d\ds/);
    const statusFile = join(t.root, STATUS_FILE);
    expect(readJson<StudyStatus>(statusFile).state).toBe('interrupted');
    const stopped = readJson<NetworkStudyRecord>(join(studyFolder(t.root), 'study.json'));
    expect(stopped.state).toBe('interrupted');
    expect(stopped.error).toMatch(/the Kubernetes API did not answer/);
    expect(stopped.finishedAt).toBeUndefined();
    // runner.terminateWhenDone ends the host on finished or failed only: this host stays up.
    expect(terminateWhenDoneWouldEnd(statusFile)).toBe(false);

    // Once the API answers, lab run resumes the same study.
    down = false;
    const study = await runNetworkStudy(t.deps, config, plan, POLLS);
    expect(study.studyId).toBe(stopped.studyId);
    expect(study.state).toBe('finished');
    expect(study.runs.every((r) => r.valid)).toBe(true);
    expect(terminateWhenDoneWouldEnd(statusFile)).toBe(true);
  });
});

describe('network runner: a killed runner’s files and Jobs', () => {
  it('a runner killed mid-step leaves its attempt’s files, and the resumed run never overwrites them', async () => {
    const t = cellLab('dp-iptables');
    const plan = planOf('dp-iptables', ['c-r1', 'c-r2', 'c-r3']);
    // The first runner dies right after keeping c-r2's fortio file, before its record.
    await expect(
      runNetworkStudy(
        {
          ...t.deps,
          store: killAfterWrite<NetworkResultStore>((_method, args) =>
            args.some((a) => typeof a === 'string' && a.endsWith('net-c-r2-fortio.json')),
          )(t.store),
        },
        config,
        plan,
        POLLS,
      ),
    ).rejects.toThrow(RunnerKilled);
    const folder = studyFolder(t.root);
    const keptBefore = filesUnder(folder).filter((f) => f.endsWith('net-c-r2-fortio.json'));
    expect(keptBefore).toHaveLength(1);
    const killedFile = readFileSync(join(folder, keptBefore[0]), 'utf8');

    // Later, a second runner resumes the study and runs c-r2 again.
    t.fake.clock.ms += 60_000;
    const study = await runNetworkStudy(t.deps, config, plan, POLLS);
    expect(study.runs.map((r) => r.valid)).toEqual([true, true, true]);
    const kept = filesUnder(folder)
      .filter((f) => f.endsWith('net-c-r2-fortio.json'))
      .sort();
    // Each attempt has its own folder; the killed runner's file is as it wrote it.
    expect(kept).toEqual(['attempts/c-r2/1/net-c-r2-fortio.json', 'attempts/c-r2/2/net-c-r2-fortio.json']);
    expect(readFileSync(join(folder, kept[0]), 'utf8')).toBe(killedFile);
    const record = study.runs.find((r) => r.id === 'c-r2');
    expect(record?.attempt).toBe(2);
    expect(record?.result?.kind === 'fortio' && record.result.raw).toBe(
      readFileSync(join(folder, kept[1]), 'utf8'),
    );
    expect(killedFile).not.toBe(readFileSync(join(folder, kept[1]), 'utf8'));
  });

  it('clears a killed runner’s prober Job and probe Services before the first measurement of the next study', async () => {
    const samples = config.network.experiments.serviceScale.samples;
    expect(samples).toBeGreaterThan(3);
    const plan = planOf('dp-iptables', ['c-r1', 'e9-services-100']);
    const t = cellLab('dp-iptables');
    // The first runner dies during E9, after its third probe Service: its prober Job probes on
    // (it gives up only after every sample's time), the Services stay.
    let probes = 0;
    let killed = false;
    const dying = faulty(t.fake, (method, args) => {
      if (killed) throw new RunnerKilled(method);
      const service = args[0] as { metadata?: { name?: string } } | undefined;
      if (method === 'createService' && service?.metadata?.name?.startsWith('probe-') && ++probes === 4) {
        killed = true;
        throw new RunnerKilled(method);
      }
    });
    await expect(runNetworkStudy({ ...t.deps, cluster: dying }, config, plan, POLLS)).rejects.toThrow(
      RunnerKilled,
    );
    expect(t.fake.activeJobs()).toBe(1);
    expect(await t.fake.listServices('plain', 'network-lab/service-probe=true')).toHaveLength(3);

    // `lab run --new`: the next runner starts a new study right away.
    writeFileSync(join(t.root, 'new-study.request'), '');
    const events: string[] = [];
    const watched = faulty(t.fake, (method, args) => {
      if (method === 'createJob') {
        const name = (args[0] as { metadata: { name: string } }).metadata.name;
        const leftovers = t.fake.activeJobsNamed(/-prober$/).length;
        const probeServices = t.fake.allServices();
        events.push(`create job/${name} (${leftovers} prober jobs, ${probeServices} services)`);
      }
    });
    const study = await runNetworkStudy({ ...t.deps, cluster: watched }, config, plan, POLLS);
    // The first Job of the new study (its first measurement: the host's facts) found none left.
    expect(events[0]).toMatch(/^create job\/net-host-facts \(0 prober jobs, 0 services\)$/);
    expect(
      t.lines.some((l) => /deleting job\/net-e9-services-100-prober, a Job an earlier runner left/.test(l)),
    ).toBe(true);

    // And the calibration measured what it measures on a cell nobody else loads.
    const clean = cellLab('dp-iptables');
    const reference = await runNetworkStudy(clean.deps, config, planOf('dp-iptables', ['c-r1']), POLLS);
    const avg = (s: NetworkStudyRecord) => {
      const result = s.runs[0].result;
      if (result?.kind !== 'fortio') throw new Error('not a fortio result');
      return JSON.parse(result.raw).DurationHistogram.Avg as number;
    };
    expect(study.runs.map((r) => r.valid)).toEqual([true, true]);
    expect(avg(study)).toBe(avg(reference));
  });
});

describe('network runner: a conntrack limit a killed runner left', () => {
  /**
   * A runner killed right after E10's 2,048 step wrote the limit (its set Job's output kept): from
   * then on it neither writes a file nor calls the API, so the host is left at 2,048.
   */
  async function killedMidE10(t: ReturnType<typeof cellLab>, plan: NetworkStudyPlan) {
    let dead = false;
    const store = killAfterWrite<NetworkResultStore>((method, args) => {
      dead ||= method === 'saveAttemptFile' && args.some((a) => String(a).includes('ct-set-e10-limit-2048'));
      return dead;
    })(t.store);
    const cluster = faulty(t.fake, (method) => {
      if (dead) throw new RunnerKilled(method);
    });
    await expect(runNetworkStudy({ ...t.deps, store, cluster }, config, plan, POLLS)).rejects.toThrow(
      RunnerKilled,
    );
    expect(t.fake.conntrackMax).toBe(2_048);
  }

  /** Each Job the runner creates, with the host's nf_conntrack_max at that moment. */
  function watching(t: ReturnType<typeof cellLab>, events: string[]): NetworkCluster {
    return faulty(t.fake, (method, args) => {
      if (method === 'createJob')
        events.push(`${(args[0] as { metadata: { name: string } }).metadata.name} at ${t.fake.conntrackMax}`);
    });
  }

  it('a resumed study restores the recorded host default before its first measurement, and says so', async () => {
    const t = cellLab('dp-iptables');
    const plan = planOf('dp-iptables', ['e10-limit-default', 'e10-limit-2048', 'e10-limit-1024']);
    await killedMidE10(t, plan);
    t.fake.clock.ms += 60_000;
    const events: string[] = [];
    const study = await runNetworkStudy({ ...t.deps, cluster: watching(t, events) }, config, plan, POLLS);
    // The read and the restore come first; the first step then finds the host default.
    expect(events.slice(0, 2)).toEqual(['net-ct-start-read at 2048', 'net-ct-start-restore at 2048']);
    expect(events[2]).toMatch(/ at 262144$/);
    expect(study.conntrackHostDefault).toBe(262_144);
    expect(study.conntrackRestoredAtStart).toMatchObject({ found: 2_048, restoredTo: 262_144 });
    expect(
      t.lines.some((l) =>
        l.includes(
          'E10 was unfinished: nf_conntrack_max was 2048, restored to the host default 262144 before any measurement',
        ),
      ),
    ).toBe(true);

    expect(study.runs.map((r) => r.valid)).toEqual([true, true, true]);
    expect(t.fake.conntrackMax).toBe(262_144);
  });

  it('a new study after a killed E10 restores it too, and never records the lowered limit as the default', async () => {
    const t = cellLab('dp-iptables');
    const e10 = planOf('dp-iptables', ['e10-limit-default', 'e10-limit-2048', 'e10-limit-1024']);
    await killedMidE10(t, e10);
    writeFileSync(join(t.root, 'new-study.request'), '');
    t.fake.clock.ms += 60_000;
    const events: string[] = [];
    const study = await runNetworkStudy({ ...t.deps, cluster: watching(t, events) }, config, e10, POLLS);
    expect(events.slice(0, 2)).toEqual(['net-ct-start-read at 2048', 'net-ct-start-restore at 2048']);
    expect(study.conntrackHostDefault).toBe(262_144);
    expect(study.conntrackRestoredAtStart).toMatchObject({ found: 2_048, restoredTo: 262_144 });
  });

  it('a smoke study after a killed E10 restores it before its first measurement (its own folder, the shelf read)', async () => {
    const t = cellLab('dp-iptables');
    await killedMidE10(t, planOf('dp-iptables', ['e10-limit-default', 'e10-limit-2048', 'e10-limit-1024']));
    t.fake.clock.ms += 60_000;
    const events: string[] = [];
    const outcome = await runNetworkSmokeStudy(
      { ...t.deps, cluster: watching(t, events) },
      config,
      networkSmokePlan(config, 'dp-iptables'),
      POLLS,
    );
    expect(events.slice(0, 2)).toEqual(['net-ct-start-read at 2048', 'net-ct-start-restore at 2048']);
    expect(outcome.checklist?.passed, JSON.stringify(outcome.error ?? '')).toBe(true);
    expect(t.fake.conntrackMax).toBe(262_144);
  });

  it('a study whose E10 ended restored, or that never began E10, reads nothing at start', async () => {
    const t = cellLab('dp-iptables');
    // Killed after E10's last step was recorded, restored: nothing is left to put back.
    const plan = planOf('dp-iptables', ['c-r1', 'e10-limit-default']);
    await expect(
      runNetworkStudy(
        {
          ...t.deps,
          store: killAfterWrite<NetworkResultStore>(
            (method, args) => method === 'writeRun' && (args[0] as { id: string }).id === 'e10-limit-default',
          )(t.store),
        },
        config,
        plan,
        POLLS,
      ),
    ).rejects.toThrow(RunnerKilled);
    const events: string[] = [];
    const study = await runNetworkStudy({ ...t.deps, cluster: watching(t, events) }, config, plan, POLLS);
    expect(events.some((e) => e.startsWith('net-ct-start'))).toBe(false);
    expect(study.conntrackRestoredAtStart).toBeUndefined();
    expect(study.conntrackHostDefault).toBe(262_144);
    // A study killed before E10 began: no host default recorded, nothing read.
    const early = cellLab('dp-iptables');
    const c = planOf('dp-iptables', ['c-r1', 'c-r2']);
    await expect(
      runNetworkStudy(
        {
          ...early.deps,
          store: killAfterWrite<NetworkResultStore>(
            (method, args) => method === 'writeRun' && (args[0] as { id: string }).id === 'c-r1',
          )(early.store),
        },
        config,
        c,
        POLLS,
      ),
    ).rejects.toThrow(RunnerKilled);
    const none: string[] = [];
    await runNetworkStudy({ ...early.deps, cluster: watching(early, none) }, config, c, POLLS);
    expect(none.some((e) => e.startsWith('net-ct-start'))).toBe(false);
  });
});

describe('network runner: a retried call acts once, and nothing is assumed', () => {
  it('does not count a 409 on the first create as its Job created, but does on a retried try', async () => {
    const fake = new FakeCell(config, 'dp-iptables', tempDir('network-409-'));
    const job = hostCommandJob(fake.context, 'net-host-facts', 'study', 'uname -r');
    // Somebody else's Job of that name exists: the first try's 409 is an answer.
    await fake.createJob(job);
    const ctx = {
      policy: { attempts: 3, initialDelayMs: 10, maxDelayMs: 10 },
      clock: fake.clock,
      log: () => {},
    };
    await expect(retryingNetworkCluster(fake, ctx).createJob(job)).rejects.toThrow(/409/);
    // A lost answer: the server created the Job, the client saw a 503, the retry meets it (409).
    await fake.deleteJob('plain', 'net-host-facts');
    fake.clock.ms += 10_000;
    let tries = 0;
    const lossy: NetworkCluster = Object.assign(Object.create(fake), {
      createJob: async (j: typeof job) => {
        tries++;
        await fake.createJob(j);
        if (tries === 1) throw new KubeApiError('POST', '/apis/batch/v1/namespaces/plain/jobs', 503, 'lost');
      },
    });
    await expect(retryingNetworkCluster(lossy, ctx).createJob(job)).resolves.toBeUndefined();
    expect(tries).toBe(2);
  });
});
