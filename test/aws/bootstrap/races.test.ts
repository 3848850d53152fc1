import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { renderAgentSettings } from '../../../lib/aws/bootstrap/agent.ts';
import {
  BOOTSTRAP_SOURCES,
  bootstrapSteps,
  LOG_UPLOAD_SCRIPT,
  RESULTS_SYNC_SCRIPT,
} from '../../../lib/aws/bootstrap/bootstrap.ts';
import { agentNodes } from '../../../lib/config/cluster.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { tempDir } from '../../temp.ts';
import { onlySteps } from './only-steps.ts';
import { defaults, ENV, FAST, whenDone } from './rehearse.ts';
import { fakeCommand, makeSandbox, pathWithout, type Sandbox } from './sandbox.ts';

/** Replaces a fake command of the sandbox by `body`, which may call the old one as `<name>-real`. */
function wrapFake(box: Sandbox, name: string, body: string) {
  renameSync(join(box.root, 'bin', name), join(box.root, 'bin', `${name}-real`));
  writeFileSync(join(box.root, 'bin', name), fakeCommand(body));
  chmodSync(join(box.root, 'bin', name), 0o755);
}

/** Whether a process runs (a zombie is not running: it has ended and waits to be reaped). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Races of the host's shell programs (issue 27's audit), each forced into its bad interleaving by a
 * fake that blocks on a fifo until the test lets it go: no test here depends on timing luck.
 */

/**
 * The run of "names the agents whose reports S3 did not answer" (below): its read waits about 1 s
 * of real time for an answer that never comes, so the run starts in the background before the
 * file's first test (the `beforeAll` below) and waits while the other tests run; its test awaits it.
 */
let unanswered: Promise<{ box: Sandbox; status: number | null }> | undefined;
function unansweredReads() {
  unanswered ??= (() => {
    const config = parseLabConfig({
      instance: { readyTimeoutMinutes: 60 },
      cluster: { agents: [{ name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.xlarge' }] },
    });
    const box = makeSandbox();
    box.writeBootstrap(config, {
      ...FAST,
      WAIT_INTERVAL_SECONDS: '2',
      ...onlySteps(bootstrapSteps(config), ['wait_for_agents', 'apply_prerequisites'], {
        wait_for_agents: 11,
      }),
    });
    spawnSync('mkfifo', [join(box.root, 'never')]);
    wrapFake(
      box,
      'curl',
      [
        'if [[ "$*" == *"/model-cache/"* && " $* " != *" -X PUT "* ]]; then read -r _ <"$SANDBOX/never"; fi',
        'exec curl-real "$@"',
      ].join('\n'),
    );
    return box
      .runFileInBackground(join(box.bootstrapDir, 'main.sh'), {
        ...ENV,
        LAB_AGENT_TOKEN_SECRET:
          'arn:aws:secretsmanager:us-west-2:123456789012:secret:ClusterAgentToken-AbCdEf',
        LAB_MANIFESTS_DIR: tempDir('lab-manifests-'),
        FAKE_GPUS: '4',
        FAKE_ALLOCATABLE: '4',
        FAKE_NODES: 'gpu-1=True:1 gpu-2=True:1',
        FAKE_CONFIG_MODES_UNREAD: '1',
      })
      .then(({ status }) => ({ box, status }));
  })();
  return unanswered;
}

beforeAll(() => {
  unansweredReads();
});
// The run still ends before the file does when a filter left its test out (and before its folder
// is removed).
afterAll(async () => {
  await unanswered;
});

const LOG_KEY = 'results-bucket/Lab/host/bootstrap.log';

describe('uploads of the same object', () => {
  // The log timer's upload copies the log, and its PutObject is answered late (a slow S3); the
  // final upload (the deadline's, or the failed bootstrap's) copies the longer log meanwhile and
  // lands first. S3 keeps the last PutObject to arrive: the older, shorter log, and the host then
  // ends. The fake curl holds the first PUT of the log until the test writes to a fifo, which it
  // does once the second upload has ended or says it waits for the first. Each side waits on a
  // fifo, not a poll: a `sleep 0.05` loop started a process (and a grep) every 50 ms.
  test('a later upload lands last: the final log is never replaced by an older copy', () => {
    const box = makeSandbox();
    box.writeBootstrap(parseLabConfig({}), { AWS_RETRY_SECONDS: '0' });
    mkdirSync(box.path('/opt/lab'), { recursive: true });
    rmSync(join(box.root, 'bin', 'aws'));
    wrapFake(
      box,
      'curl',
      [
        'if [[ " $* " == *" -X PUT "* && "$*" == *bootstrap.log ]] && mv "$SANDBOX/hold" "$SANDBOX/held" 2>/dev/null; then',
        '  echo held >"$SANDBOX/holding"',
        '  read -r _ <"$SANDBOX/release"',
        'fi',
        'exec curl-real "$@"',
      ].join('\n'),
    );
    const put = `bash '${join(box.bootstrapDir, 'host', 'lab-aws.sh')}' put "$log" s3://${LOG_KEY}`;
    const result = box.run(
      [
        'log=$SANDBOX/bootstrap.log',
        'mkfifo "$SANDBOX/release" "$SANDBOX/holding" "$SANDBOX/said"',
        ': >"$SANDBOX/hold"',
        'printf \'line 1\\n\' >"$log"',
        // The timer's upload: its copy holds line 1, and its PUT waits.
        `${put} 2>"$SANDBOX/timer.err" &`,
        'timer=$!',
        'read -r _ <"$SANDBOX/holding"',
        'printf \'line 2\\n\' >>"$log"',
        // The final upload, of the longer log. Its stderr is kept in final.err by a reader that
        // says so on fd 3 when the upload says it waits, and again at its end (the upload ended).
        'exec 3<>"$SANDBOX/said"',
        `${put} 2> >(while IFS= read -r line; do printf '%s\\n' "$line" >>"$SANDBOX/final.err"; if [[ $line == *"waiting for the upload in flight"* ]]; then echo >&3; fi; done; echo >&3) &`,
        'final=$!',
        'read -r _ <&3',
        'echo go >"$SANDBOX/release"',
        'wait "$timer"; echo "timer $?"',
        'wait "$final"; echo "final $?"',
      ].join('\n'),
      {
        PATH: pathWithout('aws', box),
        LAB_REGION: 'us-west-2',
        LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
      },
    );
    expect(result.stdout, result.stderr).toBe('timer 0\nfinal 0\n');
    expect(box.awsRequests()).toEqual([`PUT ${LOG_KEY}`, `PUT ${LOG_KEY}`]);
    expect(box.s3Object(LOG_KEY)).toBe('line 1\nline 2\n');
  });
});

describe('work a failed step left in the background', () => {
  // prefetch pulls every image in the background and dies when the vLLM image cannot be pulled.
  // The other pulls ran on after the bootstrap had signalled FAILURE and exited, for up to the
  // rest of the step's budget, writing to the log and to the scratch folders a second run uses.
  // The fake vLLM pull fails only once another pull hangs (on a fifo nobody writes to).
  test('a step that dies ends the pulls it started in the background', () => {
    const box = makeSandbox();
    const manifests = tempDir('lab-manifests-');
    mkdirSync(join(manifests, 'jobs'));
    writeFileSync(
      join(manifests, '10-lab.yaml'),
      `image: ${defaults.vllm.image}\n  - image: docker.io/library/busybox:1.36\n`,
    );
    box.writeBootstrap(defaults, {
      ...FAST,
      ...onlySteps(bootstrapSteps(defaults), ['prefetch', 'apply_prerequisites']),
    });
    spawnSync('mkfifo', [join(box.root, 'never'), join(box.root, 'hung')]);
    wrapFake(
      box,
      'k3s',
      [
        'case "$*" in',
        // The vLLM pull waits on a fifo until another pull hangs (the first to open it writes).
        `"crictl pull ${defaults.vllm.image}") read -r _ <"$SANDBOX/hung"; echo "pull refused" >&2; exit 1 ;;`,
        '"crictl pull "*) echo $$ >"$SANDBOX/hanging"; echo >"$SANDBOX/hung"; read -r _ <"$SANDBOX/never"; exit 0 ;;',
        'esac',
        'exec k3s-real "$@"',
      ].join('\n'),
    );
    const result = box.runFile(join(box.bootstrapDir, 'main.sh'), {
      ...ENV,
      LAB_MANIFESTS_DIR: manifests,
      FAKE_GPUS: '4',
    });
    const pull = Number(readFileSync(join(box.root, 'hanging'), 'utf8'));
    const alive = running(pull);
    if (alive) process.kill(pull, 'SIGKILL');
    expect(result.status).toBe(1);
    expect(box.signals()[0]?.body.Reason).toContain(`cannot pull ${defaults.vllm.image}`);
    expect(alive).toBe(false);
  });

  // \`timeout 0\` means no limit: a background pull that began its next command after its step's
  // budget was spent ran that command unbounded.
  test('with its budget spent, within_budget runs nothing', () => {
    const script = [
      `source '${join(BOOTSTRAP_SOURCES, 'helpers.sh')}'`,
      'STEP_DEADLINE=$((SECONDS - 1))',
      'within_budget sleep 30 >/dev/null 2>&1',
      'echo "exit $?"',
    ].join('\n');
    // 25 s: room for a loaded machine (10 s ran out once at a load of 15), still short of the
    // sleep a broken within_budget would start.
    const result = spawnSync('timeout', ['25', 'bash', '-c', script], { encoding: 'utf8' });
    expect(result.stdout).toBe('exit 124\n');
  });
});

describe("the server's wait for its agents", () => {
  // Each GPU agent's model cache report is a GetObject of up to a minute. S3 that does not answer
  // made the read begun near the wait's end run past the margin the wait keeps to name what is
  // missing (half the budget, at most 30 s), so the watchdog ended the step as "over budget" and
  // the user never learnt which agent was missing. The fake S3 never answers these reads (a fifo
  // nobody writes to); the step's budget is 11 s, so the reads have about 1 s and the margin 10 s
  // (30-cluster.sh REPORT_RESERVE): the same proof as a longer budget, which only waits longer for
  // the read that never ends (13 s: 3 s). Without the reserve the read outlives the budget, and
  // the watchdog reports the step as over budget.
  test('names the agents whose reports S3 did not answer, before the budget runs out', async () => {
    const { box, status } = await unansweredReads();
    expect(status).toBe(1);
    const reason = String(box.signals()[0]?.body.Reason);
    expect(reason).toContain(
      'failed: not ready: gpu-1: S3 did not say in time whether it reported its model cache;gpu-2: S3 did not say in time whether it reported its model cache (',
    );
    expect(reason).not.toContain('ran out of its budget');
  });
});

describe('the cost guard', () => {
  // lab-deadline runs once, at the deadline (a one-instant OnCalendar= timer). A shutdown that
  // failed (logind or D-Bus not answering) ended it under set -e, and nothing tried again: the
  // host ran on, billing. systemd's own poweroff fails too here; the kernel's is the last resort.
  test('a refused shutdown at the deadline still powers the host off', () => {
    const box = makeSandbox();
    box.writeBootstrap(defaults);
    box.fake(RESULTS_SYNC_SCRIPT, 'exit 0');
    box.fake(LOG_UPLOAD_SCRIPT, 'exit 0');
    for (const [name, body] of [
      ['shutdown', 'echo "Failed to connect to bus: Connection refused" >&2; exit 1'],
      ['systemctl', 'echo "Failed to connect to bus: Connection refused" >&2; exit 1'],
      ['poweroff', 'exit 0'],
    ] as const) {
      writeFileSync(join(box.root, 'bin', name), fakeCommand(body));
      chmodSync(join(box.root, 'bin', name), 0o755);
    }
    const fired = box.runFile(join(box.bootstrapDir, 'host', 'lab-deadline.sh'), {
      LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
    });
    expect(fired.status).toBe(0);
    expect(box.calls().map((c) => c.trim())).toEqual([
      'lab-sync-results',
      'lab-upload-log',
      'shutdown -h now lab lifetime reached (instance.maxLifetimeHours): results uploaded, terminating',
      'systemctl poweroff --force',
      'poweroff --force --force',
    ]);
    expect(fired.stdout).toContain('shutdown -h now failed: powering off');
  });
});

describe('runner.terminateWhenDone on a broken disk', () => {
  // A failed upload of a finished study is retried each minute for 15 minutes, from the time of the
  // first failure, kept in a file. Where that file cannot be created (a disk remounted read-only:
  // a folder that does not exist stands in), set -e ended the watcher before its check, every
  // minute, and the host ran on until its deadline.
  test('a failed upload whose retry record cannot be written ends the host at once', () => {
    const box = makeSandbox();
    box.writeBootstrap(whenDone);
    mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
    writeFileSync(box.path('/var/lib/lab/results/status.json'), JSON.stringify({ state: 'finished' }));
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 1');
    const result = box.runFile(join(box.bootstrapDir, 'host', 'lab-terminate-when-done.sh'), {
      LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
      TERMINATE_RETRY_MARKER: join(box.root, 'read-only', 'terminate-upload-retry'),
    });
    expect(result.status, result.stderr).toBe(0);
    expect(box.calls()).toEqual([
      'lab-sync-results ',
      'shutdown -h now lab study finished (runner.terminateWhenDone): results upload failing, terminating',
    ]);
  });
});

describe('an agent following its server on a broken disk', () => {
  // The agent counts the minutes in a row its server did not answer. The count lived on the disk:
  // where it could not be written (full, or remounted read-only; a folder in its place stands in),
  // set -e ended the watcher every minute before it counted, and the agent outlived its server
  // until its own deadline. The count now lives in the service's /run folder (tmpfs), which
  // systemd gives the service as RUNTIME_DIRECTORY.
  test('counts the misses in its /run folder and ends with its server', () => {
    const config = parseLabConfig({
      instance: { readyTimeoutMinutes: 60 },
      cluster: { agents: [{ name: 'client', role: 'cpu', instanceType: 'c7i.4xlarge' }] },
    });
    const [client] = agentNodes(config);
    if (!client) throw new Error('no agent');
    const box = makeSandbox();
    box.writeBootstrap(config, { SERVER_GONE_MINUTES: '2' }, (c) => renderAgentSettings(c, client));
    writeFileSync(box.path('/opt/lab/host.env'), 'LAB_SERVER_URL=https://10.0.1.23:6443\n');
    mkdirSync(box.path('/opt/lab/server-misses'));
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 0');
    const runtime = join(box.root, 'run-lab-follow-server');
    mkdirSync(runtime);
    const minute = () =>
      box.runFile(join(box.bootstrapDir, 'host', 'lab-follow-server.sh'), {
        LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
        RUNTIME_DIRECTORY: runtime,
        FAKE_SERVER_GONE: '1',
      });
    expect(minute().status).toBe(0);
    expect(minute().status).toBe(0);
    expect(box.calls().filter((c) => !c.startsWith('curl'))).toEqual([
      'lab-sync-results ',
      "shutdown -h now the lab's K3s server ended: this agent ends with it",
    ]);

    // minute_timer gives both watchers that folder.
    const units = join(box.root, 'units');
    mkdirSync(units);
    const script = [
      `source '${join(BOOTSTRAP_SOURCES, 'helpers.sh')}'`,
      `SYSTEMD_DIR='${units}'`,
      "minute_timer lab-follow-server 'End this agent with its server' /usr/local/sbin/lab-follow-server",
    ].join('\n');
    expect(box.run(script).status).toBe(0);
    expect(readFileSync(join(units, 'lab-follow-server.service'), 'utf8')).toContain(
      'RuntimeDirectory=lab-follow-server\nRuntimeDirectoryPreserve=yes\n',
    );
  });
});
