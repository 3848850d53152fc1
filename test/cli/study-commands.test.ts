import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudFormationServiceException, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { DescribeInstancesCommand, EC2ServiceException } from '@aws-sdk/client-ec2';
import { GetObjectCommand, ListObjectsV2Command, S3ServiceException } from '@aws-sdk/client-s3';
import {
  GetCommandInvocationCommand,
  InvalidInstanceId,
  SendCommandCommand,
  SSMServiceException,
} from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { renderStartStudy } from '../../lib/control/host-scripts.ts';
import { tempDir } from '../temp.ts';
import { BUCKET, cfn, deployed, ec2, INSTANCE, STACK, s3, ssm, stackWith } from './deployed-lab.ts';

import {
  COMMAND_ID,
  hostAnswers,
  job,
  lab,
  object,
  STATUS,
  statusBlock,
  useDeployedLab,
} from './study-kit.ts';

expect.extend(allCustomMatcher);
useDeployedLab();

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
