import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import {
  BOOTSTRAP_SOURCES,
  bootstrapSteps,
  renderSettings,
  sharegptHostPath,
} from '../../../lib/aws/bootstrap/bootstrap.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { STEP_NAMES } from '../../../lib/facts/budgets.ts';
import { tempDir } from '../../temp.ts';
import { needs, SHELLCHECK } from '../../tools.ts';
import { configs, defaults, other } from './rehearse.ts';
import { shellcheck, shellcheckFiles } from './sandbox.ts';

// The bootstrap as files: shellcheck, the step table and settings.env. No bootstrap runs here
// (bootstrap.test.ts and bootstrap-terminate.test.ts rehearse it).

/** Every .sh file of the bootstrap, as it is in the repository. */
function shellFiles(dir = BOOTSTRAP_SOURCES): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? shellFiles(join(dir, entry.name))
      : entry.name.endsWith('.sh')
        ? [join(dir, entry.name)]
        : [],
  );
}

const checkShell = needs(SHELLCHECK, import.meta.url, 'the shellcheck tests');

describe('the bootstrap as a shell program', () => {
  test.runIf(checkShell)('every .sh file passes shellcheck, following what it sources', () => {
    const files = shellFiles();
    expect(files.map((f) => f.slice(BOOTSTRAP_SOURCES.length)).sort()).toEqual([
      'helpers.sh',
      'host/lab-aws.sh',
      'host/lab-deadline.sh',
      'host/lab-follow-server.sh',
      'host/lab-sync-results.sh',
      'host/lab-terminate-when-done.sh',
      'host/lab-upload-log.sh',
      'main.sh',
      'steps/01-cost-guard.sh',
      'steps/02-os-updates.sh',
      'steps/03-preflight.sh',
      'steps/04-gpus.sh',
      'steps/05-k3s.sh',
      'steps/06-prefetch.sh',
      'steps/07-apply.sh',
      'steps/08-replicas.sh',
      'steps/09-signal.sh',
      'steps/20-network-cell.sh',
      'steps/30-cluster.sh',
    ]);
    expect(shellcheckFiles(files)).toBe('');
  });

  test.runIf(checkShell).each(configs)('the settings of the %s config pass shellcheck', (_, config) => {
    expect(shellcheck(renderSettings(config))).toBe('');
  });

  test('bootstrap.ts renders settings and assembles the folder, and holds no bash body', () => {
    const source = readFileSync(join(BOOTSTRAP_SOURCES, '..', 'bootstrap.ts'), 'utf8');
    expect(source).not.toMatch(/^\s*[a-z_]+\(\) \{/m);
    expect(source).not.toMatch(/set -[Eeuo]+/);
    expect(source).not.toContain('<<');
  });

  test('every step has a bash function, and every step function is in the table', () => {
    const defined = shellFiles()
      .flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/^([a-z0-9_]+)\(\) \{/gm)])
      .map((m) => m[1]);
    for (const name of STEP_NAMES) expect(defined).toContain(name);
  });

  test('every curl has --max-time', () => {
    const curls = shellFiles()
      .flatMap((f) => readFileSync(f, 'utf8').split('\n'))
      .filter((line) => /(^|[\s(|&])curl -/.test(line) && !line.trim().startsWith('#'));
    expect(curls.length).toBeGreaterThan(5);
    for (const line of curls) expect(line).toContain('--max-time');
  });
});

describe("the bootstrap's watchdog", () => {
  // One process for the whole bootstrap, armed with each step's budget and disarmed at the step's
  // end (helpers.sh). A bash that ignores TERM from its start shows the exit deterministically: a
  // TERM that reaches the watchdog before its trap is set can be lost (bash 5.2: about 1 in 150),
  // so end_watchdog must still end it at once, with KILL. The budgets are fractions of a second
  // (the watchdog waits in `read -t`, which takes them as it takes the product's whole seconds):
  // the waits here are real time, which holds a test worker. The step that must not run out keeps
  // 0.5 s between its start and its end, two builtins apart, for a loaded machine.
  test('a step that ended is never over budget, the exit ends it at once, and a step that runs out is', () => {
    const work = tempDir('lab-watchdog-');
    const script = join(work, 'steps.sh');
    writeFileSync(
      script,
      [
        `WORK_DIR='${work}'`,
        `source '${join(BOOTSTRAP_SOURCES, 'helpers.sh')}'`,
        // A step that ends within its 0.5 s budget, then 1 s between steps: nothing runs out.
        'start_watchdog 0.5',
        'watchdog=$WATCHDOG_PID',
        'stop_watchdog',
        'sleep 1',
        'if [ -e "$WORK_DIR/over-budget" ]; then echo "over budget after its step ended"; fi',
        // The next step, on the same watchdog; the bootstrap exits while it waits.
        'start_watchdog 0.2',
        'if [ "$WATCHDOG_PID" = "$watchdog" ]; then echo "one watchdog"; fi',
        'stop_watchdog',
        'end_watchdog',
        'if kill -0 "$watchdog" 2>/dev/null; then echo "watchdog still running"; fi',
        // A step that runs past its 0.2 s.
        'start_watchdog 0.2',
        'for ((i = 0; i < 100; i++)); do if [ -e "$WORK_DIR/over-budget" ]; then echo "over budget"; break; fi; sleep 0.1; done',
        'end_watchdog',
        'echo stopped',
      ].join('\n'),
    );
    const result = spawnSync('bash', ['-c', `trap '' TERM; exec bash '${script}'`], { encoding: 'utf8' });
    expect(result.stdout).toBe('one watchdog\nover budget\nstopped\n');
  });

  // The watchdog's subshell inherits set -e: when its over-budget marker could not be written (a
  // full or read-only disk; here a link into a folder that does not exist), it ended there without
  // ending the step, which then ran on unbounded. The step's command outlasting the 0.2 s budget
  // by far shows whether it was ended ("hang-over" only if not).
  test('ends its step even when it cannot write its marker', () => {
    const work = tempDir('lab-watchdog-');
    symlinkSync(join(work, 'missing', 'over-budget'), join(work, 'over-budget'));
    const script = join(work, 'hang.sh');
    writeFileSync(
      script,
      [
        'set -Eeuo pipefail',
        `WORK_DIR='${work}'`,
        `source '${join(BOOTSTRAP_SOURCES, 'helpers.sh')}'`,
        "trap 'echo ended; exit 1' TERM",
        'start_watchdog 0.2',
        'sleep 20',
        'echo hang-over',
      ].join('\n'),
    );
    const result = spawnSync('bash', [script], { encoding: 'utf8' });
    expect(result.stdout).toBe('ended\n');
  });
});

describe.each(configs)('settings.env (%s)', (_, config) => {
  const settings = renderSettings(config);

  test('holds the values of the configuration', () => {
    expect(settings).toContain(`LIFETIME_MINUTES=${config.instance.maxLifetimeHours * 60}`);
    expect(settings).toContain(`EXPECTED_GPUS=${config.instance.gpus}`);
    expect(settings).toContain(`K3S_VERSION='${config.k3s.version}'`);
    // The server is a gpu node, found by its host label (issue 17); no agent token without agents.
    expect(settings).toContain(
      `K3S_EXEC='--write-kubeconfig-mode 644 --disable traefik --node-label llm-gateway-lab/node-role=gpu --node-label llm-gateway-lab/host=server'`,
    );
    expect(settings).toContain('AGENT_HOSTS=()');
    expect(settings).toContain(`MODEL_NAME='${config.model.name}'`);
    expect(settings).toContain(`REPLICAS=${config.vllm.replicas}`);
    expect(settings).toContain(`CONTAINERD_CONFIG='/var/lib/rancher/k3s/agent/etc/containerd/config.toml'`);
    expect(settings).toContain(`HELD_PACKAGES_PATTERN='^(nvidia|libnvidia|cuda)'`);
  });

  test('lists the steps in dependency order, each with its budget', () => {
    const steps = bootstrapSteps(config);
    expect(steps.map((s) => s.name)).toEqual([...STEP_NAMES]);
    expect(steps.map((s) => s.title)).toEqual([
      `arm the cost guard: shut down in ${config.instance.maxLifetimeHours * 60} min (instance.maxLifetimeHours ${config.instance.maxLifetimeHours}), results to S3`,
      'hold OS updates: apt timers off, NVIDIA/CUDA packages held, apt/dpkg idle',
      'preflight: tools, manifests folder, prerequisites resolve',
      `check the GPUs: nvidia-smi lists ${config.instance.gpus} (instance.gpus)`,
      'check nvidia-container-runtime (K3s needs it for the nvidia runtime)',
      `install K3s ${config.k3s.version}, check its containerd has the nvidia runtime and RuntimeClass nvidia`,
      `pre-fetch ${config.model.name} and the ShareGPT file into the shared cache; pull images in parallel`,
      'apply the prerequisites of prerequisites.json in order, waiting for their CRDs and Deployments',
      'apply the lab charts (NN-*.yaml) in file-name order, not jobs/, with their after-apply steps',
      `wait for the device plugin: ${config.instance.gpus} allocatable nvidia.com/gpu`,
      expect.stringMatching(/^wait for \d+ vLLM replica\(s\) .* to be Ready and serve \/v1\/models$/),
      'record the GPU UUID of every replica and check they are distinct',
      'signal SUCCESS to the WaitCondition',
    ]);
    const total = steps.reduce((sum, s) => sum + s.budgetSeconds, 0);
    expect(total).toBeLessThanOrEqual((config.instance.readyTimeoutMinutes - 4) * 60);
    expect(settings).toContain(`STEP_BUDGETS=(${steps.map((s) => s.budgetSeconds).join(' ')})`);
  });
});

test('the replica sets waited for follow the optional arms', () => {
  expect(renderSettings(defaults)).toContain("REPLICA_SETS=('qwen3')");
  expect(renderSettings(other)).toContain("REPLICA_SETS=('qwen3' 'qwen3-kv')");
  expect(bootstrapSteps(other)[10]?.title).toBe(
    'wait for 6 vLLM replica(s) (qwen3, qwen3-kv) to be Ready and serve /v1/models',
  );
});

test('the ShareGPT file goes to the host side of the shared cache, or nowhere without the control', () => {
  expect(sharegptHostPath(defaults)).toBe(
    '/var/lib/lab/models/datasets/ShareGPT_V3_unfiltered_cleaned_split.json',
  );
  const noControl = renderSettings(parseLabConfig({ study: { sharegptControl: false } }));
  expect(noControl).toContain("SHAREGPT_FILE=''");
  expect(() =>
    sharegptHostPath(parseLabConfig({ benchmark: { sharegptPath: '/data/sharegpt.json' } })),
  ).toThrow(/benchmark.sharegptPath must lie in the shared cache \/models\//);
});
