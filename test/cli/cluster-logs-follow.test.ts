import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { STUDY_RUNNER_CONTAINER, STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { FakeApiServer } from '../kube/fake-api-server.ts';
import { LiveLog, tailOf } from '../kube/fake-log-follow.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { tempDir } from '../temp.ts';
import { runOnCluster } from './capture.ts';

/**
 * `lab logs --follow` on a cluster you bring: pods/log with follow=true, streamed until the
 * container ends or Ctrl-C, against the fake API server's live log.
 */

let server: FakeApiServer | undefined;

beforeEach(() => vi.stubEnv('LAB_CONFIG', undefined));
afterEach(async () => {
  await server?.stop();
  server = undefined;
  vi.unstubAllEnvs();
});

/** A cluster whose runner Job's pod writes `live`; a Ctrl-C the test presses with `interrupt`. */
async function cluster(live: LiveLog) {
  const clock = new FakeClock();
  server = new FakeApiServer({
    clock,
    nodes: [{ name: 'cpu-0', labels: {}, gpus: 0, pluginRunning: false }],
    workloads: {
      jobState: () => 'active',
      log: () => live.text,
      followLog: (pod) => (pod.metadata.name.startsWith(STUDY_RUNNER_NAME) ? live : undefined),
    },
  });
  server.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'vllm' } });
  // The runner's pod, with the uploader beside it (a native sidecar): the runner's container is named.
  server.put({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: STUDY_RUNNER_NAME, namespace: 'vllm' },
    spec: {
      template: {
        spec: {
          initContainers: [{ name: 'results-upload', restartPolicy: 'Always' }],
          containers: [{ name: STUDY_RUNNER_CONTAINER }],
        },
      },
    },
  });
  const kubeconfig = await server.kubeconfig(tempDir('lab-byo-'));
  const configFile = join(tempDir('lab-byo-config-'), 'lab.yaml');
  writeFileSync(configFile, 'runner:\n  results:\n    volume: claim\n');
  let interrupt: (() => void) | undefined;
  const lab = (...argv: string[]) => {
    const program = new Command('lab').option('-c, --config <file>').exitOverride();
    registerStudyCommands(program, {
      now: () => clock.now(),
      sleep: (ms) => clock.sleep(ms),
      onInterrupt: (stop) => {
        interrupt = stop;
        return () => {
          interrupt = undefined;
        };
      },
    });
    return runOnCluster(program, configFile, kubeconfig, argv);
  };
  return { lab, pressCtrlC: () => interrupt?.(), listening: () => interrupt !== undefined };
}

/** Waits (real time: the stream is real HTTP) until `done` holds; the limit only ends a hang. */
async function until(done: () => boolean): Promise<void> {
  const end = Date.now() + 120_000;
  while (!done() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done()).toBe(true);
}

const HEADER = `--- the study runner's log: pod vllm/${STUDY_RUNNER_NAME}-x0, last 2 lines, then following (Ctrl-C stops)`;

describe('lab logs --follow on a cluster you bring', () => {
  it('prints the last --tail lines, then each new line as the runner writes it, and ends with the container', async () => {
    const live = new LiveLog();
    live.append('starting study s1\nrun 1/4 bound-p128: valid\nrun 2/4 bound-p64: valid\n');
    const { lab } = await cluster(live);
    const following = lab('logs', 'runner', '--follow', '--tail', '2');
    await until(() => live.followers === 1);
    live.append('run 3/4 bound-p16: waiting for job\n');
    live.append('study finished: 4 of 4 runs valid');
    live.end();
    const run = await following;
    expect(run.stderr).toBe('');
    expect(run.value).toBe(0);
    expect(run.stdout).toBe(
      [
        HEADER,
        'run 1/4 bound-p128: valid',
        'run 2/4 bound-p64: valid',
        'run 3/4 bound-p16: waiting for job',
        'study finished: 4 of 4 runs valid',
        `--- the study runner's log: container ${STUDY_RUNNER_CONTAINER} ended`,
        '',
      ].join('\n'),
    );
  });

  it('stops on Ctrl-C, closing the stream, while the container runs on', async () => {
    const live = new LiveLog();
    live.append('starting study s1\nrun 1/4 bound-p128: waiting for job\n');
    const { lab, pressCtrlC, listening } = await cluster(live);
    const following = lab('logs', 'runner', '--follow', '--tail', '2');
    await until(() => live.followers === 1);
    live.append('run 1/4 bound-p128: valid\n');
    // The new line on its way (real HTTP), then Ctrl-C.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(listening()).toBe(true);
    pressCtrlC();
    const run = await following;
    expect(run.value).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe(HEADER);
    expect(lines.slice(1, 3)).toEqual(['starting study s1', 'run 1/4 bound-p128: waiting for job']);
    expect(lines.at(-2)).toBe('--- stopped following');
    expect(lines.at(-1)).toBe('');
    // The request was cancelled: the API server has no follower left, and the Ctrl-C hook is gone.
    await until(() => live.followers === 0);
    expect(live.done).toBe(false);
    expect(listening()).toBe(false);
  });

  it('a container the pod does not have is the API server’s 400, one line on stderr', async () => {
    const live = new LiveLog();
    const { lab } = await cluster(live);
    const run = await lab('logs', 'pod', `${STUDY_RUNNER_NAME}-x0`, '--container', 'nope', '--follow');
    expect(run.value).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/^lab logs: .*pods\/lab-study-runner-x0\/log\?follow=true.*400/);
  });
});

describe('the fake API server’s tail', () => {
  it('keeps the last lines, with or without a final newline', () => {
    expect(tailOf('a\nb\nc\n', 2)).toBe('b\nc\n');
    expect(tailOf('a\nb\nc', 2)).toBe('b\nc');
    expect(tailOf('a\n', 5)).toBe('a\n');
  });
});
