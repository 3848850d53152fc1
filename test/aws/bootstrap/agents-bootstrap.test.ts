import { spawn } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import { agentBootstrapSteps, renderAgentSettings } from '../../../lib/aws/bootstrap/agent.ts';
import { bootstrapSteps, renderSettings } from '../../../lib/aws/bootstrap/bootstrap.ts';
import { agentNodes, type ClusterNode } from '../../../lib/config/cluster.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import { tempDir } from '../../temp.ts';
import { needs, SHELLCHECK } from '../../tools.ts';
import { onlySteps, stepMarker } from './only-steps.ts';
import { fakeCommand, makeSandbox, type Sandbox, shellcheck } from './sandbox.ts';

/** Issue 17's cluster: the GPU host as server, two GPU agents (one GPU each) and a CPU agent. */
const config = parseLabConfig({
  instance: { readyTimeoutMinutes: 60 },
  cluster: {
    agents: [
      { name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.xlarge' },
      { name: 'client', role: 'cpu', instanceType: 'c7i.4xlarge' },
    ],
  },
});
const [gpu1, , client1] = agentNodes(config) as [ClusterNode, ClusterNode, ClusterNode];

const SECRET = 'arn:aws:secretsmanager:us-west-2:123456789012:secret:ClusterAgentToken-AbCdEf';
const ENV = {
  WAIT_HANDLE_URL: 'https://wait.example/handle?X-Amz-Signature=secret',
  LAB_REGION: 'us-west-2',
  LAB_RESULTS_BUCKET: 'results-bucket',
  LAB_STACK_NAME: 'LlmGatewayLab',
  LAB_AGENT_TOKEN_SECRET: SECRET,
};
const AGENT_ENV = {
  ...ENV,
  LAB_SERVER_URL: 'https://10.0.1.23:6443',
  LAB_SERVER_INSTANCE_ID: 'i-0server0000000000',
  FAKE_INSTANCE_ID: 'i-0agent00000000001',
};
const ALL_JOINED = 'gpu-1=True:1 gpu-2=True:1 client-1=True:0';
/**
 * No waiting between signal retries. Polls 2 s apart: the fakes answer the first poll when all is
 * well. A wait that cannot succeed (`waitingStep` below) polls 1 s apart for about 3 s.
 */
const FAST = { WAIT_INTERVAL_SECONDS: '2', SIGNAL_RETRY_SECONDS: '0', AWS_RETRY_SECONDS: '0' };
/** Where a GPU agent reports its model cache to this server (the fake S3's bucket/key). */
const report = (host: string) =>
  `results-bucket/LlmGatewayLab/agents/${host}/model-cache/i-0server0000000000`;
const S3_URL = 'https://results-bucket.s3.us-west-2.amazonaws.com/';

/**
 * A step whose wait cannot succeed, run alone (with the step after it, to show it is never
 * reached): its budget cut to 30 s. The step's wait keeps the last 30 s of the budget to say what
 * is missing (30-cluster.sh WAIT_LIMIT), so it checks once, gives up and reports before the
 * watchdog would end the step with no more than "over budget". The product's own margin, on
 * purpose: under a load average of 30 one round of the server's checks (a signed GetObject per GPU
 * agent: a few dozen processes) took 15 s, and 6 s of margin failed often. A longer budget only
 * adds rounds that find the same thing missing (a 33 s budget polled about 4 times in 3 s: about a
 * hundred processes more per run). The runs start in the background (`waitingRuns`) while the
 * other runs use the CPU.
 */
function waitingStep(
  steps: readonly { name: string; title: string; budgetSeconds: number }[],
  names: readonly string[],
  waiting: string,
) {
  return { ...onlySteps(steps, names, { [waiting]: 30 }), WAIT_INTERVAL_SECONDS: '1' };
}

/** The cluster's manifests, synthesized once: the bootstrap only reads them. */
let synthesized: string | undefined;
function manifests(): string {
  if (!synthesized) {
    synthesized = tempDir('lab-manifests-');
    synthesizeCluster(config, synthesized);
  }
  return synthesized;
}

function rehearse(
  render: (c: LabConfig) => string,
  env: Record<string, string>,
  settings: Record<string, string> = {},
  prepare?: (box: Sandbox) => void,
) {
  const box = makeSandbox();
  prepare?.(box);
  const result = box.bootstrap(config, fullEnvironment(env), { ...FAST, ...settings }, render);
  return read(box, result);
}

type Run = ReturnType<typeof read>;

function fullEnvironment(env: Record<string, string>): Record<string, string> {
  return {
    LAB_MANIFESTS_DIR: manifests(),
    FAKE_SERVED: config.model.servedName,
    // No test here reads the modes of lab-aws's curl config files (a stat each; lab-aws.test.ts does).
    FAKE_CONFIG_MODES_UNREAD: '1',
    ...env,
  };
}

function read(box: Sandbox, result: { status: number | null }) {
  const calls = box.calls();
  const index = (pattern: RegExp) => calls.findIndex((c) => pattern.test(c));
  return { box, result, calls, index };
}

/** Where sandbox.ts's fake curl finds the fake S3 and Secrets Manager. */
const FAKE_AWS_PY = fileURLToPath(new URL('./fake_aws.py', import.meta.url));

/**
 * `rehearse` in the background: the same bootstrap folder and main.sh, with the environment
 * `Sandbox.runFile` gives (fakes first on the PATH), but not blocking this process, so that runs
 * waiting in real time wait together.
 */
function rehearseInBackground(
  render: (c: LabConfig) => string,
  env: Record<string, string>,
  settings: Record<string, string>,
  prepare?: (box: Sandbox) => void,
): Promise<Run> {
  const box = makeSandbox();
  prepare?.(box);
  box.writeBootstrap(config, { ...FAST, ...settings }, render);
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(box.bootstrapDir, 'main.sh')], {
      stdio: 'ignore',
      timeout: 600_000,
      env: {
        PATH: `${join(box.root, 'bin')}:${process.env.PATH}`,
        HOME: box.root,
        SANDBOX: box.root,
        FAKE_AWS_PY,
        ...fullEnvironment(env),
      },
    });
    child.on('error', reject);
    child.on('close', (status) => resolve(read(box, { status })));
  });
}

/** The server, with the model cache reports of the GPU agents in `reported` already in S3. */
const server = (
  fakes: Record<string, string> = {},
  settings: Record<string, string> = {},
  reported = ['gpu-1', 'gpu-2'],
) => rehearse(renderSettings, serverEnvironment(fakes), settings, reporting(reported));

const serverEnvironment = (fakes: Record<string, string>) => ({
  ...ENV,
  FAKE_GPUS: '4',
  FAKE_ALLOCATABLE: '4',
  FAKE_NODES: ALL_JOINED,
  ...fakes,
});
const reporting = (reported: readonly string[]) => (box: Sandbox) => {
  for (const host of reported) box.putS3Object(report(host), `{"host":"${host}"}`);
};

const agent = (
  node: ClusterNode,
  fakes: Record<string, string> = {},
  settings: Record<string, string> = {},
) => rehearse((c) => renderAgentSettings(c, node), agentEnvironment(node, fakes), settings);

const agentEnvironment = (node: ClusterNode, fakes: Record<string, string>) => ({
  ...AGENT_ENV,
  FAKE_GPUS: String(node.gpus),
  ...fakes,
});

const SERVER_STEPS = bootstrapSteps(config);
const GPU_AGENT_STEPS = agentBootstrapSteps(config, gpu1);
/** The journal of an agent whose join the server refused. */
const REFUSED_JOURNAL = [
  'Nov 30 12:00:01 ip-10-0-1-40 k3s[812]: time="2026-11-30T12:00:01Z" level=info msg="Starting k3s agent v1.36.4+k3s1"',
  'Nov 30 12:00:02 ip-10-0-1-40 k3s[812]: time="2026-11-30T12:00:02Z" level=error msg="failed to get CA certs: https://127.0.0.1:6444/cacerts: 401 Unauthorized"',
].join('\\n');

/**
 * The runs whose step waits for what never comes (`waitingStep`), started together in the
 * background by the first rehearsed block and read by several tests each, in the file's last
 * block: their real-time waits (about 3 s each) pass while the blocks before it run the server and
 * the agents.
 */
let waiting: { agentsMissing: Promise<Run>; gpuMissing: Promise<Run>; joinRefused: Promise<Run> } | undefined;
function waitingRuns() {
  waiting ??= {
    // gpu-2 never joins; gpu-1 joined but has not reported its model cache (gpu-2's report is
    // there: a report alone does not make an agent ready); client-1, a CPU agent, needs none.
    agentsMissing: rehearseInBackground(
      renderSettings,
      serverEnvironment({ FAKE_NODES: 'gpu-1=True:1 client-1=True:0' }),
      waitingStep(SERVER_STEPS, ['wait_for_agents', 'apply_prerequisites'], 'wait_for_agents'),
      reporting(['gpu-2']),
    ),
    // Every agent ready; gpu-2's device plugin advertises no GPU.
    gpuMissing: rehearseInBackground(
      renderSettings,
      serverEnvironment({ FAKE_NODES: 'gpu-1=True:1 gpu-2=True:0 client-1=True:0' }),
      waitingStep(SERVER_STEPS, ['wait_for_device_plugin', 'wait_for_replicas'], 'wait_for_device_plugin'),
      reporting(['gpu-1', 'gpu-2']),
    ),
    joinRefused: rehearseInBackground(
      (c) => renderAgentSettings(c, gpu1),
      agentEnvironment(gpu1, { FAKE_JOIN_FAIL: '1', FAKE_JOURNAL: REFUSED_JOURNAL }),
      waitingStep(GPU_AGENT_STEPS, ['join_cluster', 'prefetch'], 'join_cluster'),
    ),
  };
  return waiting;
}

// Runs started for tests that a filter then left out still end before the file does (and before
// its folders are removed).
afterAll(async () => {
  if (waiting) await Promise.all(Object.values(waiting));
});

describe('settings of a cluster with agents', () => {
  test('the server starts K3s with the agent token file and its labels, and knows its agents', () => {
    const settings = renderSettings(config);
    expect(settings).toContain(
      "K3S_EXEC='--write-kubeconfig-mode 644 --disable traefik --node-label llm-gateway-lab/node-role=gpu --node-label llm-gateway-lab/host=server --agent-token-file /opt/lab/agent-token'",
    );
    expect(settings).toContain("AGENT_HOSTS=('gpu-1' 'gpu-2' 'client-1')");
    expect(settings).toContain('AGENT_GPUS=(1 1 0)');
    expect(settings).toMatch(/^REQUIRED_ENVIRONMENT=\(.*'LAB_AGENT_TOKEN_SECRET'\)$/m);
    expect(bootstrapSteps(config).map((s) => s.name)).toEqual([
      'arm_cost_guard',
      'hold_os_updates',
      'preflight',
      'check_gpus',
      'check_container_runtime',
      'install_k3s',
      'prefetch',
      'wait_for_agents',
      'apply_prerequisites',
      'apply_charts',
      'wait_for_device_plugin',
      'wait_for_replicas',
      'record_gpu_uuids',
      'signal_success',
    ]);
    // The budgets share the ready timeout, boot included.
    const total = bootstrapSteps(config).reduce((sum, s) => sum + s.budgetSeconds, 0);
    expect(total).toBeLessThanOrEqual((60 - 4) * 60);
  });

  test('a GPU agent checks its GPUs and fills its cache; a CPU agent joins and stages the wheelhouse', () => {
    expect(agentBootstrapSteps(config, gpu1).map((s) => s.name)).toEqual([
      'arm_cost_guard',
      'hold_os_updates',
      'check_gpus',
      'check_container_runtime',
      'join_cluster',
      'prefetch',
      'report_model_cache',
      'signal_success',
    ]);
    expect(agentBootstrapSteps(config, client1).map((s) => s.name)).toEqual([
      'arm_cost_guard',
      'hold_os_updates',
      'join_cluster',
      'prefetch',
      'signal_success',
    ]);
    const settings = renderAgentSettings(config, client1);
    expect(settings).toContain(
      "K3S_AGENT_EXEC='--node-label llm-gateway-lab/node-role=cpu --node-label llm-gateway-lab/host=client-1'",
    );
    expect(settings).toContain("RESULTS_SUBDIR='agents/client-1/'");
    expect(settings).toContain('TERMINATE_WHEN_DONE=0');
    expect(settings).toMatch(
      /^REQUIRED_ENVIRONMENT=\(.*'LAB_AGENT_TOKEN_SECRET' 'LAB_SERVER_URL' 'LAB_SERVER_INSTANCE_ID'\)$/m,
    );
  });

  test.runIf(needs(SHELLCHECK, import.meta.url, 'the shellcheck test'))(
    'the server and agent settings pass shellcheck',
    () => {
      expect(shellcheck(renderSettings(config))).toBe('');
      expect(shellcheck(renderAgentSettings(config, gpu1))).toBe('');
    },
  );
});

describe('the server of a cluster with agents, rehearsed', () => {
  beforeAll(() => {
    waitingRuns();
  });

  test('reads the token, waits for every agent and each GPU agent cache before applying, then for their GPUs', () => {
    const { box, result, calls, index } = server();
    expect(result.status, box.log()).toBe(0);
    // GetSecretValue signed by curl (no AWS CLI), the token only in its root-only file.
    expect(box.awsRequests()).toContain('POST secretsmanager secretsmanager.GetSecretValue');
    expect(calls.some((c) => c.startsWith('aws '))).toBe(false);
    const tokenFile = box.path('/opt/lab/agent-token');
    expect(readFileSync(tokenFile, 'utf8')).toBe('fake-agent-token');
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    const fetched = index(/^curl .*https:\/\/secretsmanager\.us-west-2\.amazonaws\.com\/$/);
    expect(fetched).toBeGreaterThan(-1);
    expect(index(/^k3s-install .*--agent-token-file .*\/opt\/lab\/agent-token$/)).toBeGreaterThan(fetched);
    expect(calls.join('\n')).not.toContain('fake-agent-token');
    // Each GPU agent's model cache report, keyed by this server, is read before anything is applied.
    for (const host of ['gpu-1', 'gpu-2']) {
      const read = index(
        new RegExp(`^curl .*${S3_URL}LlmGatewayLab/agents/${host}/model-cache/i-0server0000000000$`),
      );
      expect(read, host).toBeGreaterThan(-1);
      expect(read).toBeLessThan(index(/^kubectl apply/));
    }
    expect(calls.some((c) => c.includes('agents/client-1/model-cache'))).toBe(false);
    expect(box.log()).toContain('every agent is Ready; every GPU agent has its model cache');
    expect(box.log()).toContain('agent gpu-1: allocatable nvidia.com/gpu 1');
    expect(box.log()).toContain('agent gpu-2: allocatable nvidia.com/gpu 1');
    expect(box.log()).not.toContain('fake-agent-token');
    expect(box.signals().map((s) => s.body.Status)).toEqual(['SUCCESS']);
  });

  // `kubectl ... | grep -qx True` under pipefail: grep ends at the first True line, and kubectl,
  // still writing (a replaced agent's lingering node after the Ready one; kubectl writes each
  // value as it goes), dies of SIGPIPE, so a Ready agent counted as not Ready. A listing longer
  // than a pipe holds (1.7 MiB: more than the 1 MiB a pipe can be grown to, pipe-max-size) makes
  // that interleaving certain: its writer cannot finish before grep ends. Built by doubling a
  // string: a brace expansion of 200,000 words cost 0.9 s of CPU, this 0.2 s. The server lists
  // every agent's nodes at once (list_agent_nodes), so the listing names the host on each line.
  test('an agent whose Ready node is listed before others counts as Ready', () => {
    const box = makeSandbox();
    box.writeBootstrap(config);
    writeFileSync(
      join(box.root, 'bin', 'kubectl'),
      fakeCommand(
        `listing=$'gpu-1:False:\\n'; for _ in {1..17}; do listing+=$listing; done; printf 'gpu-1:True:1\\n%s' "$listing"`,
      ),
    );
    const result = box.run(
      `set -o pipefail\nsource '${join(box.bootstrapDir, 'main.sh')}'\nlist_agent_nodes\nif [ "\${AGENT_READY[gpu-1]:-}" = True ]; then echo "ready \${AGENT_NODE_GPUS[gpu-1]}"; else echo not-ready; fi\n`,
    );
    expect(result.stdout.trim(), result.stderr).toBe('ready 1');
  });

  test('a token it may not read fails the K3s step with the cause', () => {
    const { box, result, calls } = server(
      { FAKE_SECRET_DENIED: '1' },
      onlySteps(SERVER_STEPS, ['install_k3s', 'prefetch']),
    );
    expect(result.status).not.toBe(0);
    expect(box.signals()[0]?.body.Reason).toContain(
      `cannot read the K3s agent token from Secrets Manager (${SECRET}): GetSecretValue ${SECRET}: HTTP 400 AccessDeniedException: User is not authorized to perform: secretsmanager:GetSecretValue`,
    );
    // K3s is not installed without its token.
    expect(calls.some((c) => c.startsWith('k3s-install'))).toBe(false);
  });
});

/** The CPU agent's bootstrap, run once for the tests that read it (or only what runs after it). */
let cpuAgentRun: ReturnType<typeof agent> | undefined;
const cpuAgent = () => {
  cpuAgentRun ??= agent(client1);
  return cpuAgentRun;
};

describe('a K3s agent, rehearsed', () => {
  beforeAll(() => {
    waitingRuns();
  });

  test('a GPU agent joins with the token, fills its cache, reports it to the server and signals', () => {
    const { box, result, calls, index } = agent(gpu1);
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain(
      'k3s-install-agent https://10.0.1.23:6443|token=fake-agent-token|skip-start=true',
    );
    expect(calls).toContain(
      'k3s-install v1.36.4+k3s1|--node-label llm-gateway-lab/node-role=gpu --node-label llm-gateway-lab/host=gpu-1 --node-name gpu-1-i-0agent00000000001',
    );
    expect(calls).toContain('systemctl start --no-block k3s-agent');
    expect(calls).toContain('nvidia-smi -L');
    const prefetch = index(/^k3s ctr --namespace k8s.io run .* lab-model-prefetch .*Qwen\/Qwen3-0\.6B-FP8$/);
    expect(prefetch).toBeGreaterThan(index(/^systemctl start --no-block k3s-agent$/));
    const reported = index(
      new RegExp(`^curl .* -X PUT .*${S3_URL}LlmGatewayLab/agents/gpu-1/model-cache/i-0server0000000000$`),
    );
    expect(reported).toBeGreaterThan(prefetch);
    expect(JSON.parse(box.s3Object(report('gpu-1')) ?? '{}')).toMatchObject({
      host: 'gpu-1',
      node: 'gpu-1-i-0agent00000000001',
      model: 'Qwen/Qwen3-0.6B-FP8',
    });
    // The routers may land here too (no CPU node in some clusters): the wheelhouse is staged.
    expect(calls.some((c) => c.includes('pip download') && c.includes('vllm-router=='))).toBe(true);
    const [signal] = box.signals();
    expect(signal?.body.Status).toBe('SUCCESS');
    expect(signal?.body.Data).toMatch(
      /^agent gpu-1 \(gpu\) joined as node gpu-1-i-0agent00000000001; 1 GPU\(s\), model cache of Qwen\/Qwen3-0\.6B-FP8 ready; the instance shuts down at \d{4}-/,
    );
    expect(box.log()).not.toContain('fake-agent-token');
  });

  test('a CPU agent joins without GPU checks or a model cache, and stages the router wheelhouse', () => {
    const { box, result, calls } = cpuAgent();
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain(
      'k3s-install v1.36.4+k3s1|--node-label llm-gateway-lab/node-role=cpu --node-label llm-gateway-lab/host=client-1 --node-name client-1-i-0agent00000000001',
    );
    expect(calls.some((c) => c.startsWith('nvidia-smi') || c.includes('lab-model-prefetch'))).toBe(false);
    expect(calls.some((c) => c.includes('/model-cache/'))).toBe(false);
    // Front ends go to the CPU node: its routers install offline from its own wheelhouse.
    const staged = calls.filter((c) => c.includes('pip download'));
    expect(staged).toHaveLength(1);
    expect(staged[0]).toContain('--only-binary=:all:');
    expect(box.log()).toMatch(/staged \d+ wheel\(s\) in \S*\/var\/lib\/lab\/models\/wheels\/vllm-router-/);
    expect(box.signals()[0]?.body.Data).toMatch(/^agent client-1 \(cpu\) joined as node client-1-i-0agent/);
  });

  test('a joined agent ends with its server: 5 minutes in a row without an answer upload its results and shut it down; a restart does not', () => {
    const { box, result, calls } = cpuAgent();
    expect(result.status, box.log()).toBe(0);
    expect(calls).toContain('systemctl enable --now lab-follow-server.timer');
    expect(readFileSync(box.path('/opt/lab/host.env'), 'utf8')).toContain(
      'LAB_SERVER_URL=https://10.0.1.23:6443',
    );
    const follow = box.path('/usr/local/sbin/lab-follow-server');
    const before = box.calls().length;

    // Four minutes without an answer, then one (a K3s restart): the count starts again.
    for (let minute = 1; minute <= 4; minute++) box.runFile(follow, { FAKE_SERVER_GONE: '1' });
    expect(box.runFile(follow).status).toBe(0);
    // Then the server is gone for 5 minutes in a row.
    for (let minute = 1; minute <= 4; minute++)
      expect(box.runFile(follow, { FAKE_SERVER_GONE: '1' }).status).toBe(0);
    expect(
      box
        .calls()
        .slice(before)
        .some((c) => c.startsWith('shutdown')),
    ).toBe(false);
    // What the agent wrote since its last sync reaches S3 before it shuts down.
    writeFileSync(box.path('/var/lib/lab/results/host/late.json'), '{"late":true}');
    expect(box.runFile(follow, { FAKE_SERVER_GONE: '1' }).status).toBe(0);

    const after = box
      .calls()
      .slice(before)
      .filter((c) => !c.startsWith('curl') || (c.includes('--aws-sigv4') && c.includes(' -X PUT ')));
    expect(after).toEqual([
      expect.stringMatching(
        new RegExp(`^curl .* -X PUT .*${S3_URL}LlmGatewayLab/agents/client-1/host/late\\.json$`),
      ),
      "shutdown -h now the lab's K3s server ended: this agent ends with it",
    ]);
    expect(box.s3Object('results-bucket/LlmGatewayLab/agents/client-1/host/late.json')).toBe('{"late":true}');
    expect(box.log()).toContain('has not answered for 5 minutes: it ended');
  });

  test('an agent without the server URL stops before anything, as the launcher must set it', () => {
    const { LAB_SERVER_URL: _, ...withoutUrl } = AGENT_ENV;
    const box = makeSandbox();
    const result = box.bootstrap(config, { ...withoutUrl, LAB_MANIFESTS_DIR: box.root }, FAST, (c) =>
      renderAgentSettings(c, gpu1),
    );
    expect(result.status).toBe(2);
    expect(box.log()).toContain(
      'environment variables missing: LAB_SERVER_URL (the user-data launcher sets them)',
    );
  });

  // set -e ended the watcher at its first log line when tee could not write (a full disk), before
  // the upload and the shutdown: the agent ran on until its deadline. /dev/full fails every write,
  // as a full disk does; one minute without an answer is enough here.
  test('on a full disk an agent whose server is gone still ends', () => {
    const box = makeSandbox();
    box.writeBootstrap(config, { LOG_FILE: '/dev/full', SERVER_GONE_MINUTES: '1' }, (c) =>
      renderAgentSettings(c, client1),
    );
    writeFileSync(box.path('/opt/lab/host.env'), `LAB_SERVER_URL=${AGENT_ENV.LAB_SERVER_URL}\n`);
    box.fake('/usr/local/sbin/lab-sync-results', 'exit 0');
    const result = box.runFile(join(box.bootstrapDir, 'host', 'lab-follow-server.sh'), {
      LAB_SETTINGS: join(box.bootstrapDir, 'settings.env'),
      FAKE_SERVER_GONE: '1',
    });
    expect(result.stderr).toContain('No space left on device');
    expect(box.calls().filter((c) => !c.startsWith('curl'))).toEqual([
      'lab-sync-results ',
      "shutdown -h now the lab's K3s server ended: this agent ends with it",
    ]);
  });
});

/**
 * The tests of the runs that wait in real time (`waitingRuns`), last in the file: the runs start in
 * the background with the first rehearsed block, and wait while the blocks above use the CPU.
 */
describe('waits that give up, rehearsed in the background', () => {
  beforeAll(() => {
    waitingRuns();
  });

  test('an agent that never joins fails the wait with its name and where its log is', async () => {
    const { box, result } = await waitingRuns().agentsMissing;
    expect(result.status).not.toBe(0);
    const signals = box.signals();
    expect(signals.map((s) => s.body.Status)).toEqual(['FAILURE']);
    const waitStep = SERVER_STEPS.find((s) => s.name === 'wait_for_agents');
    expect(waitStep?.title).toBe(
      'wait for the K3s agents (gpu-1 gpu, gpu-2 gpu, client-1 cpu) to be Ready, each GPU agent with its model cache',
    );
    expect(signals[0]?.body.Reason).toContain(
      `${stepMarker(0, 2, String(waitStep?.title))} failed: not ready: `,
    );
    expect(signals[0]?.body.Reason).toContain('gpu-2 has not joined or is not Ready');
    expect(signals[0]?.body.Reason).toContain(
      "(each agent's bootstrap log: s3://results-bucket/LlmGatewayLab/agents/<host>/host/bootstrap.log)",
    );
    // The wait gave up by itself: the watchdog did not have to end the step.
    expect(signals[0]?.body.Reason).not.toContain('ran out of its budget');
    expect(box.calls().some((c) => c.startsWith('kubectl apply') || c.startsWith('helm'))).toBe(false);
  });

  test('a GPU agent without its model cache report keeps the replicas from being placed', async () => {
    const { box, result } = await waitingRuns().agentsMissing;
    expect(result.status).not.toBe(0);
    // Each agent's cause: gpu-1 joined without its report; client-1 (CPU) needs none.
    expect(box.signals()[0]?.body.Reason).toContain(
      'failed: not ready: gpu-1 has not reported its model cache;gpu-2 has not joined or is not Ready (',
    );
    expect(box.calls().some((c) => c.startsWith('kubectl apply') || c.startsWith('helm'))).toBe(false);
  });

  test('a GPU agent that does not advertise its GPU fails the device plugin step', async () => {
    const { box, result } = await waitingRuns().gpuMissing;
    expect(result.status).not.toBe(0);
    expect(box.signals().map((s) => s.body.Status)).toEqual(['FAILURE']);
    expect(box.log()).toContain('agent gpu-1: allocatable nvidia.com/gpu 1');
    expect(box.signals()[0]?.body.Reason).toContain(
      "agent gpu-2 reports '0' allocatable nvidia.com/gpu, expected 1 (the NVIDIA device plugin's pod on that node, kube-system)",
    );
    expect(box.signals()[0]?.body.Reason).not.toContain('ran out of its budget');
    expect(box.calls().some((c) => c.includes('rollout status statefulset/'))).toBe(false);
  });

  test('a failed join is reported with its cause from the k3s-agent journal', async () => {
    const { box, result } = await waitingRuns().joinRefused;
    expect(result.status).not.toBe(0);
    const signals = box.signals();
    expect(signals.map((s) => s.body.Status)).toEqual(['FAILURE']);
    const joinStep = GPU_AGENT_STEPS.find((s) => s.name === 'join_cluster');
    expect(joinStep?.title).toBe(
      'install K3s v1.36.4+k3s1 as an agent (gpu node gpu-1) and join the server with the agent token',
    );
    expect(signals[0]?.body.Data).toBe(stepMarker(0, 2, String(joinStep?.title)));
    expect(signals[0]?.body.Reason).toContain(
      'node gpu-1-i-0agent00000000001 did not join the K3s server at https://10.0.1.23:6443 within the step\'s budget; k3s-agent journal: Nov 30 12:00:02 ip-10-0-1-40 k3s[812]: time="2026-11-30T12:00:02Z" level=error msg="failed to get CA certs: https://127.0.0.1:6444/cacerts: 401 Unauthorized"',
    );
    expect(signals[0]?.body.Reason).not.toContain('level=info');
    // The cause is in the log too, and nothing after the join ran.
    expect(box.log()).toContain('401 Unauthorized');
    expect(box.calls().some((c) => c.includes('lab-model-prefetch') || c.includes('crictl pull'))).toBe(
      false,
    );
  });
});
