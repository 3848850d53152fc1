import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { GetObjectCommand, NoSuchKey } from '@aws-sdk/client-s3';
import { GetCommandInvocationCommand, SendCommandCommand } from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { sdkControlClients } from '../../lib/cli/aws-clients.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { logSource } from '../../lib/control/logs.ts';
import { tempDir } from '../temp.ts';
import { captureOutput } from './capture.ts';
import { BUCKET, cfn, deployed, INSTANCE, mockDeployedLab, STACK, s3, ssm } from './deployed-lab.ts';

expect.extend(allCustomMatcher);

interface HostAnswer {
  readonly stdout?: string;
  readonly code?: number;
  readonly stderr?: string;
}

/** Each SendCommand gets its own command id and, in order, one of `answers`; the last one repeats. */
function hostAnswers(...answers: HostAnswer[]) {
  const send = ssm.on(SendCommandCommand);
  answers.forEach((answer, i) => {
    const id = `cmd-${i}`;
    if (i === answers.length - 1) send.resolves({ Command: { CommandId: id } });
    else send.resolvesOnce({ Command: { CommandId: id } });
    ssm.on(GetCommandInvocationCommand, { CommandId: id, InstanceId: INSTANCE }).resolves({
      Status: answer.code ? 'Failed' : 'Success',
      ResponseCode: answer.code ?? 0,
      StandardOutputContent: answer.stdout ?? '',
      StandardErrorContent: answer.stderr ?? '',
    });
  });
}

/** The script lines of the n-th SendCommand. */
function script(n = 0): string[] {
  return ssm.commandCalls(SendCommandCommand)[n]?.args[0].input.Parameters?.commands ?? [];
}

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly sleeps: number[];
}

async function lab(...args: string[]): Promise<Run> {
  const sleeps: number[] = [];
  const program = new Command('lab').option('-c, --config <file>').exitOverride();
  registerStudyCommands(program, {
    createClients: (region) => sdkControlClients(region ?? 'us-west-2'),
    sleep: async (ms) => {
      sleeps.push(ms);
    },
  });
  const { value, stdout, stderr } = await captureOutput(async () => {
    try {
      await program.parseAsync(args, { from: 'user' });
      return 0;
    } catch (error) {
      const exitCode = (error as { exitCode?: number }).exitCode;
      if (typeof exitCode !== 'number') throw error;
      return exitCode;
    }
  });
  return { code: value, stdout, stderr, sleeps };
}

beforeEach(() => {
  mockDeployedLab();
  vi.stubEnv('LAB_CONFIG', '');
  vi.stubEnv('AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED', 'true');
});
afterEach(() => vi.unstubAllEnvs());

describe('lab logs bootstrap and runner', () => {
  it('prints the last lines of the bootstrap log from the host', async () => {
    deployed();
    hostAnswers({ stdout: '--- log 5120\n[lab-bootstrap] k3s up\n[lab-bootstrap] SUCCESS\n' });
    const run = await lab('logs', 'bootstrap', '--tail', '50');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('[lab-bootstrap] k3s up\n[lab-bootstrap] SUCCESS\n');
    expect(run.stderr).toContain(`the bootstrap log on instance ${INSTANCE} (stack ${STACK}):`);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      DocumentName: 'AWS-RunShellScript',
      InstanceIds: [INSTANCE],
      Parameters: { commands: expect.any(Array), executionTimeout: ['60'] },
    });
    expect(script()).toContain("readonly LOG_FILE='/var/log/lab-bootstrap.log'");
    expect(script()).toContain('readonly FROM=-1');
    expect(script()).toContain('readonly TAIL_LINES=50');
  });

  it('the runner log is read from the results folder on the host', async () => {
    deployed();
    hostAnswers({ stdout: '--- log 10\nrun 1/25\n' });
    const run = await lab('logs', 'runner');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('run 1/25\n');
    expect(script()).toContain("readonly LOG_FILE='/var/lib/lab/results/runner.log'");
    expect(script()).toContain('readonly TAIL_LINES=200');
  });

  it('--follow asks again from the offset of the last answer, a bounded number of times', async () => {
    deployed();
    hostAnswers(
      { stdout: '--- log 12\nline one\nli' },
      { stdout: '--- log 30\nne two\nline three\n' },
      { stdout: '--- log 30\n' },
    );
    // 1 minute of polls every 5 s: 12 polls after the first; answers beyond the third repeat it.
    const run = await lab('logs', 'runner', '--follow', '--follow-for', '1');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('line one\nline two\nline three\n');
    expect(ssm).toHaveReceivedCommandTimes(SendCommandCommand, 13);
    expect(script(1)).toContain('readonly FROM=12');
    expect(script(2)).toContain('readonly FROM=30');
    expect(run.sleeps.filter((ms) => ms === 5000)).toHaveLength(12);
    expect(run.stderr).toContain(
      'stopped following after 1 min (--follow-for); run the command again to go on.',
    );
  });

  it('a runner log that is not there yet says the study has not started', async () => {
    deployed();
    hostAnswers({ code: 6, stderr: '/var/lib/lab/results/runner.log does not exist on this host\n' });
    const run = await lab('logs', 'runner');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab logs: /var/lib/lab/results/runner.log is not on instance ${INSTANCE} yet: the study runner writes it once it starts (lab status --stack ${STACK}).`,
    );
  });

  it('instance gone: the runner log comes from its last synced copy', async () => {
    deployed('terminated');
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/runner.log` }).resolves({
      Body: { transformToString: async () => 'a\nb\nc\n' } as never,
      LastModified: new Date('2025-10-14T10:00:00Z'),
    });
    const run = await lab('logs', 'runner', '--tail', '2');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('b\nc\n');
    expect(run.stderr).toContain(`This is the last synced copy: s3://${BUCKET}/${STACK}/runner.log`);
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
  });

  it('instance gone and no synced runner log', async () => {
    deployed('terminated');
    s3.on(GetObjectCommand).rejects(
      new NoSuchKey({ $metadata: {}, message: 'The specified key does not exist.' }),
    );
    const run = await lab('logs', 'runner');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`s3://${BUCKET}/${STACK}/runner.log does not exist`);
  });

  it('instance gone: the bootstrap log cannot be read', async () => {
    deployed('stopped');
    const run = await lab('logs', 'bootstrap');
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`lab logs: Cannot read the bootstrap log: instance ${INSTANCE} is stopped.\n`);
  });
});

describe('lab logs of pods', () => {
  const podAnswer = (...lines: string[]) => ({ stdout: `--- log\n${lines.map((l) => `${l}\n`).join('')}` });

  it('a replica by its index, without kubectl timestamps', async () => {
    deployed();
    hostAnswers(podAnswer('2025-10-14T09:00:00.123456789Z INFO started', '2025-10-14T09:00:01Z INFO ready'));
    const run = await lab('logs', 'replica', '1');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('INFO started\nINFO ready\n');
    expect(script()).toContain("readonly NAMESPACE='vllm'");
    expect(script()).toContain("readonly TARGET='pod/qwen3-1'");
    expect(script()).toContain('kubectl -n "$NAMESPACE" logs "$TARGET" --timestamps --tail=200 >"$out"');
  });

  it('a front end by its arm id reads its router Deployment; a benchmark by its id reads its Job', async () => {
    const config = parseLabConfig({});
    await expect(logSource(config, 'front-end', 'router-round-robin')).resolves.toMatchObject({
      target: 'deployment/vllm-router-round-robin',
      namespace: 'vllm',
    });
    await expect(logSource(config, 'front-end', 'epp')).resolves.toMatchObject({
      target: 'deployment/qwen3-epp',
    });
    await expect(logSource(config, 'front-end', 'kube-proxy')).rejects.toThrow(
      /front end kube-proxy is a Kubernetes Service \(kube-proxy\): it has no pod of its own/,
    );
    const { studyPlan } = await import('../../lib/study/plan.ts');
    const bench = studyPlan(config).runs[0]?.benchmarks[0];
    await expect(logSource(config, 'job', bench?.id)).resolves.toMatchObject({
      target: `job/bench-${bench?.id}`,
    });
  });

  it('--container and --previous reach kubectl', async () => {
    deployed();
    hostAnswers(podAnswer());
    const run = await lab('logs', 'pod', 'qwen3-epp-abc', '--container', 'epp', '--previous');
    expect(run.code, run.stderr).toBe(0);
    expect(script()).toContain(
      `kubectl -n "$NAMESPACE" logs "$TARGET" --timestamps --container='epp' --previous --tail=200 >"$out"`,
    );
  });

  it('--follow asks for the lines since the last second and prints each line once', async () => {
    deployed();
    hostAnswers(
      podAnswer('2025-10-14T09:00:00.5Z a', '2025-10-14T09:00:01.25Z b'),
      podAnswer('2025-10-14T09:00:01.25Z b', '2025-10-14T09:00:01.250000001Z c', '2025-10-14T09:00:02Z d'),
      podAnswer('2025-10-14T09:00:02Z d'),
    );
    const run = await lab('logs', 'replica', '0', '--follow', '--follow-for', '1');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('a\nb\nc\nd\n');
    expect(script(1)).toContain(
      `kubectl -n "$NAMESPACE" logs "$TARGET" --timestamps --since-time='2025-10-14T09:00:01Z' >"$out"`,
    );
    expect(script(2).join('\n')).toContain(`--since-time='2025-10-14T09:00:02Z'`);
  });

  it('a missing pod is named with the pods that are there', async () => {
    deployed();
    hostAnswers({ code: 7, stderr: 'pods in vllm: qwen3-0 qwen3-1 vllm-router-round-robin-6f7d\n' });
    const run = await lab('logs', 'pod', 'qwen3-9');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab logs: There is no pod/qwen3-9 in namespace vllm on instance ${INSTANCE}. pods in vllm: qwen3-0 qwen3-1 vllm-router-round-robin-6f7d\n`,
    );
  });

  it('a replica index beyond vllm.replicas and an unknown source are refused before any AWS call', async () => {
    const beyond = await lab('logs', 'replica', '7');
    expect(beyond.code).toBe(1);
    expect(beyond.stderr).toBe(
      'lab logs: there is no replica 7: vllm.replicas is 2, so the indices are 0 to 1.\n',
    );
    const unknown = await lab('logs', 'kernel');
    expect(unknown.stderr).toBe(
      'lab logs: unknown log "kernel"; the logs: bootstrap, runner, replica, front-end, job, pod.\n',
    );
    const nameless = await lab('logs', 'pod');
    expect(nameless.stderr).toBe('lab logs: lab logs pod needs a pod name.\n');
    expect(cfn).not.toHaveReceivedAnyCommand();
  });

  it('no credentials', async () => {
    const error = Object.assign(new Error('Could not load credentials from any providers'), {
      name: 'CredentialsProviderError',
    });
    cfn.on(DescribeStacksCommand).rejects(error);
    const run = await lab('logs', 'bootstrap');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^lab logs: No AWS credentials found \(Could not load credentials/);
    expect(ssm).not.toHaveReceivedAnyCommand();
  });
});

describe('the stack defaults to the configuration', () => {
  it("logs, and the other study commands, use the configuration's stackName unless --stack is given", async () => {
    const file = join(tempDir('lab-logs-config-'), 'lab.yaml');
    writeFileSync(file, 'stackName: OtherLab\n');
    deployed('running', 'OtherLab');
    hostAnswers({ stdout: '--- log 0\n' });
    const run = await lab('--config', file, 'logs', 'bootstrap');
    expect(run.code, run.stderr).toBe(0);
    expect(cfn).toHaveReceivedCommandWith(DescribeStacksCommand, { StackName: 'OtherLab' });

    cfn.reset();
    deployed('stopped', 'Explicit');
    vi.stubEnv('LAB_CONFIG', file);
    const explicit = await lab('logs', 'bootstrap', '--stack', 'Explicit');
    expect(explicit.stderr).toContain('instance');
    expect(cfn).toHaveReceivedCommandWith(DescribeStacksCommand, { StackName: 'Explicit' });
    expect(cfn).not.toHaveReceivedCommandWith(DescribeStacksCommand, { StackName: 'OtherLab' });
  });
});
