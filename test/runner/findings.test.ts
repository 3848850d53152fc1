import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BENCHMARK_LABEL } from '../../charts/benchmark-job.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { KubeApiError } from '../../lib/runner/kube-cluster.ts';
import type { Cluster, JobObject } from '../../lib/runner/ports.ts';
import { retryingCluster } from '../../lib/runner/retry.ts';
import { runnerOptionsOf } from '../../lib/runner/runner-options.ts';
import type { StudyStatus } from '../../lib/runner/status.ts';
import type { RunRecord, StudyRecord } from '../../lib/study/results.ts';
import { SharedFakeClock } from './network/fake-shared-clock.ts';
import { killAfterWrite, type Lab, RunnerKilled, runIn, startLab, stopLabs } from './rehearsal-kit.ts';

/**
 * Issue 25: each finding of the review that drove the runner with injected faults, as a
 * rehearsal that failed before the fix.
 */

afterEach(stopLabs);

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** The folder of the study the lab's last runner worked on. */
function studyDir(lab: Lab): string {
  const { studyId } = readJson<StudyStatus>(join(lab.dir, 'status.json'));
  return join(lab.dir, 'studies', studyId as string);
}

/** Every call of the cluster passes through `fault` first (which may throw), by method name. */
function faulty(fault: (method: string, args: readonly unknown[]) => void): (cluster: Cluster) => Cluster {
  return (cluster) =>
    new Proxy(cluster, {
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

const completedOf = (path: string) => readJson<{ completed: number }>(path).completed;

describe('finding 1: attempt files are write-once, named by study, run and attempt', () => {
  it('keeps the recorded attempt’s client file when a resumed attempt’s runner dies after copying its own', async () => {
    const lab = await startLab({
      runs: ['bound-p128', 'bound-p64', 'bound-p16', 'bound-p8'],
      cluster: { behaviour: { 'bound-p64': { completed: 1000 } }, throwAtRun: 'bound-p8' },
    });
    await expect(runIn(lab)).rejects.toThrow(/interrupted/);
    const study = studyDir(lab);
    const first = readJson<RunRecord>(join(study, 'runs', 'bound-p64.json'));
    expect(first.valid).toBe(false);

    // The second runner: the resumed bound-p64 completes every prompt, and the runner dies right
    // after keeping its client file, before any record of that attempt.
    const lab2 = { ...lab, cluster: lab.cluster };
    (lab.cluster as unknown as { o: { behaviour: object; throwAtRun?: string } }).o.behaviour = {};
    (lab.cluster as unknown as { o: { throwAtRun?: string } }).o.throwAtRun = undefined;
    await expect(
      runIn(lab2, {
        store: killAfterWrite(
          (method, args) =>
            (method === 'saveAttemptFile' || method === 'saveClientResult') &&
            args.some((a) => typeof a === 'string' && a.includes('bound-p64.json')),
        ),
      }),
    ).rejects.toThrow(RunnerKilled);

    // The third runner finishes the study.
    const done = await runIn(lab);
    const run = done.runs.find((r) => r.id === 'bound-p64') as RunRecord;
    expect(run.valid).toBe(true);
    // Every recorded attempt's kept file is the one that attempt measured.
    for (const attempt of [...(run.attempts ?? []), run]) {
      const kept = join(
        study,
        'attempts',
        'bound-p64',
        String(attempt.attempt),
        'bound-p64',
        'bound-p64.json',
      );
      expect(completedOf(kept), `attempt ${attempt.attempt}`).toBe(attempt.clients[0].result?.completed);
    }
    expect(run.attempts?.[0].clients[0].result?.completed).toBe(1000);
    // The killed runner's attempt keeps its own folder, and nothing overwrote attempt 1's.
    const folders = readdirSync(join(study, 'attempts', 'bound-p64')).sort();
    expect(folders).toEqual(['1', '2', '3']);
    expect(completedOf(join(study, 'attempts', 'bound-p64', '2', 'bound-p64', 'bound-p64.json'))).toBe(1024);
  });
});

describe('finding 2: lab run --redo-invalid runs the invalid runs of the latest study again', () => {
  it('resumes the finished study, runs only its invalid run, and keeps the invalid attempt', async () => {
    const lab = await startLab({
      runs: ['bound-p128', 'partition', 'arm-kube-proxy-prefix'],
      cluster: { behaviour: { 'arm-kube-proxy-prefix': { noResultFile: true } } },
    });
    const first = await runIn(lab);
    expect(first.runs.map((r) => r.valid)).toEqual([true, true, false]);
    expect(first.metadata.finishedAt).toBeDefined();
    const invalid = first.runs[2];

    (lab.cluster as unknown as { o: { behaviour: object } }).o.behaviour = {};
    const created = lab.cluster.created.length;
    writeFileSync(join(lab.dir, 'redo-invalid.request'), '');
    const second = await runIn(lab);
    expect(second.metadata.studyId).toBe(first.metadata.studyId);
    expect(second.runs.map((r) => r.valid)).toEqual([true, true, true]);
    expect(lab.cluster.created.slice(created).map((j) => j.metadata.name)).toEqual([
      'bench-arm-kube-proxy-prefix',
    ]);
    expect(second.runs.slice(0, 2)).toEqual(first.runs.slice(0, 2));
    expect(second.runs[2].attempts).toEqual([
      { ...invalid, retriedBecause: 'the study was resumed and this run had no valid record' },
    ]);
    expect(existsSync(join(lab.dir, 'redo-invalid.request'))).toBe(false);
    expect(lab.lines.some((l) => l.includes('lab run --redo-invalid'))).toBe(true);
  });

  it('retries a one-off Job failure inside the run instead of recording it invalid', async () => {
    const lab = await startLab({ runs: ['bound-p128', 'partition'] });
    let failed = false;
    // The first Job of the partition run fails once (an evicted client pod).
    const cluster = lab.cluster;
    const getJob = cluster.getJob.bind(cluster);
    cluster.getJob = async (name: string) => {
      const counts = await getJob(name);
      if (name === 'bench-partition-r0' && counts?.succeeded && !failed) {
        failed = true;
        return { failed: 1 };
      }
      return counts;
    };
    const study = await runIn(lab);
    const run = study.runs[1];
    expect(run.valid).toBe(true);
    expect(run.attempts?.map((a) => a.retriedBecause)).toEqual(['a client Job failed']);
  });
});

describe('finding 3: an API outage is ridden out up to runner.retry.outageMinutes', () => {
  it('finishes every run valid through a 5-minute outage of the API server', async () => {
    const lab = await startLab({ runs: ['bound-p128', 'partition', 'arm-kube-proxy-prefix'] });
    const from = lab.clock.ms + 4 * 60_000;
    const until = from + 5 * 60_000;
    const study = await runIn(lab, {
      cluster: faulty(() => {
        if (lab.clock.ms >= from && lab.clock.ms < until) throw refused();
      }),
    });
    expect(lab.clock.ms).toBeGreaterThan(until);
    expect(study.runs.map((r) => r.valid)).toEqual([true, true, true]);
    expect(study.runs.every((r) => (r.attempts ?? []).length === 0)).toBe(true);
    expect(
      lab.lines.some((l) => /^retry \d+ of .* \(failing for \d+m\d+s, waiting up to 15m00s\)/.test(l)),
    ).toBe(true);
  });

  it('takes the outage limit from runner.retry.outageMinutes in the runner pod', () => {
    const options = runnerOptionsOf(parseLabConfig({ runner: { retry: { outageMinutes: 30 } } }));
    expect(options.retry).toEqual({
      attempts: 5,
      initialDelayMs: 1_000,
      maxDelayMs: 30_000,
      outageMs: 30 * 60_000,
    });
    expect(runnerOptionsOf(parseLabConfig({})).retry?.outageMs).toBe(15 * 60_000);
  });

  it('stops an outage longer than the limit as interrupted, recorded in study.json, not failed', async () => {
    const lab = await startLab({ runs: ['bound-p128', 'partition'] });
    const from = lab.clock.ms + 4 * 60_000;
    await expect(
      runIn(lab, {
        cluster: faulty(() => {
          if (lab.clock.ms >= from) throw refused();
        }),
        options: { retry: { attempts: 5, initialDelayMs: 1_000, maxDelayMs: 30_000, outageMs: 3 * 60_000 } },
      }),
    ).rejects.toThrow(/the Kubernetes API did not answer .* for 3m\d\ds/);
    const status = readJson<StudyStatus>(join(lab.dir, 'status.json'));
    // runner.terminateWhenDone ends the host on finished or failed only.
    expect(status.state).toBe('interrupted');
    const study = readJson<StudyRecord>(join(studyDir(lab), 'study.json'));
    expect(study.metadata.stopped?.reason).toMatch(/the Kubernetes API did not answer/);
    expect(study.metadata.stopped?.change).toMatch(/lab run resumes the study/);
    expect(study.metadata.finishedAt).toBeUndefined();
  });
});

describe('finding 4: at start, every benchmark Job and gate of the namespace goes first', () => {
  it('deletes a killed runner’s client before the preflight, so its load cannot pass a broken front end', async () => {
    const config = parseLabConfig({ runner: { stageNextRun: false } });
    const runs = ['arm-kube-proxy-prefix', 'arm-router-round-robin-prefix'];
    const lab = await startLab({ config, runs, cluster: { leaveJobAtRun: 'arm-router-round-robin-prefix' } });
    await expect(runIn(lab)).rejects.toThrow(/runner killed after creating job/);
    // The router now answers 200 but reaches no replica; the leftover client keeps loading them.
    lab.frontEnds.blackHoles.add('router-round-robin');
    const events: string[] = [];
    lab.frontEnds.onRequest = (arm) => events.push(`preflight ${arm}`);
    const cluster = lab.cluster;
    const deleteJob = cluster.deleteJob.bind(cluster);
    cluster.deleteJob = async (name) => {
      events.push(`delete job/${name}`);
      await deleteJob(name);
    };
    writeFileSync(join(lab.dir, 'new-study.request'), '');
    lab.clock.ms += 30_000;
    const study = await runIn(lab);
    const firstPreflight = events.findIndex((e) => e.startsWith('preflight '));
    expect(
      events.indexOf('delete job/bench-arm-router-round-robin-prefix'),
      events.join('\n'),
    ).toBeGreaterThan(-1);
    expect(events.indexOf('delete job/bench-arm-router-round-robin-prefix')).toBeLessThan(firstPreflight);
    const router = study.runs.find((r) => r.id === 'arm-router-round-robin-prefix') as RunRecord;
    expect(router.valid).toBe(false);
    expect(router.invalidReasons.join('\n')).toMatch(/preflight failed: .* no replica of qwen3 counted/);
  });
});

describe('finding 5: every attempt is written when it ends', () => {
  it('keeps attempt 1 of a retried run when the runner dies during attempt 2', async () => {
    const lab = await startLab({
      runs: ['bound-p128', 'partition'],
      cluster: { outageAtRun: { run: 'partition', replica: 1, afterSeconds: 30, seconds: 60 } },
    });
    let resets = 0;
    lab.replicas[0].onReset = () => {
      resets++;
    };
    await expect(
      runIn(lab, {
        cluster: faulty((method, args) => {
          // Attempt 2 of the partition run: killed when it creates its Jobs.
          const job = args[0] as JobObject | undefined;
          if (
            method === 'createJob' &&
            job?.metadata.labels[BENCHMARK_LABEL] === 'partition-r0' &&
            resets >= 3
          )
            throw new RunnerKilled('createJob');
        }),
      }),
    ).rejects.toThrow(RunnerKilled);
    const kept = readJson<RunRecord>(join(studyDir(lab), 'runs', 'partition.json'));
    expect(kept.valid).toBe(false);
    expect(kept.attempt).toBe(1);
    expect(kept.invalidReasons.join('\n')).toMatch(/restarted/);

    const study = await runIn(lab);
    const run = study.runs[1];
    expect(run.valid).toBe(true);
    // Attempt 1 is on record, with what made it invalid; the killed attempt 2 left only its folder.
    expect(run.attempts?.map((a) => a.attempt)).toEqual([1]);
    expect(run.attempts?.[0].invalidReasons.join('\n')).toMatch(/restarted/);
    expect(run.attempt).toBe(3);
  });
});

describe('finding 6: causes that may pass are retried, and nothing is assumed', () => {
  it('does not read a failed pod list after a run as every replica restarted', async () => {
    const lab = await startLab({ runs: ['bound-p128', 'partition'] });
    let lists = 0;
    const study = await runIn(lab, {
      cluster: faulty((method, args) => {
        if (method === 'listPods' && String(args[0]).startsWith('app=') && ++lists === 4)
          throw new KubeApiError(
            'GET',
            '/api/v1/namespaces/vllm/pods',
            403,
            '{"kind":"Status","message":"forbidden"}',
          );
      }),
    });
    expect(study.runs.map((r) => r.valid)).toEqual([true, true]);
    expect(study.runs.map((r) => r.attempts ?? [])).toEqual([[], []]);
  });

  it('retries a run whose counters went backwards (a container restart keeps the pod uid)', async () => {
    const lab = await startLab({
      runs: ['bound-p128', 'partition'],
      cluster: {
        outageAtRun: { run: 'partition', replica: 0, afterSeconds: 30, seconds: 20, keepsUid: true },
      },
    });
    const study = await runIn(lab);
    const run = study.runs[1];
    expect(run.valid).toBe(true);
    expect(run.attempts?.[0].invalidReasons.join('\n')).toMatch(/went backwards/);
  });

  it('does not start the load when a replica’s /metrics could not be read before the run, and tries again', async () => {
    const lab = await startLab({ runs: ['bound-p128', 'partition'] });
    let armed = true;
    const replica = lab.replicas[1];
    replica.onReset = () => {
      if (lab.cluster.created.length === 1 && armed) {
        armed = false;
        // From its reset on, the replica is unreachable for 2 minutes: the scrape before the run fails.
        replica.outage = { from: lab.clock.ms, until: lab.clock.ms + 120_000, restarted: true };
      }
    };
    const study = await runIn(lab);
    const run = study.runs[1];
    expect(run.valid).toBe(true);
    expect(run.attempts?.[0].invalidReasons[0]).toMatch(
      /^not started: \/metrics could not be read before the run/,
    );
    // Attempt 1 started no Job: only one partition Job pair was created.
    expect(lab.cluster.created.map((j) => j.metadata.name)).toEqual([
      'bench-bound-p128',
      'bench-partition-r0',
      'bench-partition-r1',
    ]);
  });

  it('does not count a 409 on the first create as the Job created', async () => {
    const clock = new SharedFakeClock();
    const cluster = {
      createJob: async () => {
        throw new KubeApiError('POST', '/apis/batch/v1/namespaces/vllm/jobs', 409, '{"kind":"Status"}');
      },
      getJob: async () => ({ active: 1 }),
    } as unknown as Cluster;
    const retrying = retryingCluster(cluster, {
      policy: { attempts: 3, initialDelayMs: 1_000, maxDelayMs: 1_000 },
      clock,
      log: () => undefined,
    });
    await expect(
      retrying.createJob({ metadata: { name: 'bench-x' } } as unknown as JobObject),
    ).rejects.toThrow(/HTTP 409/);
  });

  it('a retried pod delete carries the uid, so it never deletes the replacement', async () => {
    const lab = await startLab({ runs: ['partition'] });
    for (const r of lab.replicas) r.devMode = false;
    let lost = 0;
    const study = await runIn(lab, {
      // Every pod delete's answer is lost once: the runner tries it again.
      cluster: (cluster) => {
        const deletePod = cluster.deletePod.bind(cluster);
        return new Proxy(cluster, {
          get(target, prop, receiver) {
            if (prop !== 'deletePod') return Reflect.get(target, prop, receiver);
            return async (name: string, uid?: string) => {
              await deletePod(name, uid);
              if (lost++ % 2 === 0) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
            };
          },
        });
      },
    });
    expect(study.runs[0].valid).toBe(true);
    // One delete per replica reached the replica; the retries met the replacement's new uid.
    expect(lab.cluster.deletedPods).toEqual(['qwen3-0', 'qwen3-1']);
  });

  it('a retried rollout restart rolls the front end once', async () => {
    const lab = await startLab({ runs: ['arm-router-cache-aware-prefix'] });
    let lostOnce = false;
    const study = await runIn(lab, {
      cluster: (cluster) => {
        const restart = cluster.restartDeployment.bind(cluster);
        return new Proxy(cluster, {
          get(target, prop, receiver) {
            if (prop !== 'restartDeployment') return Reflect.get(target, prop, receiver);
            return async (name: string, at: Date) => {
              await restart(name, at);
              if (!lostOnce) {
                lostOnce = true;
                throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
              }
            };
          },
        });
      },
    });
    expect(study.runs[0].valid).toBe(true);
    expect(lab.cluster.restarted).toEqual(['vllm-router-cache-aware']);
  });
});
