import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudFormationServiceException, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand, EC2ServiceException } from '@aws-sdk/client-ec2';
import {
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchBucket,
  NoSuchKey,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import {
  GetCommandInvocationCommand,
  InvalidInstanceId,
  InvocationDoesNotExist,
  SendCommandCommand,
  SSMServiceException,
} from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import { captureOutput } from './capture.ts';
import 'aws-sdk-client-mock-vitest/extend';
import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { cellConstructId, cellOutputDescription, cellOutputKey } from '../../lib/aws/cell-outputs.ts';
import { sdkControlClients } from '../../lib/cli/aws-clients.ts';
import { runLab } from '../../lib/cli/program.ts';
import { defaultResultsDir, registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import {
  renderReadStatus,
  renderStartStudy,
  renderSyncResults,
  runnerJob,
} from '../../lib/control/host-scripts.ts';
import { tempDir } from '../temp.ts';
import {
  BUCKET,
  cfn,
  deployed,
  ec2,
  INSTANCE,
  labHost,
  liveHosts,
  mockDeployedLab,
  STACK,
  s3,
  ssm,
  stackWith,
} from './deployed-lab.ts';

expect.extend(allCustomMatcher);

const COMMAND_ID = '0b1c2d3e-aaaa-bbbb-cccc-1234567890ab';
const NOW = new Date('2025-10-14T09:14:40.000Z');

const STATUS = {
  state: 'running',
  startedAt: '2025-10-14T09:00:00.000Z',
  updatedAt: '2025-10-14T09:14:20.000Z',
  totalRuns: 27,
  recordedRuns: 7,
  validRuns: 6,
  invalidRuns: 1,
  current: {
    index: 8,
    id: 'arm-router-round-robin-prefix',
    phase: 'waiting for job',
    startedAt: '2025-10-14T09:14:00.000Z',
    elapsedSeconds: 20,
  },
  etaSeconds: 2160,
  message: 'run 8/27 arm-router-round-robin-prefix: waiting for job (elapsed 20s, study ETA 36m)',
};

function hostAnswers(stdout: string, options: { status?: string; code?: number; stderr?: string } = {}) {
  ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
  ssm
    .on(GetCommandInvocationCommand, { CommandId: COMMAND_ID, InstanceId: INSTANCE })
    .rejectsOnce(new InvocationDoesNotExist({ $metadata: {}, message: '' }))
    .resolvesOnce({ Status: 'InProgress' })
    .resolves({
      Status: (options.status ?? 'Success') as 'Success',
      ResponseCode: options.code ?? 0,
      StandardOutputContent: stdout,
      StandardErrorContent: options.stderr ?? '',
    });
}

const statusBlock = (status: object) => `--- status.json\n${JSON.stringify(status, null, 2)}\n`;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `lab <args>` on a program with the study commands, waiting no real time between polls. */
async function lab(...args: string[]): Promise<Run> {
  const program = new Command('lab').option('-c, --config <file>').exitOverride();
  registerStudyCommands(program, {
    createClients: (region) => sdkControlClients(region ?? 'us-west-2'),
    sleep: async () => {},
    now: () => NOW,
  });
  const {
    value: code,
    stdout,
    stderr,
  } = await captureOutput(async () => {
    try {
      await program.parseAsync(args, { from: 'user' });
      return 0;
    } catch (error) {
      const exitCode = (error as { exitCode?: number }).exitCode;
      if (typeof exitCode !== 'number') throw error;
      return exitCode;
    }
  });
  return { code, stdout, stderr };
}

beforeEach(() => {
  mockDeployedLab();
  vi.stubEnv('LAB_CONFIG', '');
});
afterEach(() => vi.unstubAllEnvs());

const job = runnerJob(parseLabConfig({}));

describe('lab run', () => {
  it('starts the runner with AWS-RunShellScript on the stack instance and prints the status', async () => {
    deployed();
    hostAnswers(
      `runner job: absent\nstarted the study runner Job vllm/lab-study-runner from /opt/lab/manifests/runner/90-runner.yaml\n--- no status.json\n`,
    );
    const run = await lab('run', '--stack', STACK, '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandTimes(SendCommandCommand, 1);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      DocumentName: 'AWS-RunShellScript',
      InstanceIds: [INSTANCE],
      TimeoutSeconds: 60,
      Parameters: { commands: renderStartStudy(job), executionTimeout: ['300'] },
    });
    const lines = ssm.commandCalls(SendCommandCommand)[0]?.args[0].input.Parameters?.commands ?? [];
    expect(lines[0]).toBe('#!/bin/bash');
    expect(lines).toContain("readonly NAMESPACE='vllm'");
    expect(lines).toContain("readonly JOB='lab-study-runner'");
    expect(lines).toContain('    kubectl -n "$NAMESPACE" delete job "$JOB" --ignore-not-found --wait=true');
    expect(lines).toContain('  kubectl apply --server-side --field-manager=lab-run -f "$manifest"');
    expect(ssm).toHaveReceivedCommandTimes(GetCommandInvocationCommand, 3);
    expect(run.stdout).toBe(
      [
        `stack ${STACK}: instance ${INSTANCE} in us-west-2`,
        'started the study runner Job vllm/lab-study-runner from /opt/lab/manifests/runner/90-runner.yaml',
        'no status.json yet: the runner writes it once it starts (it first waits for every replica).',
        `watch it: lab status --stack ${STACK}`,
        '',
      ].join('\n'),
    );
  });

  it('with --new sends the script that asks the runner for a fresh study', async () => {
    deployed();
    hostAnswers('runner job: succeeded\n--- no status.json\n');
    const run = await lab('run', '--new', '--stack', STACK, '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      Parameters: { commands: renderStartStudy(job, { fresh: true }), executionTimeout: ['300'] },
    });
    const lines = ssm.commandCalls(SendCommandCommand)[0]?.args[0].input.Parameters?.commands ?? [];
    expect(lines).toContain("  date -u +%FT%TZ > '/var/lib/lab/results/new-study.request'");
  });

  it('with --redo-invalid sends the script that asks the runner to redo the invalid runs; not with --new', async () => {
    deployed();
    hostAnswers('runner job: succeeded\n--- no status.json\n');
    const run = await lab('run', '--redo-invalid', '--stack', STACK, '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      Parameters: { commands: renderStartStudy(job, { redoInvalid: true }), executionTimeout: ['300'] },
    });
    const both = await lab('run', '--redo-invalid', '--new', '--stack', STACK, '--region', 'us-west-2');
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('lab run: --new, --redo-invalid and --smoke exclude each other');
  });

  it('uses the namespace of the configuration', async () => {
    deployed();
    hostAnswers('runner job: absent\n--- no status.json\n');
    const dir = tempDir('lab-config-');
    writeFileSync(join(dir, 'lab.yaml'), 'namespace: lab2\n');
    const run = await lab('--config', join(dir, 'lab.yaml'), 'run', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    const lines = ssm.commandCalls(SendCommandCommand)[0]?.args[0].input.Parameters?.commands ?? [];
    expect(lines).toContain("readonly NAMESPACE='lab2'");
  });

  it('says resume when the runner is active, with its progress', async () => {
    deployed();
    hostAnswers(
      `runner job: active\nthe study runner Job vllm/lab-study-runner is running: nothing to start (a resumed study skips the runs that already have a valid record)\n${statusBlock(STATUS)}`,
    );
    const run = await lab('run', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('resume: the runner is active; nothing was started.');
    expect(run.stdout).toContain('progress:\n  state:     running');
    expect(run.stdout).toContain('  runs:      7 of 27 recorded: 6 valid, 1 invalid');
  });

  it('the testbed still bootstrapping', async () => {
    deployed();
    hostAnswers('', {
      status: 'Failed',
      code: 3,
      stderr:
        'the testbed is not ready yet: the bootstrap has not signalled SUCCESS (last line of /var/log/lab-bootstrap.log: ==> [step 7/13] pre-fetch)\n',
    });
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^lab run: The testbed is still bootstrapping, so the study cannot start yet\. .*\[step 7\/13\]/,
    );
  });

  it('a command that failed on the host: its exit code and stderr', async () => {
    deployed();
    hostAnswers('runner job: failed\n', {
      status: 'Failed',
      code: 1,
      stderr: 'error: the server could not find the requested resource\n',
    });
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `lab run: Starting the study runner failed on instance ${INSTANCE} with exit code 1 (SSM command ${COMMAND_ID}).\nIts stderr:\nerror: the server could not find the requested resource\n`,
    );
  });

  it('an instance whose SSM agent has not registered', async () => {
    deployed();
    ssm
      .on(SendCommandCommand)
      .rejects(new InvalidInstanceId({ $metadata: { httpStatusCode: 400 }, message: '' }));
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab run: Instance ${INSTANCE} is not managed by SSM yet: the SSM agent has not registered yet; wait a minute and retry`,
    );
  });

  it('an instance that is gone', async () => {
    deployed('terminated');
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`Cannot start the study: instance ${INSTANCE} is terminated`);
    expect(run.stderr).toContain('npx cdk deploy -c relaunch=$(date +%s)');
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
  });

  it('a command still running when the wait ends names the command to look at', async () => {
    deployed();
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
    ssm.on(GetCommandInvocationCommand).resolves({ Status: 'InProgress' });
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`--command-id ${COMMAND_ID} --instance-id ${INSTANCE}`);
    // (300 s + 60 s delivery) / 2 s
    expect(ssm).toHaveReceivedCommandTimes(GetCommandInvocationCommand, 180);
  });
});

describe('errors every study command explains', () => {
  it('stack not found', async () => {
    cfn.on(DescribeStacksCommand).rejects(
      new CloudFormationServiceException({
        name: 'ValidationError',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: 'Stack with id nope does not exist',
      }),
    );
    const run = await lab('status', '--stack', 'nope', '--region', 'eu-west-1');
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^lab status: Stack nope does not exist in eu-west-1\. Check the name/);
  });

  it('no credentials', async () => {
    cfn.on(DescribeStacksCommand).rejects(
      Object.assign(new Error('Could not load credentials from any providers'), {
        name: 'CredentialsProviderError',
      }),
    );
    const run = await lab('results', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      'lab results: No AWS credentials found (Could not load credentials from any providers). lab results uses the standard credential chain',
    );
  });

  it.each([
    [
      'cloudformation:DescribeStacks',
      () =>
        cfn
          .on(DescribeStacksCommand)
          .rejects(denied(CloudFormationServiceException, 'AccessDenied', 'cloudformation:DescribeStacks')),
    ],
    [
      'ec2:DescribeInstances',
      () => {
        deployed();
        ec2
          .on(DescribeInstancesCommand)
          .rejects(denied(EC2ServiceException, 'UnauthorizedOperation', 'ec2:DescribeInstances'));
      },
    ],
    [
      'ssm:SendCommand',
      () => {
        deployed();
        ssm
          .on(SendCommandCommand)
          .rejects(denied(SSMServiceException, 'AccessDeniedException', 'ssm:SendCommand'));
      },
    ],
    [
      'ssm:GetCommandInvocation',
      () => {
        deployed();
        ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
        ssm
          .on(GetCommandInvocationCommand)
          .rejects(denied(SSMServiceException, 'AccessDeniedException', 'ssm:GetCommandInvocation'));
      },
    ],
  ])('access denied names %s', async (permission, arrange) => {
    arrange();
    const run = await lab('run', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab run: Access denied: the caller lacks permission ${permission}, which lab run needs for stack ${STACK} in us-west-2 (docs/study-control.md lists every permission)`,
    );
  });

  it.each([
    ['s3:ListBucket', () => s3.on(ListObjectsV2Command).rejects(s3Denied())],
    [
      's3:GetObject',
      () => {
        s3.on(ListObjectsV2Command).resolves({ Contents: [object('study.json', 10)] });
        s3.on(GetObjectCommand).rejects(s3Denied());
      },
    ],
  ])('access denied on the bucket names %s', async (permission, arrange) => {
    deployed('terminated');
    arrange();
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `Access denied: the caller lacks permission ${permission}, which lab results needs`,
    );
  });

  it.each([
    [
      'no InstanceId output, launch failed',
      { ResultsBucketName: BUCKET },
      'ROLLBACK_COMPLETE',
      /has no InstanceId output.*it is ROLLBACK_COMPLETE: either it was not deployed by this tool's CDK app, or the launch failed/,
    ],
    ['a stack of another tool', {}, 'CREATE_COMPLETE', /has no InstanceId or ResultsBucketName output/],
    [
      'a deploy still running',
      { ResultsBucketName: BUCKET },
      'CREATE_IN_PROGRESS',
      /it is CREATE_IN_PROGRESS: wait until cdk deploy has finished/,
    ],
  ])('%s', async (_, outputs, status, message) => {
    stackWith(outputs, status);
    const run = await lab('status', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(message);
  });
});

function denied<E>(Exception: new (options: never) => E, name: string, action: string): E {
  return new Exception({
    name,
    $fault: 'client',
    $metadata: { httpStatusCode: 403 },
    message: `User: arn:aws:iam::123456789012:user/dev is not authorized to perform: ${action} on resource: arn:aws:example`,
  } as never);
}

function s3Denied() {
  return new S3ServiceException({
    name: 'AccessDenied',
    $fault: 'client',
    $metadata: { httpStatusCode: 403 },
    message: 'Access Denied',
  });
}

describe('lab status', () => {
  it('from the host: state, runs, current run and phase, elapsed, ETA, message', async () => {
    deployed();
    hostAnswers(`runner job: active\n${statusBlock(STATUS)}`);
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      DocumentName: 'AWS-RunShellScript',
      InstanceIds: [INSTANCE],
      Parameters: { commands: renderReadStatus(job), executionTimeout: ['60'] },
    });
    expect(run.stdout).toBe(
      [
        `study on ${INSTANCE} (stack ${STACK}), runner job: active`,
        'state:     running (status.json updated 2025-10-14T09:14:20.000Z, 20s ago)',
        'runs:      7 of 27 recorded: 6 valid, 1 invalid',
        'current:   run 8/27 arm-router-round-robin-prefix: waiting for job (run elapsed 20s)',
        'elapsed:   14m40s since the runner started at 2025-10-14T09:00:00.000Z',
        'ETA:       36m',
        'message:   run 8/27 arm-router-round-robin-prefix: waiting for job (elapsed 20s, study ETA 36m)',
        'hosts:     1 live, 4.60 USD/h on demand together, about 4.60 USD so far (instances only)',
        `  server: ${INSTANCE} g6.12xlarge in us-west-2a, running, up 1h00m00s, 4.60 USD/h, about 4.60 USD so far`,
        '',
      ].join('\n'),
    );
  });

  it('adds the study id, the invalid runs, the cost so far and the shutdown time', async () => {
    deployed();
    ec2.on(DescribeInstancesCommand, { InstanceIds: [INSTANCE] }).resolves({
      Reservations: [
        {
          Instances: [
            {
              InstanceId: INSTANCE,
              State: { Name: 'running' },
              LaunchTime: new Date(NOW.getTime() - 3_600_000),
            },
          ],
        },
      ],
    });
    const status = {
      ...STATUS,
      studyId: '20251014-090000-3f2a9c1e',
      studyStartedAt: '2025-10-14T09:00:00.000Z',
      invalidRunIds: ['bound-p64'],
    };
    hostAnswers(`runner job: active\n${statusBlock(status)}`);
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines).toContain(
      'study:     20251014-090000-3f2a9c1e, started 2025-10-14T09:00:00.000Z (results in studies/20251014-090000-3f2a9c1e/)',
    );
    expect(lines).toContain('invalid:   bound-p64');
    expect(lines).toContain('cost:      about 4.60 USD so far (instance up 1h00m00s at 4.6 USD/h)');
    expect(lines).toContain(
      `shutdown:  ${new Date(NOW.getTime() + 7 * 3_600_000).toISOString()} at the latest (instance.maxLifetimeHours 8), in 7h00m00s`,
    );
  });

  it('a running status whose Job failed is flagged stale', async () => {
    deployed();
    hostAnswers(`runner job: failed\n${statusBlock(STATUS)}`);
    const run = await lab('status', '--stack', STACK);
    expect(run.stdout).toContain('note: the runner Job is failed, so this status is stale');
  });

  it('study not started yet: no status.json', async () => {
    deployed();
    hostAnswers('runner job: absent\n--- no status.json\n');
    const run = await lab('status', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `lab status: The study has not started yet: there is no /var/lib/lab/results/status.json on instance ${INSTANCE} (runner job: absent). Start it with lab run --stack ${STACK}`,
    );
  });

  it('instance gone: the last synced copy from S3, and when it was synced', async () => {
    deployed('terminated');
    const { current: _current, etaSeconds: _eta, ...rest } = STATUS;
    const finished = {
      ...rest,
      state: 'finished',
      recordedRuns: 27,
      validRuns: 26,
      startedAt: '2025-10-14T08:00:00.000Z',
      updatedAt: '2025-10-14T09:00:00.000Z',
      message: 'study finished: 26 of 27 runs valid',
    };
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/status.json` }).resolves({
      Body: body(JSON.stringify(finished)),
      LastModified: new Date('2025-10-14T09:02:00.000Z'),
    });
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
    expect(run.stdout).toBe(
      [
        `instance ${INSTANCE} is terminated: the lifetime guard (instance.maxLifetimeHours), runner.terminateWhenDone or a teardown ended it.`,
        `This is the last synced copy: s3://${BUCKET}/${STACK}/status.json, uploaded 2025-10-14T09:02:00.000Z.`,
        'state:     finished (status.json updated 2025-10-14T09:00:00.000Z, 14m40s ago)',
        'runs:      27 of 27 recorded: 26 valid, 1 invalid',
        'elapsed:   1h00m00s since the runner started at 2025-10-14T08:00:00.000Z',
        'message:   study finished: 26 of 27 runs valid',
        'hosts:     none live (every host of the stack has ended)',
        '',
      ].join('\n'),
    );
  });

  it('server gone, an agent still billing: the agent shows with its state and cost', async () => {
    deployed('terminated');
    liveHosts(labHost('i-0bbbbbbbbbbbbbbb1', 'g6.xlarge', 'AgentGpu1Launch9F8E7D6C'));
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/status.json` }).resolves({
      Body: body(JSON.stringify({ ...STATUS, state: 'finished' })),
      LastModified: new Date('2025-10-14T09:02:00.000Z'),
    });
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    expect(ec2).toHaveReceivedCommandWith(DescribeInstancesCommand, {
      Filters: [
        { Name: 'tag:llm-gateway-lab:stack', Values: [STACK] },
        { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] },
      ],
    });
    expect(run.stdout.split('\n').slice(-3)).toEqual([
      'hosts:     1 live, 0.81 USD/h on demand together, about 0.81 USD so far (instances only)',
      '  AgentGpu1: i-0bbbbbbbbbbbbbbb1 g6.xlarge in us-west-2a, running, up 1h00m00s, 0.81 USD/h, about 0.81 USD so far',
      '',
    ]);
  });

  it('instance gone and never synced a status: not started', async () => {
    ec2.on(DescribeInstancesCommand).rejects(
      new EC2ServiceException({
        name: 'InvalidInstanceID.NotFound',
        $fault: 'client',
        $metadata: {},
        message: `The instance ID '${INSTANCE}' does not exist`,
      }),
    );
    stackWith({ InstanceId: INSTANCE, ResultsBucketName: BUCKET });
    s3.on(GetObjectCommand).rejects(
      new NoSuchKey({ $metadata: { httpStatusCode: 404 }, message: 'The specified key does not exist.' }),
    );
    const run = await lab('status', '--stack', STACK);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`instance ${INSTANCE} is gone`);
    expect(run.stderr).toContain(
      `s3://${BUCKET}/${STACK}/status.json does not exist: the study never started`,
    );
  });
});

/** A GetObject body as the SDK's stream mixin offers it. */
function body(text: string) {
  const bytes = new TextEncoder().encode(text);
  return {
    transformToString: async () => text,
    transformToByteArray: async () => bytes,
  } as never;
}

function object(path: string, size: number, modified = '2025-10-14T10:00:00.000Z') {
  return { Key: `${STACK}/${path}`, Size: size, LastModified: new Date(modified), ETag: `"${path}-${size}"` };
}

describe('lab results', () => {
  const files: Record<string, string> = {
    'study.json': '{"runs":[]}',
    'status.json': '{"state":"finished"}',
    'runs/arm-baseline-prefix.json': '{"valid":true}',
    'bound-p8/bound-p8.json': '{"completed":512}',
  };

  function bucketWith(contents: Record<string, string>, modified = '2025-10-14T10:00:00.000Z') {
    const entries = Object.entries(contents);
    // Two pages: ListObjectsV2 returns at most 1,000 keys; the second page needs the token.
    s3.on(ListObjectsV2Command, {
      Bucket: BUCKET,
      Prefix: `${STACK}/`,
      ContinuationToken: undefined,
    }).resolves({
      IsTruncated: true,
      NextContinuationToken: 'page-2',
      Contents: [
        { Key: `${STACK}/`, Size: 0 },
        ...entries.slice(0, 2).map(([p, t]) => object(p, t.length, modified)),
      ],
    });
    s3.on(ListObjectsV2Command, {
      Bucket: BUCKET,
      Prefix: `${STACK}/`,
      ContinuationToken: 'page-2',
    }).resolves({
      IsTruncated: false,
      Contents: entries.slice(2).map(([p, t]) => object(p, t.length, modified)),
    });
    for (const [path, text] of entries) {
      s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/${path}` }).resolves({
        Body: body(text),
        LastModified: new Date(modified),
      });
    }
  }

  it('syncs on the host, downloads every page, then skips what did not change', async () => {
    deployed();
    hostAnswers('uploaded /var/lib/lab/results/ to the results bucket\n');
    bucketWith(files);
    const out = join(tempDir('lab-results-'), 'LlmGatewayLab');

    const first = await lab('results', '--stack', STACK, '--out', out);
    expect(first.code, first.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      DocumentName: 'AWS-RunShellScript',
      InstanceIds: [INSTANCE],
      Parameters: { commands: renderSyncResults(), executionTimeout: ['600'] },
    });
    expect(s3).toHaveReceivedCommandTimes(ListObjectsV2Command, 2);
    expect(s3).toHaveReceivedCommandTimes(GetObjectCommand, 4);
    for (const [path, text] of Object.entries(files)) {
      expect(readFileSync(join(out, path), 'utf8')).toBe(text);
      expect(statSync(join(out, path)).mtime.toISOString()).toBe('2025-10-14T10:00:00.000Z');
    }
    expect(first.stdout).toContain('fetched runs/arm-baseline-prefix.json (14 B)');
    const bytes = Object.values(files).reduce((sum, text) => sum + text.length, 0);
    expect(first.stdout).toContain(`4 file(s) fetched (${bytes} B), 0 unchanged, in ${out}`);
    expect(first.stdout).toContain(`make the report: lab report ${out}`);

    // Second call: the host uploaded a new status.json, nothing else changed.
    s3.reset();
    bucketWith({ ...files });
    s3.on(ListObjectsV2Command, {
      Bucket: BUCKET,
      Prefix: `${STACK}/`,
      ContinuationToken: undefined,
    }).resolves({
      IsTruncated: true,
      NextContinuationToken: 'page-2',
      Contents: [object('study.json', 11), object('status.json', 21, '2025-10-14T10:05:00.000Z')],
    });
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/status.json` }).resolves({
      Body: body('{"state":"finished!"}'),
      LastModified: new Date('2025-10-14T10:05:00.000Z'),
    });
    const second = await lab('results', '--stack', STACK, '--out', out);
    expect(second.code, second.stderr).toBe(0);
    expect(s3).toHaveReceivedCommandTimes(GetObjectCommand, 1);
    expect(s3).toHaveReceivedCommandWith(GetObjectCommand, { Key: `${STACK}/status.json` });
    expect(readFileSync(join(out, 'status.json'), 'utf8')).toBe('{"state":"finished!"}');
    expect(second.stdout).toContain('1 file(s) fetched (21 B), 3 unchanged');
  });

  it('instance gone: downloads the last synced copy without asking the host', async () => {
    deployed('terminated');
    bucketWith(files);
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
    expect(run.stdout).toMatch(/is terminated: .*: downloading the last synced copy\./);
  });

  it('a failed upload on the host is reported with its exit code, and the synced copy still comes', async () => {
    deployed();
    hostAnswers('', {
      status: 'Failed',
      code: 1,
      stderr: 'upload failed: An error occurred (AccessDenied)\n',
    });
    bucketWith(files);
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(
      'warning: the upload on the host failed with exit code 1: upload failed: An error occurred (AccessDenied)',
    );
    expect(run.stdout).toContain('4 file(s) fetched');
  });

  it('nothing in the bucket yet', async () => {
    deployed('stopped');
    s3.on(ListObjectsV2Command).resolves({ KeyCount: 0 });
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`lab results: There are no results in s3://${BUCKET}/${STACK}/ yet`);
  });

  it('a deleted results bucket', async () => {
    deployed('terminated');
    s3.on(ListObjectsV2Command).rejects(
      new NoSuchBucket({
        $metadata: { httpStatusCode: 404 },
        message: 'The specified bucket does not exist',
      }),
    );
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`The results bucket ${BUCKET} of stack ${STACK} does not exist any more`);
  });

  it('a key that would leave the download folder is refused', async () => {
    deployed('terminated');
    s3.on(ListObjectsV2Command).resolves({ Contents: [object('../../etc/evil', 3)] });
    const run = await lab('results', '--stack', STACK, '--out', tempDir('lab-results-'));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('Refusing to write results object ../../etc/evil outside');
    expect(s3).not.toHaveReceivedCommand(GetObjectCommand);
  });
});

describe('a network-lab cell with --cell', () => {
  const NETWORK_STACK = 'NetworkLab';
  const CELL_INSTANCES: Record<string, string> = {
    mesh: 'i-0aaaaaaaaaaaaaaa1',
    'dp-iptables': 'i-0aaaaaaaaaaaaaaa2',
    'dp-cilium': 'i-0aaaaaaaaaaaaaaa3',
  };
  const NETWORK_CONFIG = ['--config', 'examples/network-lab.yaml'];

  /** The network stack's outputs as lib/aws/lab-stack.ts names and describes them, one host per cell. */
  function networkDeployed(cells = Object.keys(CELL_INSTANCES)) {
    liveHosts(
      ...cells.map((cell, i) =>
        labHost(
          CELL_INSTANCES[cell] ?? '',
          i === 0 ? 'c7i.4xlarge' : 'c7i.2xlarge',
          `${cellConstructId(cell)}LaunchC0FFEE1${i}`,
          new Date(NOW.getTime() - 1_800_000),
          NETWORK_STACK,
        ),
      ),
    );
    const outputs = cells.flatMap((cell) => [
      {
        OutputKey: cellOutputKey(cell, 'InstanceId'),
        OutputValue: CELL_INSTANCES[cell],
        Description: cellOutputDescription(cell, 'its host'),
      },
      {
        OutputKey: cellOutputKey(cell, 'ResultsLocation'),
        OutputValue: `s3://${BUCKET}/${NETWORK_STACK}/${cell}/`,
        Description: cellOutputDescription(cell, 'where the host syncs results'),
      },
    ]);
    cfn.on(DescribeStacksCommand, { StackName: NETWORK_STACK }).resolves({
      Stacks: [
        { StackName: NETWORK_STACK, StackStatus: 'CREATE_COMPLETE', CreationTime: NOW, Outputs: outputs },
      ],
    });
    for (const instance of Object.values(CELL_INSTANCES)) {
      ec2.on(DescribeInstancesCommand, { InstanceIds: [instance] }).resolves({
        Reservations: [
          { Instances: [{ InstanceId: instance, State: { Name: 'running' }, LaunchTime: NOW }] },
        ],
      });
    }
  }

  function cellAnswers(instance: string, stdout: string) {
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
    ssm.on(GetCommandInvocationCommand, { CommandId: COMMAND_ID, InstanceId: instance }).resolves({
      Status: 'Success',
      ResponseCode: 0,
      StandardOutputContent: stdout,
      StandardErrorContent: '',
    });
  }

  it('lab status reads the cell host, priced by network.instance', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-cilium'], `runner job: active\n${statusBlock(STATUS)}`);
    const run = await lab(...NETWORK_CONFIG, 'status', '--cell', 'dp-cilium');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-cilium']],
      Comment: 'lab status: progress of NetworkLab cell dp-cilium',
    });
    expect(run.stdout).toContain(
      `study on ${CELL_INSTANCES['dp-cilium']} (stack NetworkLab cell dp-cilium), runner job: active`,
    );
    expect(run.stdout).toContain('at 0.357 USD/h');
    // Every cell's host, each at its own type's price.
    expect(run.stdout).toContain('hosts:     3 live, 1.43 USD/h on demand together, about 0.71 USD so far');
    expect(run.stdout).toContain(
      `  CellMesh: ${CELL_INSTANCES.mesh} c7i.4xlarge in us-west-2a, running, up 30m00s, 0.71 USD/h, about 0.36 USD so far`,
    );
  });

  it('lab run starts the study on the cell host and says how to watch that cell', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES.mesh, 'runner job: active\n--- no status.json\n');
    const run = await lab(...NETWORK_CONFIG, 'run', '--cell', 'mesh', '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, { InstanceIds: [CELL_INSTANCES.mesh] });
    expect(run.stdout).toContain(`stack NetworkLab cell mesh: instance ${CELL_INSTANCES.mesh} in us-west-2`);
    expect(run.stdout).toContain('watch it: lab status --stack NetworkLab --cell mesh');
  });

  it('lab results downloads the cell prefix <stack>/<cell>/ into ./results/<stack>/<cell> by default', async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-iptables'], 'uploaded\n');
    const prefix = `${NETWORK_STACK}/dp-iptables/`;
    s3.on(ListObjectsV2Command, { Bucket: BUCKET, Prefix: prefix }).resolves({
      IsTruncated: false,
      Contents: [{ Key: `${prefix}status.json`, Size: 20, LastModified: NOW, ETag: '"s"' }],
    });
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${prefix}status.json` }).resolves({
      Body: body('{"state":"finished"}'),
      LastModified: NOW,
    });
    const out = join(tempDir('lab-results-'), 'cell');
    const run = await lab('results', '--stack', NETWORK_STACK, '--cell', 'dp-iptables', '--out', out);
    expect(run.code, run.stderr).toBe(0);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-iptables']],
    });
    expect(readFileSync(join(out, 'status.json'), 'utf8')).toBe('{"state":"finished"}');
    expect(defaultResultsDir(NETWORK_STACK, 'dp-iptables')).toBe('./results/NetworkLab/dp-iptables');
    expect(defaultResultsDir(STACK)).toBe(`./results/${STACK}`);
  });

  it('a network configuration without --cell, or with a cell it lacks, stops before any AWS call', async () => {
    const none = await lab(...NETWORK_CONFIG, 'status');
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      'lab status: the network lab has one host per cell: name one with --cell (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const unknown = await lab(...NETWORK_CONFIG, 'run', '--cell', 'dp-nft');
    expect(unknown.stderr).toBe(
      'lab run: --cell dp-nft: no such cell in network.cells (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const llm = await lab('status', '--cell', 'mesh');
    expect(llm.stderr).toContain('lab status: --cell mesh: cells belong to the network lab');
    expect(cfn).not.toHaveReceivedCommand(DescribeStacksCommand);
  });

  it('lab logs takes --cell: without it a network configuration names its cells; GPU-lab logs are refused', async () => {
    const none = await lab(...NETWORK_CONFIG, 'logs', 'runner');
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      'lab logs: the network lab has one host per cell: name one with --cell (cells: mesh, dp-iptables, dp-cilium)\n',
    );
    const replica = await lab(...NETWORK_CONFIG, 'logs', 'replica', '0', '--cell', 'mesh');
    expect(replica.code).toBe(1);
    expect(replica.stderr).toContain(
      '"replica" is a log of the LLM-gateway lab; a network-lab cell has: bootstrap, runner, pod (with --namespace plain, mesh or mesh-default; default plain).',
    );
    // A cell without a mesh has only the plain namespace.
    const plainCell = await lab(...NETWORK_CONFIG, 'logs', 'job', 'x', '--cell', 'dp-iptables');
    expect(plainCell.stderr).toContain('pod (with --namespace plain; default plain).');
    expect(cfn).not.toHaveReceivedCommand(DescribeStacksCommand);
  });

  it("lab logs pod names the mesh cell's other test-pod namespaces when the pod is not there", async () => {
    networkDeployed();
    ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
    ssm.on(GetCommandInvocationCommand, { CommandId: COMMAND_ID }).resolves({
      Status: 'Failed',
      ResponseCode: 7,
      StandardOutputContent: '',
      StandardErrorContent: 'pods in mesh: fortio-7d9f8-1\n',
    });
    const run = await lab(
      ...NETWORK_CONFIG,
      'logs',
      'pod',
      'fortio-x',
      '--cell',
      'mesh',
      '--namespace',
      'mesh',
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "pods in mesh: fortio-7d9f8-1 The cell's other test pods are in plain or mesh-default (--namespace).",
    );
  });

  it("lab logs --cell reads the cell's host", async () => {
    networkDeployed();
    cellAnswers(CELL_INSTANCES['dp-iptables'], 'runner line\n');
    const run = await lab(...NETWORK_CONFIG, 'logs', 'runner', '--cell', 'dp-iptables');
    // Aimed at the cell's instance (the fake host's answer is not a log, which is beside the point).
    expect(run.stderr).toContain(`the study runner's log on instance ${CELL_INSTANCES['dp-iptables']}`);
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      InstanceIds: [CELL_INSTANCES['dp-iptables']],
    });
  });

  it('with --stack only, the stack outputs name the cells', async () => {
    networkDeployed(['mesh', 'dp-cilium']);
    const none = await lab('results', '--stack', NETWORK_STACK, '--region', 'us-west-2');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(
      'Stack NetworkLab in us-west-2 is a network lab with one host per cell: name the cell with --cell (lab run, status, results; cells: mesh, dp-cilium).',
    );
    const unknown = await lab(
      'results',
      '--stack',
      NETWORK_STACK,
      '--region',
      'us-west-2',
      '--cell',
      'dp-iptables',
    );
    expect(unknown.stderr).toContain(
      'Stack NetworkLab in us-west-2 has no cell dp-iptables: its cells are mesh, dp-cilium.',
    );
    deployed();
    const gpu = await lab('results', '--stack', STACK, '--region', 'us-west-2', '--cell', 'mesh');
    expect(gpu.stderr).toContain(
      `Stack ${STACK} in us-west-2 has no cell mesh: it is an LLM-gateway lab (one GPU host): leave out --cell.`,
    );
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
  });
});

it('lab registers run, status and results', async () => {
  let help = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    help += String(chunk);
    return true;
  });
  try {
    await runLab(['--help']);
  } finally {
    out.mockRestore();
  }
  expect(help).toMatch(/^ {2}run \[options\] /m);
  expect(help).toMatch(/^ {2}status \[options\] /m);
  expect(help).toMatch(/^ {2}results \[options\] /m);
});
