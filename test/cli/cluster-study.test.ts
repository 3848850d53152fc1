import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { registerClusterCommands } from '../../lib/cli/cluster-commands.ts';
import { runLab } from '../../lib/cli/program.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { runLabStudy } from '../../lib/runner/lab-study.ts';
import { resultsHandler } from '../../lib/runner/results-server.ts';
import { leaveRunRequest, RUN_REQUEST_ENV } from '../../lib/runner/run-request.ts';
import type { BenchmarkSpec } from '../../lib/study/plan.ts';
import { smokePlan } from '../../lib/study/smoke.ts';
import { STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { crd } from '../install/rig.ts';
import { type FakeApiOptions, FakeApiServer } from '../kube/fake-api-server.ts';
import type { FakeJobState } from '../kube/fake-pods.ts';
import { calibratedHitRate, type Lab, runnerIn, startLab, stopLabs } from '../runner/rehearsal-kit.ts';
import { tempDir } from '../temp.ts';
import { captureOutput, runOnCluster } from './capture.ts';

/**
 * The "done when": on a cluster the user brings, `lab install`, `lab run`, `lab status`
 * and `lab results` through the Kubernetes API (the fake API server, spoken to by the real
 * client-node), the real study runner started by the runner Job and writing into a folder that
 * plays the results claim, and `lab report` on the copy; the copy's layout is a host-run's.
 */

const CONFIG = { runner: { results: { volume: 'claim' } } };
/** Two runs of the full study (after its smoke checks) stand for its hours. */
const RUNS = ['partition', 'arm-epp-completions-prefix'];
/** Every prerequisite's download: the InferencePool CRD, as GAIE's release asset carries it. */
const GAIE_CRD = crd('InferencePool', 'inferencepools', 'v1');

/** A cluster with one GPU node, a default StorageClass, and the lab's runner behind its Job. */
class ByoCluster {
  readonly server: FakeApiServer;
  state: FakeJobState = 'active';
  runner?: Promise<unknown>;
  kubeconfig = '';
  readonly configFile: string;

  constructor(
    readonly lab: Lab,
    options: Partial<FakeApiOptions> = {},
  ) {
    const smoke = smokePlan(lab.config);
    this.configFile = join(tempDir('lab-byo-config-'), 'lab.yaml');
    writeFileSync(this.configFile, 'runner:\n  results:\n    volume: claim\n');
    this.server = new FakeApiServer({
      clock: lab.clock,
      nodes: [
        {
          name: 'gpu-0',
          labels: { 'llm-gateway-lab/node-role': 'gpu', 'node-role.kubernetes.io/control-plane': 'true' },
          gpus: 4,
          pluginRunning: true,
        },
      ],
      runtimeClasses: ['nvidia'],
      storageClasses: [{ name: 'gp3', default: true, waitForFirstConsumer: true }],
      workloads: {
        jobCreated: (job) => {
          if ((job.metadata as { name: string }).name !== STUDY_RUNNER_NAME) return;
          const container = (
            job.spec as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }
          ).template.spec.containers[0];
          const request = container.env?.find((e) => e.name === RUN_REQUEST_ENV)?.value;
          this.state = 'active';
          // The runner's entry (lib/runner/main.ts) on the fake clock and loopback replicas.
          this.runner = (async () => {
            await leaveRunRequest(lab.dir, request, lab.clock.now());
            const { deps, options } = runnerIn(lab);
            return runLabStudy(deps, lab.config, { full: lab.plan, smoke }, options);
          })().then(
            (done) => {
              this.state = 'succeeded';
              return done;
            },
            (error) => {
              this.state = 'failed';
              throw error;
            },
          );
        },
        jobState: (name) => (name === STUDY_RUNNER_NAME ? this.state : 'succeeded'),
        proxy: (pod, _path, req, res) => {
          if (pod.metadata.labels['app.kubernetes.io/component'] !== 'results-server') return false;
          resultsHandler(lab.dir)(req, res);
          return true;
        },
        log: (pod) =>
          pod.metadata.name.startsWith(STUDY_RUNNER_NAME) ? `${lab.lines.join('\n')}\n` : undefined,
      },
      ...options,
    });
  }

  async start(): Promise<this> {
    this.kubeconfig = await this.server.kubeconfig(tempDir('lab-byo-'));
    return this;
  }

  /** One `lab` command line with the fake clock, as a user would type it. */
  cmd(...argv: string[]) {
    const program = new Command('lab').option('-c, --config <file>').exitOverride();
    const clock = this.lab.clock;
    registerClusterCommands(program, { clock, download: async () => GAIE_CRD });
    registerStudyCommands(program, { now: () => clock.now(), sleep: (ms) => clock.sleep(ms) });
    return runOnCluster(program, this.configFile, this.kubeconfig, argv);
  }
}

/** Every file under `dir`, relative, with the study id made generic. */
function layout(dir: string): string[] {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name);
      if (statSync(full).isDirectory()) walk(full);
      else files.push(relative(dir, full).replace(/\d{8}-\d{6}-[0-9a-f]{8}/g, '<study>'));
    }
  };
  walk(dir);
  return files.sort();
}

/** The smoke study's replicas-directly run has the partition's shape (as in smoke-rehearsal.test.ts). */
function hitRate(spec: BenchmarkSpec): number {
  return spec.id.startsWith('smoke-partition') ? 0.81 : calibratedHitRate(spec);
}

let byo: ByoCluster;
let host: Lab;
const servers: FakeApiServer[] = [];

beforeAll(async () => {
  vi.stubEnv('LAB_CONFIG', undefined);
  const config = parseLabConfig(CONFIG);
  const smoke = smokePlan(config);
  byo = await new ByoCluster(
    await startLab({
      config,
      runs: RUNS,
      alsoServes: smoke.runs,
      cluster: { hitRate, jobSeconds: 40, jobStartSeconds: 20 },
    }),
  ).start();
  servers.push(byo.server);
  // The same study run the lab's own host's way: the runner straight on its results folder.
  host = await startLab({
    config,
    runs: RUNS,
    alsoServes: smoke.runs,
    cluster: { hitRate, jobSeconds: 40, jobStartSeconds: 20 },
  });
  const { deps, options } = runnerIn(host);
  await runLabStudy(deps, host.config, { full: host.plan, smoke }, options);
}, 300_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  await stopLabs();
  vi.unstubAllEnvs();
});

describe('a cluster you bring: from a kubeconfig to a report', () => {
  it('installs, runs, shows the status, copies the results out and reports on them', async () => {
    const before = await byo.cmd('status');
    expect(before.value).toBe(1);
    expect(before.stderr).toMatch(/^lab status: no results server runs in namespace vllm .*\n$/);
    // The hint repeats the options the command was given (--kubeconfig alone here).
    expect(before.stderr).toContain(`run lab install --kubeconfig ${byo.kubeconfig} first\n`);

    const install = await byo.cmd('install');
    expect(install.stderr).toBe('');
    expect(install.value).toBe(0);
    expect(install.stdout).toMatch(
      /pass {2}a PersistentVolumeClaim of 20Gi from the default StorageClass gp3/,
    );

    const notYet = await byo.cmd('status');
    expect(notYet.value).toBe(1);
    expect(notYet.stderr).toMatch(
      /^lab status: the study has not started yet: there is no status\.json in the results claim \(runner job: absent\)/,
    );

    const run = await byo.cmd('run');
    expect(run.value).toBe(0);
    expect(run.stdout).toMatch(/runner job: absent\nstarted the study runner Job vllm\/lab-study-runner/);
    expect(byo.server.applies.filter((a) => a.kind === 'Job').map((a) => a.fieldManager)).toEqual([
      'llm-gateway-lab',
    ]);
    await byo.runner;

    const status = await byo.cmd('status');
    expect(status.stderr).toBe('');
    expect(status.stdout).toMatch(
      /^study on context fake \(namespace vllm\), runner job: succeeded\nstate: {5}finished/,
    );
    expect(status.stdout).toMatch(/runs: {6}2 of 2 recorded: 2 valid, 0 invalid/);

    const out = tempDir('lab-byo-copy-');
    const results = await byo.cmd('results', '--out', out);
    expect(results.value).toBe(0);
    expect(results.stdout).toMatch(/fetched status\.json/);
    expect(results.stdout).toMatch(new RegExp(`make the report: lab report ${out}`));
    // The copy is the claim, and the study folder is a host-run's, file for file.
    expect(layout(out)).toEqual(layout(byo.lab.dir));
    expect(layout(out)).toEqual(layout(host.dir));
    const again = await byo.cmd('results', '--out', out);
    expect(again.stdout).toMatch(/^0 file\(s\) fetched \(0 B\), \d+ unchanged/m);

    // The same report as from the host's folder (two runs of the plan stand for the study).
    const reportOf = async (dir: string) => {
      const report = await captureOutput(() => runLab(['report', dir, '--no-calibrate']));
      expect(report.value).toBe(0);
      expect(report.stderr).toMatch(
        /^lab report: Partial study: 2 of 27 planned runs recorded \(2 valid, 0 invalid\)/,
      );
      const file = join(dir, 'report.md');
      expect(existsSync(file)).toBe(true);
      return readFileSync(file, 'utf8')
        .replace(/\d{8}-\d{6}-[0-9a-f]{8}/g, '<study>')
        .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
        .replaceAll(dir, '<dir>');
    };
    const fromCluster = await reportOf(out);
    expect(fromCluster).toMatch(/partition/);
    expect(fromCluster).toEqual(await reportOf(host.dir));

    const logs = await byo.cmd('logs', 'runner', '--tail', '50');
    expect(logs.value).toBe(0);
    expect(logs.stdout).toMatch(/^--- the study runner's log: pod vllm\/lab-study-runner-x0, last 50 lines/);
  }, 300_000);
});
