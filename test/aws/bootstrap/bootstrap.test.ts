import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import {
  bootstrapSteps,
  READY_MARKER,
  renderBootstrap,
  renderTerminateWhenDone,
  sharegptHostPath,
  TERMINATE_WHEN_DONE_SCRIPT,
} from '../../../lib/aws/bootstrap/bootstrap.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { makeSandbox, type Sandbox, shellcheck, shellcheckAvailable } from './sandbox.ts';

const defaults = parseLabConfig({});
/** Another K3s line, three replicas and llm-d's second set: six GPUs, so a g6.48xlarge. */
const other = parseLabConfig({
  instance: { type: 'g6.48xlarge', gpus: 8, vcpus: 192, memoryGiB: 768, pricePerHourUsd: 13.35 },
  k3s: { version: 'v1.35.2+k3s1' },
  vllm: { replicas: 3 },
  workload: { partitionSeeds: [1, 2, 3] },
  study: { optionalArms: ['llmd-precise'] },
});
const aiGateway = parseLabConfig({ study: { optionalArms: ['ai-gateway'] } });

const configs: [string, LabConfig][] = [
  ['default', defaults],
  ['3 replicas, llmd-precise, K3s v1.35.2', other],
  ['ai-gateway', aiGateway],
];

/** The step titles in the order main runs them. */
function runSteps(script: string): string[] {
  return [...script.matchAll(/^ {2}run_step (\d+) '([^']*)' \w+$/gm)].map((m) => `${m[1]} ${m[2]}`);
}

describe.each(configs)('renderBootstrap (%s)', (_, config) => {
  const script = renderBootstrap(config);

  test.skipIf(!shellcheckAvailable && !process.env.CI)('passes shellcheck', () => {
    expect(shellcheck(script)).toBe('');
  });

  test('is a strict bash script run as main, every step logged with a marker', () => {
    expect(script.startsWith('#!/bin/bash\n')).toBe(true);
    expect(script).toContain('set -Eeuo pipefail');
    expect(script).toContain(`readonly LOG_FILE='/var/log/lab-bootstrap.log'`);
    expect(script).toContain('log "==> $CURRENT_STEP"');
    expect(script).toContain('CURRENT_STEP="[step $1/$TOTAL_STEPS] $2"');
  });

  test('runs the steps in dependency order', () => {
    expect(runSteps(script)).toEqual([
      `1 arm the cost guard: shut down in ${config.instance.maxLifetimeHours * 60} min (instance.maxLifetimeHours ${config.instance.maxLifetimeHours}), results to S3`,
      '2 wait for the apt/dpkg locks (cloud-init, unattended-upgrades)',
      '3 preflight: tools, manifests folder, prerequisites resolve',
      `4 check the GPUs: nvidia-smi lists ${config.instance.gpus} (instance.gpus)`,
      '5 check nvidia-container-runtime (K3s needs it for the nvidia RuntimeClass)',
      `6 install K3s ${config.k3s.version} and check RuntimeClass nvidia`,
      `7 pre-fetch ${config.model.name} and the ShareGPT file into the shared cache; pull images in parallel`,
      '8 apply the prerequisites of prerequisites.json in order, waiting for their CRDs and Deployments',
      '9 apply the lab charts (NN-*.yaml) in file-name order, not jobs/, with their after-apply steps',
      `10 wait for the device plugin: ${config.instance.gpus} allocatable nvidia.com/gpu`,
      expect.stringMatching(/^11 wait for \d+ vLLM replica\(s\) .* to be Ready and serve \/v1\/models$/),
      '12 record the GPU UUID of every replica and check they are distinct',
      '13 signal SUCCESS to the WaitCondition',
    ]);
    expect(script).toContain(`readonly TOTAL_STEPS=${bootstrapSteps(config).length}`);
  });

  test('renders the settings of the configuration', () => {
    expect(script).toContain(`readonly LIFETIME_MINUTES=${config.instance.maxLifetimeHours * 60}`);
    expect(script).toContain(`readonly EXPECTED_GPUS=${config.instance.gpus}`);
    expect(script).toContain(`readonly K3S_VERSION='${config.k3s.version}'`);
    expect(script).toContain(`readonly K3S_EXEC='--write-kubeconfig-mode 644 --disable traefik'`);
    expect(script).toContain(`readonly MODEL_NAME='${config.model.name}'`);
    expect(script).toContain(`readonly REPLICAS=${config.vllm.replicas}`);
    expect(script).toContain('shutdown -h "+$LIFETIME_MINUTES"');
    expect(script).toContain('INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC"');
    expect(script).toContain('kubectl get runtimeclass "$RUNTIME_CLASS"');
    expect(script).toContain('"$LAB_MANIFESTS_DIR/prerequisites.json"');
    expect(script).toContain('for file in "$LAB_MANIFESTS_DIR"/[0-9]*.yaml; do');
    expect(script).toContain('replicas share a physical GPU');
  });
});

test('the replica sets waited for follow the optional arms', () => {
  expect(renderBootstrap(defaults)).toContain("readonly REPLICA_SETS=('qwen3')");
  expect(renderBootstrap(other)).toContain("readonly REPLICA_SETS=('qwen3' 'qwen3-kv')");
  expect(runSteps(renderBootstrap(other))[10]).toBe(
    '11 wait for 6 vLLM replica(s) (qwen3, qwen3-kv) to be Ready and serve /v1/models',
  );
});

test('the ShareGPT file goes to the host side of the shared cache, or nowhere without the control', () => {
  expect(sharegptHostPath(defaults)).toBe(
    '/var/lib/lab/models/datasets/ShareGPT_V3_unfiltered_cleaned_split.json',
  );
  const noControl = renderBootstrap(parseLabConfig({ study: { sharegptControl: false } }));
  expect(noControl).toContain("readonly SHAREGPT_FILE=''");
  expect(() =>
    sharegptHostPath(parseLabConfig({ benchmark: { sharegptPath: '/data/sharegpt.json' } })),
  ).toThrow(/benchmark.sharegptPath must lie in the shared cache \/models\//);
});

/** A bootstrap run against fake system commands and a manifests folder synthesized from the config. */
function rehearse(config: LabConfig, fakes: Record<string, string> = {}, prepare?: (box: Sandbox) => void) {
  const box = makeSandbox();
  const manifests = mkdtempSync(join(tmpdir(), 'lab-manifests-'));
  synthesizeCluster(config, manifests);
  prepare?.(box);
  const gpus = String(config.instance.gpus);
  const result = box.run(renderBootstrap(config), {
    WAIT_HANDLE_URL: 'https://wait.example/handle?X-Amz-Signature=secret',
    LAB_REGION: 'us-west-2',
    LAB_RESULTS_BUCKET: 'results-bucket',
    LAB_STACK_NAME: 'LlmGatewayLab',
    LAB_MANIFESTS_DIR: manifests,
    FAKE_GPUS: gpus,
    FAKE_ALLOCATABLE: gpus,
    FAKE_SERVED: config.model.servedName,
    ...fakes,
  });
  const calls = box.calls();
  const index = (pattern: RegExp) => calls.findIndex((c) => pattern.test(c));
  return { box, result, calls, index, manifests };
}

describe('waiting for apt at first boot', () => {
  // unattended-upgrade-shutdown --wait-for-signal runs all the time under the process name
  // "unattended-upgr"; only the dpkg and apt locks say whether apt is busy.
  const fakePgrep = (box: Sandbox) =>
    writeFileSync(join(box.root, 'bin', 'pgrep'), '#!/bin/bash\necho "1234 unattended-upgr"\nexit 0\n');

  test('is not fooled by the always-running unattended-upgrades helper', () => {
    const { box, result } = rehearse(defaults, {}, fakePgrep);
    expect(result.status, box.log()).toBe(0);
    expect(box.log()).toContain('apt and dpkg are idle');
  });

  test('waits while a lock is held', () => {
    const script = renderBootstrap(defaults).replace('then main "$@"; fi', 'then :; fi');
    const box = makeSandbox();
    writeFileSync(join(box.root, 'bin', 'fuser'), '#!/bin/bash\nexit 0\n');
    const held = box.run(`${script}\napt_is_idle && echo idle || echo busy\n`);
    expect(held.stdout.trim().split('\n').at(-1)).toBe('busy');
  });
});

describe('the bootstrap, rehearsed with fake system commands', () => {
  test('default config: every step in order, then SUCCESS with the GPU of each replica', () => {
    const { box, result, calls, index, manifests } = rehearse(defaults);
    expect(result.status, box.log()).toBe(0);

    const markers = [...box.log().matchAll(/==> \[step (\d+)\/13\]/g)].map((m) => Number(m[1]));
    expect(markers).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);

    // The cost guard comes first, results sync on a timer and at shutdown.
    expect(calls[0]).toMatch(/^shutdown -h \+480 /);
    expect(calls).toContain('systemctl enable --now lab-results-sync.timer lab-results-final-upload.service');
    const syncScript = readFileSync(box.path('/usr/local/sbin/lab-sync-results'), 'utf8');
    expect(syncScript).toMatch(
      /s3 sync \S+\/var\/lib\/lab\/results\/ s3:\/\/results-bucket\/LlmGatewayLab\/ --region us-west-2/,
    );
    expect(readFileSync(box.path('/opt/lab/deadline'), 'utf8')).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n$/,
    );

    expect(calls).toContain('k3s-install v1.36.4+k3s1|--write-kubeconfig-mode 644 --disable traefik');

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
    expect(calls).toContain('kubectl -n vllm rollout status statefulset/qwen3 --timeout=1200s');
    expect(calls.filter((c) => c.includes(' exec '))).toEqual([
      'kubectl -n vllm exec qwen3-0 -- nvidia-smi -L',
      'kubectl -n vllm exec qwen3-1 -- nvidia-smi -L',
    ]);
    expect(JSON.parse(readFileSync(box.path('/var/lib/lab/results/host/gpu-uuids.json'), 'utf8'))).toEqual({
      'qwen3-0': 'GPU-qwen3-0',
      'qwen3-1': 'GPU-qwen3-1',
    });
    expect(readFileSync(box.path('/var/lib/lab/results/host/nvidia-smi-topo.txt'), 'utf8')).toContain('GPU0');

    const signals = box.signals();
    expect(signals).toHaveLength(1);
    expect(signals[0].url).toBe('https://wait.example/handle?X-Amz-Signature=secret');
    expect(signals[0].body).toMatchObject({ Status: 'SUCCESS', UniqueId: 'bootstrap' });
    expect(signals[0].body.Data).toMatch(
      /^2 replicas ready on distinct GPUs: qwen3-0=GPU-qwen3-0 qwen3-1=GPU-qwen3-1; the instance shuts down at \d{4}-/,
    );
    expect(existsSync(box.path('/opt/lab/signalled'))).toBe(true);
    expect(existsSync(box.path(READY_MARKER))).toBe(true);
    expect(box.log()).not.toContain('X-Amz-Signature');

    // host.json for the study metadata, from IMDSv2 (the fake answers only with its token).
    expect(JSON.parse(readFileSync(box.path('/var/lib/lab/results/host/host.json'), 'utf8'))).toEqual({
      instanceType: 'g6.12xlarge',
      availabilityZone: 'us-west-2b',
      k3sVersion: 'v1.36.4+k3s1',
    });
    expect(box.log()).toContain('host: g6.12xlarge in us-west-2b, K3s v1.36.4+k3s1');
    // runner.terminateWhenDone is off by default: nothing watches for the end of the study.
    expect(calls.filter((c) => c.includes('lab-terminate-when-done'))).toEqual([]);
    expect(existsSync(box.path(TERMINATE_WHEN_DONE_SCRIPT))).toBe(false);
  });

  test('without the metadata service host.json still records the K3s version, and the bootstrap goes on', () => {
    const { box, result } = rehearse(defaults, { FAKE_NO_IMDS: '1' });
    expect(result.status, box.log()).toBe(0);
    expect(JSON.parse(readFileSync(box.path('/var/lib/lab/results/host/host.json'), 'utf8'))).toEqual({
      k3sVersion: 'v1.36.4+k3s1',
    });
    expect(box.log()).toContain('the instance metadata service did not answer');
  });

  test('3 replicas with llm-d: both sets awaited, six distinct GPUs, K3s v1.35.2', () => {
    const { box, result, calls } = rehearse(other);
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain('k3s-install v1.35.2+k3s1|--write-kubeconfig-mode 644 --disable traefik');
    expect(calls).toContain('kubectl -n vllm rollout status statefulset/qwen3-kv --timeout=1200s');
    const pods = calls.filter((c) => c.includes(' exec ')).map((c) => c.split(' ')[4]);
    expect(pods).toEqual(['qwen3-0', 'qwen3-1', 'qwen3-2', 'qwen3-kv-0', 'qwen3-kv-1', 'qwen3-kv-2']);
    expect(box.signals()[0].body.Data).toMatch(/^6 replicas ready on distinct GPUs/);
  });

  test('ai-gateway: Helm charts after Envoy Gateway is up, and its restart right after 70-ai-gateway-config', () => {
    const { box, result, calls, index } = rehearse(aiGateway, {}, (b) =>
      b.fake('/usr/local/bin/helm', 'exit 0'),
    );
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
    expect(calls[helm('upgrade --install aieg oci://')]).toContain(
      '--version v1.1.0 --namespace envoy-ai-gateway-system --create-namespace --wait --timeout 10m',
    );
    const restart = index(/^kubectl -n envoy-gateway-system rollout restart deployment\/envoy-gateway$/);
    expect(restart).toBeGreaterThan(index(/apply .*70-ai-gateway-config\.yaml$/));
    expect(restart).toBeLessThan(index(/apply .*71-ai-gateway\.yaml$/));
  });

  test('a wrong GPU count fails step 4 and signals FAILURE with the step and the log tail', () => {
    const { box, result, calls } = rehearse(defaults, { FAKE_GPUS: '3' });
    expect(result.status).toBe(1);
    expect(calls.some((c) => c.startsWith('k3s'))).toBe(false);
    const [signal] = box.signals();
    expect(signal.body).toMatchObject({
      Status: 'FAILURE',
      UniqueId: 'bootstrap',
      Data: '[step 4/13] check the GPUs: nvidia-smi lists 4 (instance.gpus)',
    });
    const reason = signal.body.Reason as string;
    expect(reason).toMatch(
      /^\[step 4\/13\] check the GPUs: .* failed: nvidia-smi -L lists 3 GPU\(s\), expected 4 \(instance.gpus for g6.12xlarge\)\n--- last lines of /,
    );
    expect(reason).toContain('GPU 2: NVIDIA L4 (UUID: GPU-host-2)');
    expect(signal.raw.length).toBeLessThan(4000);
    // The log goes with the results, which are uploaded at once.
    expect(existsSync(box.path('/var/lib/lab/results/host/bootstrap.log'))).toBe(true);
    expect(calls.some((c) => c.startsWith('aws s3 sync'))).toBe(true);
  });

  test('two replicas on one GPU fail step 12', () => {
    const { box, result } = rehearse(defaults, { FAKE_SHARED_GPU: '1' });
    expect(result.status).toBe(1);
    const [signal] = box.signals();
    expect(signal.body.Status).toBe('FAILURE');
    expect(signal.body.Reason).toMatch(
      /^\[step 12\/13\] .* failed: replicas share a physical GPU \(GPU-shared\)/,
    );
  });

  test('a failing command is named in the reason; a long, binary log tail stays valid and short', () => {
    const noisy = makeSandbox();
    // A log tail with colour codes, UTF-8, quotes, backslashes and tabs, far above the limit.
    writeFileSync(noisy.path('/var/log/lab-bootstrap.log'), `${'\u001b[31mé"\\\t'.repeat(3000)}\n`);
    const failing = renderBootstrap(defaults).replace(
      'arm_cost_guard() {',
      'arm_cost_guard() {\n  false_command_for_the_test --flag',
    );
    const run = noisy.run(failing, {
      WAIT_HANDLE_URL: 'https://wait.example/h',
      LAB_REGION: 'r',
      LAB_RESULTS_BUCKET: 'b',
      LAB_STACK_NAME: 's',
      LAB_MANIFESTS_DIR: noisy.root,
    });
    expect(run.status).toBe(127);
    const [signal] = noisy.signals();
    expect(signal.body.Reason).toMatch(/exit code 127 from: false_command_for_the_test --flag \(line \d+\)/);
    expect(signal.raw.length).toBeLessThan(4000);
  });

  test('without its environment it stops before doing anything and leaves the signal to the launcher', () => {
    const box = makeSandbox();
    const result = box.run(renderBootstrap(defaults), { LAB_REGION: 'us-west-2' });
    expect(result.status).toBe(2);
    expect(box.log()).toContain(
      'environment variables missing: WAIT_HANDLE_URL LAB_RESULTS_BUCKET LAB_STACK_NAME LAB_MANIFESTS_DIR',
    );
    expect(box.calls()).toEqual([]);
    expect(box.signals()).toEqual([]);
  });
});

describe('runner.terminateWhenDone', () => {
  const whenDone = parseLabConfig({ runner: { terminateWhenDone: true } });
  const script = renderBootstrap(whenDone);

  test.skipIf(!shellcheckAvailable && !process.env.CI)(
    'the bootstrap and the watcher pass shellcheck',
    () => {
      expect(shellcheck(script)).toBe('');
      expect(shellcheck(renderTerminateWhenDone())).toBe('');
    },
  );

  test('step 1 says so; the default script installs no watcher', () => {
    expect(runSteps(script)[0]).toBe(
      '1 arm the cost guard: shut down in 480 min (instance.maxLifetimeHours 8), results to S3; terminate when the study is done (runner.terminateWhenDone)',
    );
    expect(script).toContain('readonly TERMINATE_WHEN_DONE=1');
    expect(renderBootstrap(defaults)).toContain('readonly TERMINATE_WHEN_DONE=0');
  });

  test('the bootstrap installs the watcher script and its timer', () => {
    const { box, result, calls } = rehearse(whenDone);
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain('systemctl enable --now lab-terminate-when-done.timer');
    expect(readFileSync(box.path(TERMINATE_WHEN_DONE_SCRIPT), 'utf8')).toBe(
      box.relocate(renderTerminateWhenDone()),
    );
    const timer = readFileSync(box.path('/etc/systemd/system/lab-terminate-when-done.timer'), 'utf8');
    expect(timer).toContain('OnUnitActiveSec=1min');
    const service = readFileSync(box.path('/etc/systemd/system/lab-terminate-when-done.service'), 'utf8');
    expect(service).toContain(`ExecStart=${box.path(TERMINATE_WHEN_DONE_SCRIPT)}`);
  });

  /** Runs the watcher once with the given status.json (or none). */
  function watch(status?: Record<string, unknown>) {
    const box = makeSandbox();
    if (status) {
      mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
      writeFileSync(box.path('/var/lib/lab/results/status.json'), JSON.stringify(status));
    }
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 0');
    const result = box.run(renderTerminateWhenDone());
    return { box, result, calls: box.calls() };
  }

  test.each(['finished', 'failed'])('a %s study: results uploaded, then the host shuts down', (state) => {
    const { result, calls, box } = watch({ state, totalRuns: 25 });
    expect(result.status).toBe(0);
    expect(calls).toEqual([
      'lab-sync-results ',
      `shutdown -h now lab study ${state} (runner.terminateWhenDone): results uploaded, terminating`,
    ]);
    expect(box.log()).toContain(`the study is ${state} (runner.terminateWhenDone): uploading the results`);
  });

  test.each([
    ['no status.json yet', undefined],
    ['a running study', { state: 'running' }],
    ['a starting study', { state: 'starting' }],
  ])('%s: nothing happens', (_, status) => {
    const { result, calls } = watch(status);
    expect(result.status).toBe(0);
    expect(calls).toEqual([]);
  });

  test('a failed upload still shuts down (the shutdown hook uploads once more)', () => {
    const box = makeSandbox();
    mkdirSync(box.path('/var/lib/lab/results'), { recursive: true });
    writeFileSync(box.path('/var/lib/lab/results/status.json'), '{"state":"finished"}');
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 1');
    expect(box.run(renderTerminateWhenDone()).status).toBe(0);
    expect(box.calls()[1]).toMatch(/^shutdown -h now /);
    expect(box.log()).toContain('results upload failed');
  });
});
