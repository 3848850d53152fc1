import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { labManifests, RESULTS_CHART } from '../../charts/lab-app.ts';
import { studyRunnerObjects } from '../../charts/study-runner.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { resultsHandler } from '../../lib/runner/results-server.ts';
import { STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { type FakeApiOptions, FakeApiServer } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { tempDir } from '../temp.ts';
import { runOnCluster } from './capture.ts';

/**
 * What goes wrong on a cluster you bring, each one clear line on stderr and exit 1: RBAC that
 * refuses pods/proxy or the runner's Job, a runner Job that is not there, a results claim that
 * never binds.
 */

const config = parseLabConfig({ runner: { results: { volume: 'claim' } } });
let server: FakeApiServer | undefined;

beforeEach(() => vi.stubEnv('LAB_CONFIG', undefined));
afterEach(async () => {
  await server?.stop();
  server = undefined;
  vi.unstubAllEnvs();
});

/** A cluster where lab install has put the results claim and its server (chart 05-results). */
async function cluster({ workloads, ...rest }: Partial<FakeApiOptions> = {}) {
  const clock = new FakeClock();
  const results = tempDir('lab-claim-');
  server = new FakeApiServer({
    clock,
    nodes: [
      {
        name: 'gpu-0',
        labels: { 'llm-gateway-lab/node-role': 'gpu', 'node-role.kubernetes.io/control-plane': 'true' },
        gpus: 4,
        pluginRunning: true,
      },
    ],
    storageClasses: [{ name: 'gp3', default: true }],
    workloads: {
      jobState: () => 'active',
      proxy: (pod, _path, req, res) => {
        if (pod.metadata.labels['app.kubernetes.io/component'] !== 'results-server') return false;
        resultsHandler(results)(req, res);
        return true;
      },
      ...workloads,
    },
    ...rest,
  });
  server.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'vllm' } });
  const chart = labManifests(config).find((c) => c.chart === RESULTS_CHART);
  for (const object of chart?.objects ?? []) {
    // As applied: the namespace of the chart, and the default class the admission gives the claim.
    const spec =
      object.kind === 'PersistentVolumeClaim'
        ? { spec: { ...(object.spec as object), storageClassName: 'gp3' } }
        : {};
    server.put({ ...object, ...spec, metadata: { ...(object.metadata as object), namespace: 'vllm' } });
  }
  clock.ms += 60_000;
  const kubeconfig = await server.kubeconfig(tempDir('lab-byo-'));
  const configFile = join(tempDir('lab-byo-config-'), 'lab.yaml');
  writeFileSync(configFile, 'runner:\n  results:\n    volume: claim\n');
  const lab = (...argv: string[]) => {
    const program = new Command('lab').option('-c, --config <file>').exitOverride();
    registerStudyCommands(program, { now: () => clock.now(), sleep: (ms) => clock.sleep(ms) });
    return runOnCluster(program, configFile, kubeconfig, argv);
  };
  return { lab, results, server, kubeconfig };
}

/** One line on stderr, nothing after it. */
function oneLine(stderr: string): string {
  expect(stderr.split('\n').filter(Boolean)).toHaveLength(1);
  return stderr.trim();
}

describe('a cluster you bring: clear stops', () => {
  it('RBAC without get pods/proxy: lab status names the subresource', async () => {
    const { lab } = await cluster({ denied: ['get pods/proxy'] });
    const run = await lab('status');
    expect(run.value).toBe(1);
    expect(oneLine(run.stderr)).toMatch(
      /^lab status: GET pods\/lab-results-7d9c4-0\/proxy\/file-.* is forbidden on context fake .*cannot get resource "pods\/proxy" in API group "" in the namespace "vllm"$/,
    );
  });

  it("RBAC without the runner's Job: lab run applies nothing and names what is refused", async () => {
    const { lab, server } = await cluster({ denied: ['patch jobs.batch'] });
    const run = await lab('run');
    expect(run.value).toBe(1);
    expect(oneLine(run.stderr)).toBe(
      'lab run: the kubeconfig user may not start the runner (nothing was changed): patch jobs.batch in vllm; use a context that may, or ask an administrator for these permissions',
    );
    expect(server.applies).toEqual([]);
  });

  it('RBAC without delete on Jobs: lab run keeps the finished runner Job and applies nothing', async () => {
    const { lab, server } = await cluster({
      denied: ['delete jobs.batch'],
      workloads: { jobState: () => 'succeeded' },
    });
    // The runner Job of an earlier lab run, ended.
    const job = studyRunnerObjects(config).find(
      (o) => o.kind === 'Job' && (o.metadata as { name?: string }).name === STUDY_RUNNER_NAME,
    );
    expect(job).toBeDefined();
    server.put({
      ...job,
      metadata: { ...(job?.metadata as object), namespace: 'vllm' },
    });
    const run = await lab('run');
    expect(run.value).toBe(1);
    expect(oneLine(run.stderr)).toBe(
      'lab run: the kubeconfig user may not start the runner (nothing was changed): delete jobs.batch in vllm; use a context that may, or ask an administrator for these permissions',
    );
    expect(server.applies).toEqual([]);
    expect(server.live('Job').map((j) => (j.metadata as { name: string }).name)).toContain(
      'lab-study-runner',
    );
  });

  it('no runner Job: lab logs runner says there is no pod, lab status calls a running status stale', async () => {
    const { lab, results } = await cluster();
    const logs = await lab('logs', 'runner');
    expect(logs.value).toBe(1);
    expect(oneLine(logs.stderr)).toBe(
      "lab logs: the study runner's log: no pod for job/lab-study-runner in namespace vllm (not started yet, or deleted)",
    );
    writeFileSync(
      join(results, 'status.json'),
      JSON.stringify({
        state: 'running',
        totalRuns: 27,
        recordedRuns: 3,
        validRuns: 3,
        invalidRuns: 0,
        startedAt: '2025-10-14T08:00:00.000Z',
        updatedAt: '2025-10-14T08:30:00.000Z',
        message: 'run 4',
      }),
    );
    const status = await lab('status');
    expect(status.value).toBe(0);
    expect(status.stdout).toMatch(/runner job: absent/);
    expect(status.stdout).toMatch(/note: the runner Job is absent, so this status is stale/);
  });

  it('the hints repeat the --kubeconfig and --context the user passed', async () => {
    const { lab, kubeconfig } = await cluster();
    // No status.json in the claim yet: lab status says how to start the study.
    const bare = await lab('status');
    expect(bare.value).toBe(1);
    expect(oneLine(bare.stderr)).toContain(`Start it with lab run --kubeconfig ${kubeconfig};`);
    const both = await lab('status', '--context', 'fake');
    expect(both.value).toBe(1);
    expect(oneLine(both.stderr)).toContain(
      `Start it with lab run --kubeconfig ${kubeconfig} --context fake;`,
    );
  });

  it('a claim that never binds: lab run and lab status name the StorageClass and the fix', async () => {
    const { lab, server } = await cluster({
      storageClasses: [{ name: 'gp3', default: true, provisions: false }],
    });
    for (const command of ['run', 'status']) {
      const run = await lab(command);
      expect(run.value).toBe(1);
      expect(oneLine(run.stderr)).toMatch(
        new RegExp(
          `^lab ${command}: the results claim vllm/lab-results is Pending \\(StorageClass gp3\\): no volume was provisioned.*set runner\\.results\\.storageClassName and run lab install again$`,
        ),
      );
    }
    expect(server.applies).toEqual([]);
  });
});
