import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import {
  HOST_EXIT,
  parseHostReport,
  RUNNER_MANIFESTS,
  renderReadStatus,
  renderStartStudy,
  renderSyncResults,
  runnerJob,
  scriptText,
} from '../../lib/control/host-scripts.ts';
import { STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { makeSandbox } from '../aws/bootstrap/sandbox.ts';
import { needs, SHELLCHECK } from '../tools.ts';
import { shellcheckOnce } from './shellcheck-once.ts';

const job = runnerJob(parseLabConfig({}));
const STATUS = { state: 'running', totalRuns: 25, recordedRuns: 7, validRuns: 7, invalidRuns: 0 };

describe('the host scripts', () => {
  const scripts = {
    start: renderStartStudy(job),
    startNew: renderStartStudy(job, { fresh: true }),
    startRedo: renderStartStudy(job, { redoInvalid: true }),
    status: renderReadStatus(job),
    sync: renderSyncResults(),
  };

  const findingsOf = shellcheckOnce(
    Object.fromEntries(Object.entries(scripts).map(([name, lines]) => [name, scriptText(lines)])),
  );

  test.runIf(needs(SHELLCHECK, import.meta.url, 'the shellcheck tests')).each(Object.keys(scripts))(
    '%s passes shellcheck as bash',
    (name) => {
      expect(findingsOf(name)).toEqual([]);
    },
  );

  test('take their names from the config, the runner chart, the bootstrap and the results layout', () => {
    expect(job).toEqual({ namespace: 'vllm', name: STUDY_RUNNER_NAME });
    expect(runnerJob(parseLabConfig({ namespace: 'lab2' })).namespace).toBe('lab2');
    expect(RUNNER_MANIFESTS).toEqual([
      '/opt/lab/manifests/90-runner.yaml',
      '/opt/lab/manifests/runner/90-runner.yaml',
    ]);
    expect(scripts.start[0]).toBe('#!/bin/bash');
    expect(scripts.start).toContain("export KUBECONFIG='/etc/rancher/k3s/k3s.yaml'");
    expect(scripts.start).toContain("readonly READY_MARKER='/opt/lab/ready'");
    expect(scripts.status).toContain("readonly STATUS_FILE='/var/lib/lab/results/status.json'");
    expect(scripts.sync).toContain("readonly SYNC_SCRIPT='/usr/local/sbin/lab-sync-results'");
  });
});

/** A host: the bootstrap's folders in a sandbox, a fake kubectl whose Job is in `FAKE_JOB`. */
function host(options: { ready?: boolean; manifest?: 'top' | 'runner' | 'none'; status?: object } = {}) {
  const box = makeSandbox();
  writeFileSync(
    join(box.root, 'bin', 'kubectl'),
    `#!/bin/bash
echo "kubectl $*" >>"$SANDBOX/calls.log"
case "$*" in
*"get job"*)
  case "$FAKE_JOB" in
  absent) ;;
  active) printf 'lab-study-runner ' ;;
  succeeded) printf 'lab-study-runner SuccessCriteriaMet Complete' ;;
  failed) printf 'lab-study-runner FailureTarget Failed' ;;
  down) echo "The connection to the server 127.0.0.1:6443 was refused" >&2; exit 1 ;;
  esac ;;
esac
exit 0
`,
  );
  chmodSync(join(box.root, 'bin', 'kubectl'), 0o755);
  if (options.ready ?? true) writeFileSync(box.path('/opt/lab/ready'), '');
  writeFileSync(box.path('/var/log/lab-bootstrap.log'), 'x ==> [step 9/13] apply the lab charts\n');
  const where = options.manifest ?? 'runner';
  if (where !== 'none') {
    const file = box.path(where === 'top' ? RUNNER_MANIFESTS[0] : RUNNER_MANIFESTS[1]);
    mkdirSync(join(file, '..'), { recursive: true });
    writeFileSync(file, 'kind: Job\n');
  }
  if (options.status) {
    mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
    writeFileSync(box.path('/var/lib/lab/results/status.json'), JSON.stringify(options.status));
  }
  const run = (lines: readonly string[], jobState: string) => {
    const result = box.run(scriptText(lines), { FAKE_JOB: jobState });
    return { ...result, calls: box.calls(), report: parseHostReport(result.stdout) };
  };
  return { box, run };
}

describe('lab run on the host', () => {
  test('no Job yet: applies the on-demand manifest (runner.autoStart false) and reports no status', () => {
    const { run, box } = host();
    const result = run(renderStartStudy(job), 'absent');
    expect(result.status, result.stderr).toBe(0);
    expect(result.calls).toEqual([
      'kubectl -n vllm get job lab-study-runner --ignore-not-found -o jsonpath={.metadata.name} {.status.conditions[?(@.status=="True")].type}',
      `kubectl apply --server-side --field-manager=lab-run -f ${box.path('/opt/lab/manifests/runner/90-runner.yaml')}`,
    ]);
    expect(result.report).toMatchObject({ job: 'absent', noStatus: true });
    expect(result.report.lines.at(-1)).toMatch(/^started the study runner Job vllm\/lab-study-runner from /);
  });

  test.each(['succeeded', 'failed'])(
    'a %s Job is deleted and created again from the applied manifest',
    (state) => {
      const { run, box } = host({ manifest: 'top', status: { ...STATUS, state: 'finished' } });
      const result = run(renderStartStudy(job), state);
      expect(result.status, result.stderr).toBe(0);
      expect(result.calls.slice(1)).toEqual([
        'kubectl -n vllm delete job lab-study-runner --ignore-not-found --wait=true',
        `kubectl apply --server-side --field-manager=lab-run -f ${box.path('/opt/lab/manifests/90-runner.yaml')}`,
      ]);
      expect(result.report.job).toBe(state);
      expect(JSON.parse(result.report.statusText ?? '')).toMatchObject({ state: 'finished' });
    },
  );

  test('lab run --new leaves the fresh-study request for the runner, then starts it', () => {
    const { run, box } = host({ status: { ...STATUS, state: 'finished' } });
    mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
    const result = run(renderStartStudy(job, { fresh: true }), 'succeeded');
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(box.path('/var/lib/lab/results/new-study.request'), 'utf8')).toMatch(
      /^\d{4}-\d\d-\d\dT/,
    );
    expect(result.report.lines).toContain(
      'lab run --new: the runner starts a fresh study; earlier studies stay as they are',
    );
    expect(result.calls.at(-1)).toMatch(/^kubectl apply /);
  });

  test('lab run --redo-invalid leaves the redo request for the runner, then starts it; not while a runner works', () => {
    const { run, box } = host({ status: { ...STATUS, state: 'finished' } });
    mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
    const result = run(renderStartStudy(job, { redoInvalid: true }), 'succeeded');
    expect(result.status, result.stderr).toBe(0);
    expect(readFileSync(box.path('/var/lib/lab/results/redo-invalid.request'), 'utf8')).toMatch(/^\d{4}-/);
    expect(existsSync(box.path('/var/lib/lab/results/new-study.request'))).toBe(false);
    expect(result.calls.at(-1)).toMatch(/^kubectl apply /);

    const busy = host({ status: STATUS });
    const active = busy.run(renderStartStudy(job, { redoInvalid: true }), 'active');
    expect(existsSync(busy.box.path('/var/lib/lab/results/redo-invalid.request'))).toBe(false);
    expect(active.report.lines).toContain(
      'lab run --redo-invalid: not applied while a runner is at work; run it again once the runner has ended',
    );
  });

  test('lab run --new does nothing while a runner is at work', () => {
    const { run, box } = host({ status: STATUS });
    const result = run(renderStartStudy(job, { fresh: true }), 'active');
    expect(result.status).toBe(0);
    expect(existsSync(box.path('/var/lib/lab/results/new-study.request'))).toBe(false);
    expect(result.report.lines).toContain(
      'lab run --new: not applied while a runner is at work; run it again once the runner has ended',
    );
  });

  test('an active Job is left alone: resume is automatic', () => {
    const { run } = host({ status: STATUS });
    const result = run(renderStartStudy(job), 'active');
    expect(result.status).toBe(0);
    expect(result.calls).toHaveLength(1);
    expect(result.report.lines).toEqual([
      'the study runner Job vllm/lab-study-runner is running: nothing to start (a resumed study skips the runs that already have a valid record)',
    ]);
    expect(JSON.parse(result.report.statusText ?? '')).toEqual(STATUS);
  });

  test('before the bootstrap is done: exit code notReady with the last log line, nothing applied', () => {
    const { run } = host({ ready: false });
    const result = run(renderStartStudy(job), 'absent');
    expect(result.status).toBe(HOST_EXIT.notReady);
    expect(result.stderr).toContain('the bootstrap has not signalled SUCCESS');
    expect(result.stderr).toContain('[step 9/13] apply the lab charts');
    expect(result.calls).toEqual([]);
  });

  test('without a runner manifest: exit code noRunnerManifest', () => {
    const { run } = host({ manifest: 'none' });
    const result = run(renderStartStudy(job), 'absent');
    expect(result.status).toBe(HOST_EXIT.noRunnerManifest);
    expect(result.stderr).toContain('no study runner manifest on the host');
  });

  test('a kubectl that cannot reach K3s fails the script, never reads as "absent"', () => {
    const { run } = host();
    const result = run(renderStartStudy(job), 'down');
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('connection to the server 127.0.0.1:6443 was refused');
    expect(result.calls.some((c) => c.includes('apply'))).toBe(false);
  });

  test('the manifests the synthesizer writes are where the script looks, for both runner.autoStart values', () => {
    for (const [autoStart, expected] of [
      [true, RUNNER_MANIFESTS[0]],
      [false, RUNNER_MANIFESTS[1]],
    ] as const) {
      const box = makeSandbox();
      const dir = box.path('/opt/lab/manifests');
      synthesizeCluster(parseLabConfig({ runner: { autoStart } }), dir);
      const { status } = box.run(`test -f ${expected}\n`);
      expect(status, `${autoStart}`).toBe(0);
    }
  });
});

describe('lab status on the host', () => {
  test('prints the Job state and status.json', () => {
    const { run } = host({ status: STATUS });
    const result = run(renderReadStatus(job), 'active');
    expect(result.status).toBe(0);
    expect(result.report.job).toBe('active');
    expect(JSON.parse(result.report.statusText ?? '')).toEqual(STATUS);
  });

  test('K3s down still shows the file; no file says so', () => {
    const down = host({ status: STATUS }).run(renderReadStatus(job), 'down');
    expect(down.status).toBe(0);
    expect(down.report.job).toBe('unknown');
    expect(down.report.statusText).toBeDefined();
    const none = host().run(renderReadStatus(job), 'absent');
    expect(none.report).toMatchObject({ job: 'absent', noStatus: true });
    expect(none.report.statusText).toBeUndefined();
  });
});

describe('lab results on the host', () => {
  test('runs the sync script the bootstrap installed, or says it is missing', () => {
    const { box } = host();
    expect(box.run(scriptText(renderSyncResults())).status).toBe(HOST_EXIT.noSyncScript);
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 0');
    const result = box.run(scriptText(renderSyncResults()));
    expect(result.status).toBe(0);
    expect(box.calls().map((c) => c.trim())).toContain('lab-sync-results');
    expect(result.stdout).toContain(`uploaded ${box.path('/var/lib/lab/results')}/ to the results bucket`);
  });
});

test('parseHostReport keeps the other lines and reads everything after the status marker as the file', () => {
  expect(parseHostReport('runner job: weird\nhello\n\n--- status.json\n{"a":\n1}\n')).toEqual({
    job: 'unknown',
    statusText: '{"a":\n1}\n',
    noStatus: false,
    lines: ['hello'],
  });
});
