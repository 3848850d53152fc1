import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  BOOTSTRAP_SOURCES,
  bootstrapSteps,
  DEADLINE_SCRIPT,
  LOG_UPLOAD_SCRIPT,
  READY_MARKER,
  RESULTS_SYNC_SCRIPT,
  TERMINATE_WHEN_DONE_SCRIPT,
} from '../../../lib/aws/bootstrap/bootstrap.ts';
import { onlySteps, stepMarker } from './only-steps.ts';
import {
  defaultRehearsal,
  defaults,
  ENV,
  FAST,
  LOG_OBJECT,
  LOG_PUT,
  once,
  otherRehearsal,
  rehearse,
  rehearseInBackground,
} from './rehearse.ts';
import { fakeCommand, makeSandbox, type Sandbox } from './sandbox.ts';

// The bootstrap run with fake system commands. A run costs seconds of CPU (hundreds of processes),
// so tests that only read a run share it: the default host booted twice, whose first boot is the
// default run and rides out three troubles and whose second has no metadata service and runs
// only the steps its tests read (defaultRehearsal), and one run of the other configuration with
// the ai-gateway arm and runner.terminateWhenDone, where S3 refuses the listing of earlier studies
// (otherRehearsal), both in rehearse.ts. A test that
// needs a run to fail runs its own, and only the step its fault is in and the one after it
// (onlySteps: main.sh's own loop over a cut step table), except the wrong GPU count, which keeps the
// whole table's numbering ("[step 4/13]"). The shell program's files and settings.env:
// bootstrap-program.test.ts; runner.terminateWhenDone: bootstrap-terminate.test.ts.

/** The default host's steps, for the faults that run only theirs. */
const STEPS = bootstrapSteps(defaults);
const title = (name: string) => String(STEPS.find((s) => s.name === name)?.title);
/**
 * The two runs whose step hangs until its 2 s budget runs out (7. diagnosis), started with the
 * file in the background: their waits on real time overlap the file's other runs instead of
 * holding the worker.
 */
const hangs = once(() => ({
  rollout: rehearseInBackground(
    defaults,
    { FAKE_HANG: '*rollout status statefulset/*' },
    onlySteps(STEPS, ['wait_for_replicas', 'record_gpu_uuids'], { wait_for_replicas: 2 }),
  ),
  substitution: rehearseInBackground(
    defaults,
    { FAKE_HANG: '* exec *nvidia-smi*' },
    onlySteps(STEPS, ['record_gpu_uuids', 'signal_success'], { record_gpu_uuids: 2 }),
  ),
}));
beforeAll(() => {
  hangs();
});

/** The deadline the launcher writes before the bootstrap starts (read by signal_success). */
const launcherDeadline = (box: Sandbox) =>
  writeFileSync(box.path('/opt/lab/deadline'), '2030-01-01T00:00:00Z\n');

describe('waiting for apt at first boot', () => {
  // unattended-upgrade-shutdown --wait-for-signal runs all the time under the process name
  // "unattended-upgr"; only the dpkg and apt locks say whether apt is busy.
  test('is not fooled by the always-running unattended-upgrades helper', () => {
    // The pgrep of defaultRehearsal's first boot lists it.
    const { first, afterFirst } = defaultRehearsal();
    expect(first.result.status, afterFirst.log).toBe(0);
    expect(afterFirst.log).toContain('apt and dpkg are idle');
  });

  test('waits while a lock is held', () => {
    const box = makeSandbox();
    box.writeBootstrap(defaults);
    writeFileSync(join(box.root, 'bin', 'fuser'), '#!/bin/bash\nexit 0\n');
    const held = box.run(
      `source '${join(box.bootstrapDir, 'main.sh')}'\napt_is_idle && echo idle || echo busy\n`,
    );
    expect(held.stdout.trim().split('\n').at(-1)).toBe('busy');
  });

  test('without fuser, asks pgrep for apt and dpkg themselves, not for the helper', () => {
    const box = makeSandbox();
    box.writeBootstrap(defaults);
    rmSync(join(box.root, 'bin', 'fuser'));
    // pgrep -f matches its pattern (POSIX ERE) against each process's whole command line.
    const pgrep = [
      '#!/bin/bash',
      `pattern=\${*: -1} found=1`,
      'while IFS= read -r line; do [[ $line =~ $pattern ]] && { echo "$line"; found=0; }; done <"$SANDBOX/processes"',
      'exit $found',
    ];
    writeFileSync(join(box.root, 'bin', 'pgrep'), `${pgrep.join('\n')}\n`);
    const helper =
      '/usr/bin/python3 /usr/share/unattended-upgrades/unattended-upgrade-shutdown --wait-for-signal';
    const idle = (processes: string[]) => {
      writeFileSync(join(box.root, 'processes'), `${processes.join('\n')}\n`);
      // Only the fakes on the PATH once main.sh is read: a host without fuser (psmisc).
      const run = box.run(
        `source '${join(box.bootstrapDir, 'main.sh')}'\nPATH="$SANDBOX/bin"\napt_is_idle && echo idle || echo busy\n`,
      );
      return run.stdout.trim().split('\n').at(-1);
    };
    expect(idle([helper])).toBe('idle');
    expect(idle([helper, '/usr/bin/apt-get -qq update'])).toBe('busy');
    expect(idle(['/usr/bin/dpkg --configure -a'])).toBe('busy');
  });
});

describe('the bootstrap, rehearsed with fake system commands', () => {
  test('default config: every step in order, then SUCCESS with the GPU of each replica', () => {
    // The first boot: what the second changed is read from afterFirst.
    const { box, first, afterFirst } = defaultRehearsal();
    const { result, calls, index, manifests } = first;
    const log = afterFirst.log;
    expect(result.status, log).toBe(0);

    const markers = [...log.matchAll(/==> \[step (\d+)\/13\]/g)].map((m) => Number(m[1]));
    expect(markers).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    expect(log).toContain('==> [step 7/13] pre-fetch Qwen/Qwen3-0.6B-FP8 and the ShareGPT file');
    expect(log).toMatch(/shared cache; pull images in parallel \(budget 10 min 0 s\)/);

    // The cost guard comes first (after lab-aws's read-only look at curl's version), results sync
    // on a timer and at shutdown.
    expect(calls[0]).toBe('curl --version --max-time 5');
    expect(calls[1]).toBe('systemctl daemon-reload');
    expect(calls[2]).toBe('systemctl enable --now lab-deadline.timer');
    // The launcher's early `shutdown -h +N` gives way to the timer, only once the timer runs.
    expect(calls[3]).toBe('shutdown -c the lab cost guard timer takes over');
    expect(calls).toContain('systemctl enable --now lab-results-sync.timer lab-results-final-upload.service');
    // Every unit step 1 starts was written before the daemon-reload (calls[1]) that loads them all.
    expect(afterFirst.systemdReloads[0]).toEqual(
      expect.arrayContaining([
        'lab-deadline.service',
        'lab-deadline.timer',
        'lab-results-sync.service',
        'lab-results-sync.timer',
        'lab-results-final-upload.service',
        'lab-log-upload.service',
        'lab-log-upload.timer',
      ]),
    );
    const syncScript = readFileSync(box.path('/usr/local/sbin/lab-sync-results'), 'utf8');
    expect(syncScript).toContain(`export LAB_SETTINGS=${join(box.bootstrapDir, 'settings.env')}`);
    expect(readFileSync(box.path('/opt/lab/deadline'), 'utf8')).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$/,
    );

    expect(calls).toContain(
      'k3s-install v1.36.4+k3s1|--write-kubeconfig-mode 644 --disable traefik --node-label llm-gateway-lab/node-role=gpu --node-label llm-gateway-lab/host=server',
    );
    // Its own node, by label: an agent joining meanwhile would not count.
    expect(calls).toContain(
      'kubectl wait --for=condition=Ready node -l llm-gateway-lab/host=server --timeout=10s',
    );
    expect(log).toContain('containerd runtime nvidia:   BinaryName = "/usr/bin/nvidia-container-runtime"');

    // The model is fetched once, in the vLLM image, before anything is applied; every image of the
    // charts and of the Jobs is pulled.
    const prefetch = index(
      /^k3s ctr --namespace k8s.io run .* docker\.io\/vllm\/vllm-openai:v0\.11\.0 lab-model-prefetch python3 -c .* Qwen\/Qwen3-0\.6B-FP8$/,
    );
    expect(prefetch).toBeGreaterThan(index(/^k3s crictl pull vllm\/vllm-openai:v0\.11\.0$/));
    expect(prefetch).toBeLessThan(index(/^kubectl apply/));
    for (const image of [
      'envoyproxy/envoy:v1.35.3',
      'python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36',
      'nvcr.io/nvidia/k8s-device-plugin:v0.17.1',
    ]) {
      expect(calls).toContain(`k3s crictl pull ${image}`);
    }
    expect(
      existsSync(box.path('/var/lib/lab/models/datasets/ShareGPT_V3_unfiltered_cleaned_split.json')),
    ).toBe(true);

    // Prerequisites from the folder first, then the charts in file-name order, never jobs/.
    const applied = calls.filter((c) => c.startsWith('kubectl apply')).map((c) => c.split('/').pop());
    const charts = readdirSync(manifests)
      .filter((f) => /^\d\d-.*\.yaml$/.test(f))
      .sort();
    expect(applied).toEqual(['gaie-crds.yaml', ...charts]);
    expect(readFileSync(box.path('/opt/lab/prerequisites/gaie-crds.yaml'), 'utf8')).toContain(
      'gateway-api-inference-extension/releases/download/v1.0.1/manifests.yaml',
    );
    expect(calls.some((c) => c.includes('/jobs/') && !c.startsWith('sed'))).toBe(false);

    expect(index(/get runtimeclass nvidia/)).toBeLessThan(index(/^kubectl apply/));
    // Waits are bounded by what is left of the step's budget (5 minutes for the replicas).
    expect(calls).toContainEqual(
      expect.stringMatching(/^kubectl -n vllm rollout status statefulset\/qwen3 --timeout=(29\d|300)s$/),
    );
    expect(calls.filter((c) => c.includes(' exec '))).toEqual([
      'kubectl -n vllm exec qwen3-0 -- nvidia-smi -L',
      'kubectl -n vllm exec qwen3-1 -- nvidia-smi -L',
    ]);
    expect(JSON.parse(readFileSync(box.path('/var/lib/lab/results/host/gpu-uuids.json'), 'utf8'))).toEqual({
      'qwen3-0': 'GPU-qwen3-0',
      'qwen3-1': 'GPU-qwen3-1',
    });
    expect(readFileSync(box.path('/var/lib/lab/results/host/nvidia-smi-topo.txt'), 'utf8')).toContain('GPU0');

    const signals = afterFirst.signals;
    expect(signals).toHaveLength(1);
    expect(signals[0]?.url).toBe('https://wait.example/handle?X-Amz-Signature=secret');
    expect(signals[0]?.body).toMatchObject({ Status: 'SUCCESS', UniqueId: 'bootstrap' });
    expect(signals[0]?.body.Data).toMatch(
      /^2 replicas ready on distinct GPUs: qwen3-0=GPU-qwen3-0 qwen3-1=GPU-qwen3-1; the instance shuts down at \d{4}-/,
    );
    expect(afterFirst.signalled).toBe(true);
    expect(afterFirst.ready).toBe(true);
    expect(log).not.toContain('X-Amz-Signature');

    // host.json for the study metadata, from IMDSv2 (the fake answers only with its token).
    expect(JSON.parse(afterFirst.hostJson)).toEqual({
      instanceType: 'g6.12xlarge',
      availabilityZone: 'us-west-2b',
      k3sVersion: 'v1.36.4+k3s1',
    });
    // runner.terminateWhenDone is off by default: nothing watches for the end of the study.
    expect(calls.filter((c) => c.includes('lab-terminate-when-done'))).toEqual([]);
    expect(existsSync(box.path(TERMINATE_WHEN_DONE_SCRIPT))).toBe(false);
  });

  test('without the metadata service host.json still records the K3s version, and the bootstrap goes on', () => {
    // The second boot of defaultRehearsal has no metadata service (host.json is the last boot's);
    // it runs step 1 and K3s's, which writes host.json.
    const { box, second, secondLog } = defaultRehearsal();
    expect(second.result.status, box.log()).toBe(0);
    expect(JSON.parse(readFileSync(box.path('/var/lib/lab/results/host/host.json'), 'utf8'))).toEqual({
      k3sVersion: 'v1.36.4+k3s1',
    });
    expect(secondLog).toContain('the instance metadata service did not answer');
    expect(secondLog).toContain(stepMarker(1, 2, title('install_k3s')));
    expect(secondLog).not.toContain('FAILED');
  });

  test('3 replicas with llm-d: both sets awaited, six distinct GPUs, K3s v1.35.2', () => {
    const { box, result, calls } = otherRehearsal();
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain(
      'k3s-install v1.35.2+k3s1|--write-kubeconfig-mode 644 --disable traefik --node-label llm-gateway-lab/node-role=gpu --node-label llm-gateway-lab/host=server',
    );
    expect(calls.some((c) => c.startsWith('kubectl -n vllm rollout status statefulset/qwen3-kv'))).toBe(true);
    const pods = calls.filter((c) => c.includes(' exec ')).map((c) => c.split(' ')[4]);
    expect(pods).toEqual(['qwen3-0', 'qwen3-1', 'qwen3-2', 'qwen3-kv-0', 'qwen3-kv-1', 'qwen3-kv-2']);
    expect(box.signals()[0]?.body.Data).toMatch(/^6 replicas ready on distinct GPUs/);
  });

  test('ai-gateway: Helm charts after Envoy Gateway is up, and its restart right after 70-ai-gateway-config', () => {
    const { box, result, calls, index } = otherRehearsal();
    expect(result.status, box.log()).toBe(0);
    const helm = (args: string) => index(new RegExp(`^helm ${args}`));
    expect(helm('show chart oci://docker.io/envoyproxy/ai-gateway-crds-helm --version v1.1.0')).toBeLessThan(
      index(/^k3s-install/),
    );
    const egReady = index(/^kubectl -n envoy-gateway-system rollout status deployment\/envoy-gateway/);
    expect(index(/apply .*envoy-gateway\.yaml$/)).toBeLessThan(egReady);
    expect(egReady).toBeLessThan(
      helm('upgrade --install aieg-crd oci://docker.io/envoyproxy/ai-gateway-crds-helm'),
    );
    expect(helm('upgrade --install aieg-crd')).toBeLessThan(helm('upgrade --install aieg oci://'));
    expect(calls[helm('upgrade --install aieg oci://')]).toMatch(
      /--version v1\.1\.0 --namespace envoy-ai-gateway-system --create-namespace --wait --timeout \d+s$/,
    );
    const restart = index(/^kubectl -n envoy-gateway-system rollout restart deployment\/envoy-gateway$/);
    expect(restart).toBeGreaterThan(index(/apply .*70-ai-gateway-config\.yaml$/));
    expect(restart).toBeLessThan(index(/apply .*71-ai-gateway\.yaml$/));
  });

  test('a wrong GPU count fails step 4 and signals FAILURE with the step, the log location and the tail', () => {
    const { box, result, calls } = rehearse(defaults, { FAKE_GPUS: '3' });
    expect(result.status).toBe(1);
    expect(calls.some((c) => c.startsWith('k3s'))).toBe(false);
    const [signal] = box.signals();
    expect(signal?.body).toMatchObject({
      Status: 'FAILURE',
      UniqueId: 'bootstrap',
      Data: '[step 4/13] check the GPUs: nvidia-smi lists 4 (instance.gpus)',
    });
    const reason = signal?.body.Reason as string;
    expect(reason).toMatch(
      /^\[step 4\/13\] check the GPUs: .* failed: nvidia-smi -L lists 3 GPU\(s\), expected 4 \(instance.gpus for g6.12xlarge\)\nfull log: s3:\/\/results-bucket\/LlmGatewayLab\/host\/bootstrap\.log\n--- last lines of /,
    );
    expect(reason).toContain('GPU 2: NVIDIA L4 (UUID: GPU-host-2)');
    expect(signal?.raw.length).toBeLessThan(4000);
    // The log goes to S3 with the results (lab-sync-results puts its copy at the log's key, once:
    // helpers.sh upload_log_and_results): the object holds the log's failure line.
    expect(box.awsRequests().filter((r) => r === LOG_PUT)).toHaveLength(1);
    expect(existsSync(box.path('/var/lib/lab/results/host/bootstrap.log'))).toBe(true);
    expect(box.s3Object('results-bucket/LlmGatewayLab/host/bootstrap.log')).toContain('FAILED [step 4/13]');
    expect(calls.some((c) => c.startsWith('aws '))).toBe(false);
  });

  test('a relaunched host restores its studies from S3 before the runner starts; a failed restore is logged, not fatal', () => {
    // What the old host synced, restored by defaultRehearsal's first boot: one study over two
    // listing pages.
    const { box, first, afterFirst } = defaultRehearsal();
    const { index } = first;
    expect(first.result.status, afterFirst.log).toBe(0);
    const results = box.path('/var/lib/lab/results/studies');
    expect(readFileSync(join(results, 's-1/study.json'), 'utf8')).toBe('{"id":"s-1"}');
    expect(readFileSync(join(results, 's-1/runs/r 1.json'), 'utf8')).toBe('{"run":1}');
    expect(afterFirst.awsRequests.filter((r) => r.startsWith('LIST '))).toEqual([
      'LIST results-bucket/LlmGatewayLab/studies/',
      'LIST results-bucket/LlmGatewayLab/studies/',
    ]);
    const restore = index(
      /^curl .*https:\/\/results-bucket\.s3\.us-west-2\.amazonaws\.com\/\?list-type=2&prefix=LlmGatewayLab%2Fstudies%2F$/,
    );
    expect(restore).toBeGreaterThan(-1);
    expect(restore).toBeLessThan(index(/^kubectl apply .*90-runner\.yaml$/));
    expect(afterFirst.log).toMatch(
      /restored 1 earlier study record\(s\) from s3:\/\/results-bucket\/LlmGatewayLab\/studies\//,
    );

    // otherRehearsal: S3 refuses the listing (403), and the bootstrap goes on.
    const denied = otherRehearsal();
    expect(denied.result.status, denied.box.log()).toBe(0);
    expect(denied.box.awsRequests()).toContain('LIST results-bucket/LlmGatewayLab/studies/');
    expect(denied.box.log()).toContain(
      'could not restore earlier studies from s3://results-bucket/LlmGatewayLab/studies/: the runner starts from what this host has',
    );
  });

  // engine_serves matches the served name in the model list by bash (docs/facts.md §3.1): only as
  // a model's whole "id", compact or spaced JSON, inside "data".
  test("a replica serves once GET /v1/models lists the served name as a model's id", () => {
    const box = makeSandbox();
    box.writeBootstrap(defaults);
    const answers: Record<string, string> = {
      listed:
        '{"object":"list","data":[{"id":"qwen3","object":"model","owned_by":"vllm","root":"Qwen/Qwen3-0.6B-FP8","parent":null,"permission":[{"id":"modelperm-912d7b6ba7fbecfb","object":"model_permission"}]}]}',
      spaced:
        '{"object": "list", "data": [{"id": "qwen3-kv", "object": "model"}, {"id": "qwen3", "object": "model"}]}',
      another: '{"object":"list","data":[{"id":"qwen3-kv","object":"model","root":"qwen3"}]}',
      shorter: '{"object":"list","data":[{"id":"qwen","object":"model"}]}',
      empty: '{"object":"list","data":[]}',
      notAList: '{"id":"qwen3"}',
    };
    for (const [name, text] of Object.entries(answers)) writeFileSync(join(box.root, `${name}.json`), text);
    writeFileSync(join(box.root, 'bin', 'curl'), fakeCommand('cat "$FAKE_MODELS"'));
    const result = box.run(
      [
        `source '${join(box.bootstrapDir, 'main.sh')}'`,
        `for answer in ${Object.keys(answers).join(' ')}; do`,
        '  if FAKE_MODELS="$SANDBOX/$answer.json" engine_serves qwen3-0; then echo "$answer serves"; else echo "$answer not"; fi',
        'done',
      ].join('\n'),
    );
    expect(result.stdout.trim().split('\n')).toEqual([
      'listed serves',
      'spaced serves',
      'another not',
      'shorter not',
      'empty not',
      'notAList not',
    ]);
  });

  test('two replicas on one GPU fail step 12', () => {
    const { box, result } = rehearse(
      defaults,
      { FAKE_SHARED_GPU: '1' },
      launcherDeadline,
      onlySteps(STEPS, ['record_gpu_uuids', 'signal_success']),
    );
    expect(result.status).toBe(1);
    expect(STEPS[11]?.name).toBe('record_gpu_uuids');
    const signals = box.signals();
    expect(signals.map((s) => s.body.Status)).toEqual(['FAILURE']);
    expect(String(signals[0]?.body.Reason)).toContain(
      `${stepMarker(0, 2, title('record_gpu_uuids'))} failed: replicas share a physical GPU (GPU-shared)`,
    );
  });

  test('a failing command is named in the reason; a long, binary log tail stays valid and short', () => {
    const box = makeSandbox();
    // A log tail with colour codes, UTF-8, quotes, backslashes and tabs, far above the limit.
    writeFileSync(box.path('/var/log/lab-bootstrap.log'), `${'\u001b[31mé"\\\t'.repeat(3000)}\n`);
    box.writeBootstrap(defaults, FAST);
    const step = join(box.bootstrapDir, 'steps', '01-cost-guard.sh');
    writeFileSync(
      step,
      readFileSync(step, 'utf8').replace(
        'arm_cost_guard() {',
        'arm_cost_guard() {\n  false_command_for_the_test --flag',
      ),
    );
    const run = box.runFile(join(box.bootstrapDir, 'main.sh'), { ...ENV, LAB_MANIFESTS_DIR: box.root });
    expect(run.status).toBe(127);
    const [signal] = box.signals();
    expect(signal?.body.Reason).toMatch(/exit code 127 from: false_command_for_the_test --flag \(line \d+\)/);
    expect(signal?.raw.length).toBeLessThan(4000);
  });

  test('without its environment it stops before doing anything and leaves the signal to the launcher', () => {
    const box = makeSandbox();
    const result = box.bootstrap(defaults, { LAB_REGION: 'us-west-2' });
    expect(result.status).toBe(2);
    expect(box.log()).toContain(
      'environment variables missing: WAIT_HANDLE_URL LAB_RESULTS_BUCKET LAB_STACK_NAME LAB_MANIFESTS_DIR',
    );
    expect(box.calls()).toEqual([]);
    expect(box.signals()).toEqual([]);
  });
});

describe('runner.terminateWhenDone (the watcher itself: bootstrap-terminate.test.ts)', () => {
  test('runner.terminateWhenDone: the bootstrap installs the watcher and its timer', () => {
    // otherRehearsal's configuration has it (otherWithAiGateway).
    const { box, result, calls } = otherRehearsal();
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain('systemctl enable --now lab-terminate-when-done.timer');
    expect(readFileSync(box.path(TERMINATE_WHEN_DONE_SCRIPT), 'utf8')).toContain(
      readFileSync(join(BOOTSTRAP_SOURCES, 'host', 'lab-terminate-when-done.sh'), 'utf8'),
    );
    const timer = readFileSync(box.path('/etc/systemd/system/lab-terminate-when-done.timer'), 'utf8');
    expect(timer).toContain('OnUnitActiveSec=1min');
    const service = readFileSync(box.path('/etc/systemd/system/lab-terminate-when-done.service'), 'utf8');
    expect(service).toContain(`ExecStart=${box.path(TERMINATE_WHEN_DONE_SCRIPT)}`);
  });
});

describe('4. the ready signal is delivered or the failure is known', () => {
  test('a 403 from the WaitCondition URL is retried until the signal is accepted', () => {
    // The WaitCondition of defaultRehearsal's first boot refuses the first two.
    const { first, afterFirst } = defaultRehearsal();
    expect(first.result.status, afterFirst.log).toBe(0);
    expect(afterFirst.log).toContain('the SUCCESS signal was not accepted (attempt 1 of 5)');
    expect(afterFirst.log).toContain('the SUCCESS signal was not accepted (attempt 2 of 5)');
    expect(afterFirst.log).toContain('the SUCCESS signal reached the WaitCondition');
    expect(afterFirst.signals).toHaveLength(1);
    expect(afterFirst.signalled).toBe(true);
    expect(afterFirst.ready).toBe(true);
  });

  test('a signal refused every time is not counted as delivered, and the bootstrap fails', () => {
    const { box, result, calls } = rehearse(
      defaults,
      { FAKE_SIGNAL_403: '99' },
      launcherDeadline,
      onlySteps(STEPS, ['signal_success']),
    );
    expect(result.status).toBe(1);
    expect(box.signals()).toEqual([]);
    expect(existsSync(box.path('/opt/lab/signalled'))).toBe(false);
    expect(existsSync(box.path(READY_MARKER))).toBe(false);
    expect(box.log()).toContain('could not deliver the SUCCESS signal to the WaitCondition');
    expect(STEPS.at(-1)?.name).toBe('signal_success');
    expect(box.log()).toContain(
      `FAILED ${stepMarker(0, 1, 'signal SUCCESS to the WaitCondition')}: could not deliver`,
    );
    // Five tries for SUCCESS, five for the FAILURE that follows; the log still reaches S3.
    expect(calls.filter((c) => c.startsWith('curl -sS --fail --max-time 60 -X PUT'))).toHaveLength(10);
    expect(box.awsRequests()).toContain(LOG_PUT);
  });
});

describe('5. the OS cannot derail the boot or the study', () => {
  test('the apt timers are off for the host’s life and the NVIDIA and CUDA packages are held', () => {
    const { box, first, afterFirst } = defaultRehearsal();
    const { result, calls, index } = first;
    expect(result.status, afterFirst.log).toBe(0);
    const disable = index(/^systemctl disable --now apt-daily\.timer apt-daily-upgrade\.timer$/);
    expect(disable).toBeGreaterThan(-1);
    expect(readFileSync(box.path('/etc/apt/apt.conf.d/99lab-no-periodic'), 'utf8')).toContain(
      'APT::Periodic::Unattended-Upgrade "0";',
    );
    // Held once apt is idle, before K3s or anything else is installed.
    const hold = index(/^apt-mark hold /);
    expect(calls[hold]).toBe('apt-mark hold nvidia-driver-550 libnvidia-compute-550 cuda-toolkit-12-4');
    expect(hold).toBeGreaterThan(index(/^fuser /));
    expect(hold).toBeLessThan(index(/^k3s-install/));
    expect(afterFirst.log).toContain('held 3 NVIDIA/CUDA package(s) at their versions');
  });
});

describe('6. the cost guard survives a reboot', () => {
  const END_NOW = 'systemctl start --no-block lab-deadline.service';
  test('a persistent timer on the absolute deadline, kept when the bootstrap runs again', () => {
    const { box, first, second, started, ended, afterFirst, secondLog } = defaultRehearsal();
    expect(first.result.status, afterFirst.log).toBe(0);
    const { deadline, timer } = afterFirst;
    const [, date, time] = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)Z$/.exec(deadline) ?? [];
    expect(timer).toContain(`OnCalendar=${date} ${time} UTC`);
    expect(timer).toContain('Persistent=true');
    expect(timer).toContain('WantedBy=timers.target');
    // Nothing that lives in /run: no shutdown -h +N; the launcher's is cancelled.
    expect(first.calls.filter((c) => c.startsWith('shutdown'))).toEqual([
      'shutdown -c the lab cost guard timer takes over',
    ]);
    // The lifetime from the moment of the first boot, whenever during the run that was (the
    // deadline has whole seconds).
    expect(Date.parse(deadline)).toBeGreaterThanOrEqual(started + 480 * 60_000);
    expect(Date.parse(deadline)).toBeLessThanOrEqual(ended + 480 * 60_000);

    // A second boot of the same host: the deadline stays the first one.
    expect(second.result.status, box.log()).toBe(0);
    expect(readFileSync(box.path('/opt/lab/deadline'), 'utf8').trim()).toBe(deadline);
    expect(readFileSync(box.path('/etc/systemd/system/lab-deadline.timer'), 'utf8')).toBe(timer);
    expect(afterFirst.log).not.toContain('keeping the deadline set at first boot');
    expect(secondLog).toContain(`keeping the deadline set at first boot: ${deadline}`);
    // A deadline ahead: the timer alone ends the host.
    expect(first.calls).not.toContain(END_NOW);
  });

  // A calendar timer whose only time has passed when it is first started never fires
  // (docs/facts.md §2.8): the host would bill on with nothing to end it.
  test('a deadline already past when step 1 arms the timer ends the host at once', () => {
    const { box, result, calls } = rehearse(
      defaults,
      {},
      (b) => writeFileSync(b.path('/opt/lab/deadline'), '2020-01-01T00:00:00Z\n'),
      onlySteps(STEPS, ['arm_cost_guard']),
    );
    expect(result.status, box.log()).toBe(0);
    expect(calls.indexOf(END_NOW)).toBeGreaterThan(
      calls.indexOf('systemctl enable --now lab-deadline.timer'),
    );
    expect(box.log()).toContain('the deadline 2020-01-01T00:00:00Z has already passed: ending the host now');
  });

  test('at the deadline the results and the log are uploaded before the host shuts down', () => {
    // otherRehearsal's host: defaultRehearsal's second boot changed host.json since the last sync.
    const { box, result } = otherRehearsal();
    expect(result.status, box.log()).toBe(0);
    const before = box.calls().length;
    const requests = box.awsRequests().length;
    const fired = box.runFile(box.path(DEADLINE_SCRIPT));
    expect(fired.status).toBe(0);
    const calls = box.calls().slice(before);
    // The results sync (the log changed: it says the lifetime is reached), then the log itself.
    expect(box.awsRequests().slice(requests)).toEqual([LOG_PUT, LOG_PUT]);
    expect(box.s3Object('results-bucket/LlmGatewayLab/host/bootstrap.log')).toContain('lab lifetime reached');
    expect(calls.at(-1)).toBe(
      'shutdown -h now lab lifetime reached (instance.maxLifetimeHours): results uploaded, terminating',
    );
    expect(calls.filter((c) => c.startsWith('shutdown'))).toHaveLength(1);
    const service = readFileSync(box.path('/etc/systemd/system/lab-deadline.service'), 'utf8');
    expect(service).toContain(`ExecStart=${box.path(DEADLINE_SCRIPT)}`);
  });

  // set -e ended the script at its first log line when tee could not write (a full root disk: the
  // model and the images live there), before the shutdown: the host ran on past its deadline.
  // A folder stands in for the log: every write to it fails, as on a full disk. Not /dev/full,
  // which the other host scripts' tests use: this script also copies the log into the results,
  // and reading /dev/full never ends (the copy filled the machine's disk).
  test('on a full disk the deadline still shuts the host down', () => {
    const box = makeSandbox();
    const unwritable = join(box.root, 'unwritable-log');
    mkdirSync(unwritable);
    box.writeBootstrap(defaults, { LOG_FILE: unwritable });
    box.fake(RESULTS_SYNC_SCRIPT, 'exit 0');
    box.fake(LOG_UPLOAD_SCRIPT, 'exit 0');
    const fired = box.runFile(join(box.bootstrapDir, 'host', 'lab-deadline.sh'), {
      LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
    });
    expect(fired.stderr).toContain(`tee: ${unwritable}: Is a directory`);
    expect(fired.stdout).toContain('lab lifetime reached (instance.maxLifetimeHours, deadline unknown)');
    expect(box.calls().map((c) => c.trim())).toEqual([
      'lab-sync-results',
      'lab-upload-log',
      'shutdown -h now lab lifetime reached (instance.maxLifetimeHours): results uploaded, terminating',
    ]);
  });
});

describe('7. diagnosis', () => {
  test('K3s without the nvidia runtime in its containerd config fails step 6, though the RuntimeClass exists', () => {
    const { box, result, calls } = rehearse(
      defaults,
      { FAKE_NO_NVIDIA_RUNTIME: '1' },
      undefined,
      onlySteps(STEPS, ['install_k3s', 'prefetch']),
    );
    expect(result.status).toBe(1);
    expect(STEPS[5]?.name).toBe('install_k3s');
    // kubectl get runtimeclass would have answered: the static manifest creates it anyway.
    expect(calls.some((c) => c.startsWith('kubectl get runtimeclass'))).toBe(false);
    const [signal] = box.signals();
    // Nothing after the step: the model is not pre-fetched.
    expect(calls.some((c) => c.includes('lab-model-prefetch'))).toBe(false);
    expect(signal?.body.Reason).toMatch(
      /^\[step 1\/2\] install K3s .* failed: K3s's containerd has no nvidia runtime: \S+\/var\/lib\/rancher\/k3s\/agent\/etc\/containerd\/config\.toml lacks a runtimes "nvidia" table/,
    );
  });

  test('a step that hangs is ended at its budget; the reason names it and where the log is, which is uploaded', async () => {
    const { box, result, calls } = await hangs().rollout;
    expect(result.status).toBe(1);
    expect(STEPS[10]?.name).toBe('wait_for_replicas');
    // Ended, not waited out: the hanging command started and never got to its end (30 s). Asserted
    // on what happened, not on elapsed time, which a loaded machine stretches.
    expect(calls).toContainEqual(expect.stringMatching(/^kubectl -n vllm rollout status statefulset\//));
    expect(calls.filter((c) => c.startsWith('hang-over'))).toEqual([]);
    // The step after it never ran.
    expect(calls.some((c) => c.includes(' exec '))).toBe(false);
    const [signal] = box.signals();
    expect(signal?.body.Status).toBe('FAILURE');
    expect(signal?.body.Reason).toMatch(
      /^\[step 1\/2\] wait for 2 vLLM replica\(s\) .* failed: the step ran out of its budget of 0 min 2 s \(the step budgets share instance\.readyTimeoutMinutes\)\nfull log: s3:\/\/results-bucket\/LlmGatewayLab\/host\/bootstrap\.log\n/,
    );
    expect(box.awsRequests()).toContain(LOG_PUT);
  });

  // Bash reads a command substitution to its end, and what runs below one (the commands of a
  // pipeline in it, or what the command it runs starts: the fake kubectl's sleep) are the
  // bootstrap's grandchildren: the watchdog ended only its children, so a hanging kubectl exec in
  // record_gpu_uuids' `$(kubectl exec ... | sed ...)` kept the bootstrap from its TERM trap until
  // the hang ended (here 30 s; on a host, maybe never). Only this step runs, with a 2 s budget.
  test('a hang inside a command substitution is ended at the budget too', async () => {
    const { box, result, calls } = await hangs().substitution;
    expect(result.status).toBe(1);
    expect(calls).toContainEqual(expect.stringMatching(/^kubectl -n vllm exec \S+ -- nvidia-smi -L$/));
    expect(calls.filter((c) => c.startsWith('hang-over'))).toEqual([]);
    const [signal] = box.signals();
    expect(signal?.body.Reason).toMatch(
      /^\[step 1\/2\] .* failed: the step ran out of its budget of 0 min 2 s /,
    );
  });

  test('the bootstrap log reaches S3 on a timer, so a WaitCondition timeout leaves it readable', () => {
    const { box, first } = defaultRehearsal();
    expect(first.result.status, box.log()).toBe(0);
    const timer = readFileSync(box.path('/etc/systemd/system/lab-log-upload.timer'), 'utf8');
    expect(timer).toContain('OnUnitActiveSec=2min');
    expect(box.calls()).toContain('systemctl enable --now lab-log-upload.timer');
    const before = box.awsRequests().length;
    expect(box.runFile(box.path('/usr/local/sbin/lab-upload-log')).status).toBe(0);
    expect(box.awsRequests().slice(before)).toEqual([LOG_PUT]);
    expect(box.log()).toContain(`bootstrap log: ${LOG_OBJECT} every 2 minutes`);
  });
});
