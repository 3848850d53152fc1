import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DescribeInstancesCommand, EC2ServiceException } from '@aws-sdk/client-ec2';
import { GetObjectCommand, ListObjectsV2Command, NoSuchBucket, NoSuchKey } from '@aws-sdk/client-s3';
import { SendCommandCommand } from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { describe, expect, it } from 'vitest';
import { renderReadStatus, renderSyncResults } from '../../lib/control/host-scripts.ts';
import { sourceBlockOnPage } from '../../scripts/examples.ts';
import { tempDir } from '../temp.ts';
import {
  BUCKET,
  deployed,
  ec2,
  INSTANCE,
  labHost,
  liveHosts,
  STACK,
  s3,
  ssm,
  stackWith,
} from './deployed-lab.ts';
import { runStatusExample, statusExampleBlock } from './status-example.ts';

import {
  body,
  hostAnswers,
  job,
  lab,
  NOW,
  object,
  STATUS,
  statusBlock,
  useDeployedLab,
} from './study-kit.ts';

expect.extend(allCustomMatcher);
useDeployedLab();

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
    // docs/study-control.md's example (test/cli/status-example.ts): the host up an hour, one invalid run.
    const run = await runStatusExample();
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines).toContain(
      'study:     20251014-090000-3f2a9c1e, started 2025-10-14T09:00:00.000Z (results in studies/20251014-090000-3f2a9c1e/)',
    );
    expect(lines).toContain('invalid:   bound-p64');
    expect(lines).toContain('cost:      about 4.60 USD so far (instance up 1h00m00s at 4.6 USD/h)');
    expect(lines).toContain(
      `shutdown:  ${new Date(NOW.getTime() + 7 * 3_600_000).toISOString()} at the latest (instance.maxLifetimeHours 8), in 7h00m00s`,
    );
    expect(
      sourceBlockOnPage('docs/study-control.md', 'lab-status'),
      'docs/study-control.md: the lab status example is stale; run npm run docs:examples',
    ).toBe(statusExampleBlock(run.stdout));
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
