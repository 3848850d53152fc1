import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { GetCommandInvocationCommand, SendCommandCommand } from '@aws-sdk/client-ssm';
import { allCustomMatcher } from 'aws-sdk-client-mock-vitest';
import 'aws-sdk-client-mock-vitest/extend';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { renderStartStudy, runnerJob } from '../../lib/control/host-scripts.ts';
import type { SmokeChecklist } from '../../lib/study/smoke-checklist.ts';
import { BUCKET, deployed, mockDeployedLab, STACK, s3, ssm } from './deployed-lab.ts';
import { labAt } from './study-kit.ts';

/**
 * `lab run --smoke` and the checklist `lab status` prints (docs/first-run.md), with the upload
 * proofs it checks in the results bucket itself: the runner cannot see the host's sync.
 */

expect.extend(allCustomMatcher);

const NOW = new Date('2025-10-14T09:20:00.000Z');
const SMOKE_ID = '20251014-090000-5a0c4e11';
const COMMAND_ID = 'c0ffee00-aaaa-bbbb-cccc-1234567890ab';

const CHECKLIST: SmokeChecklist = {
  studyId: SMOKE_ID,
  writtenAt: '2025-10-14T09:08:00.000Z',
  passed: false,
  entries: [
    {
      subject: 'epp-completions',
      runId: 'smoke-arm-epp-completions-prefix',
      title: 'Smoke: EPP over /v1/completions',
      checks: [
        { proof: 'reset', status: 'pass', evidence: 'qwen3-0 log-confirmed, qwen3-1 log-confirmed' },
        {
          proof: 'prompt',
          status: 'fail',
          evidence: 'inference_extension_prefix_indexer_size is 0 after the run',
          fix: 'the Endpoint Picker indexed nothing',
        },
      ],
    },
  ],
};

const STATUS = {
  state: 'finished',
  studyId: SMOKE_ID,
  startedAt: '2025-10-14T09:00:00.000Z',
  updatedAt: '2025-10-14T09:08:00.000Z',
  totalRuns: 11,
  recordedRuns: 11,
  validRuns: 10,
  invalidRuns: 1,
  message: 'study finished: 10 of 11 runs valid',
  profile: 'smoke',
  checklist: CHECKLIST,
};

const lab = labAt(NOW);

function hostAnswers(stdout: string) {
  ssm.on(SendCommandCommand).resolves({ Command: { CommandId: COMMAND_ID } });
  ssm.on(GetCommandInvocationCommand).resolves({
    Status: 'Success',
    ResponseCode: 0,
    StandardOutputContent: stdout,
    StandardErrorContent: '',
  });
}

function body(text: string) {
  return { transformToString: async () => text } as never;
}

/** The smoke study's objects in the bucket: name to upload time. */
function uploaded(files: Record<string, string>) {
  const prefix = `${STACK}/studies/${SMOKE_ID}/`;
  s3.on(ListObjectsV2Command, { Bucket: BUCKET, Prefix: prefix }).resolves({
    Contents: Object.entries(files).map(([name, at]) => ({
      Key: `${prefix}${name}`,
      Size: 10,
      LastModified: new Date(at),
    })),
  });
}

beforeEach(() => {
  mockDeployedLab();
  vi.stubEnv('LAB_CONFIG', '');
});
afterEach(() => vi.unstubAllEnvs());

describe('lab run --smoke', () => {
  it('asks the runner for the smoke study; not with --new or --redo-invalid', async () => {
    deployed();
    hostAnswers('runner job: succeeded\n--- no status.json\n');
    const run = await lab('run', '--smoke', '--stack', STACK, '--region', 'us-west-2');
    expect(run.code, run.stderr).toBe(0);
    const job = runnerJob(parseLabConfig({}));
    expect(ssm).toHaveReceivedCommandWith(SendCommandCommand, {
      Parameters: { commands: renderStartStudy(job, { smoke: true }), executionTimeout: ['300'] },
    });
    const lines = ssm.commandCalls(SendCommandCommand)[0]?.args[0].input.Parameters?.commands ?? [];
    expect(lines).toContain("  date -u +%FT%TZ > '/var/lib/lab/results/smoke.request'");
    const both = await lab('run', '--smoke', '--new', '--stack', STACK, '--region', 'us-west-2');
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('--new, --redo-invalid and --smoke exclude each other');
  });
});

describe('lab status prints the smoke checklist', () => {
  it('from the host, with the uploads the host has not made yet as pending', async () => {
    deployed();
    hostAnswers(`runner job: succeeded\n--- status.json\n${JSON.stringify(STATUS)}\n`);
    uploaded({ 'runner.log': '2025-10-14T09:05:00.000Z' });
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    const at = `s3://${BUCKET}/${STACK}/studies/${SMOKE_ID}/`;
    expect(run.stdout).toContain(
      [
        `smoke checklist of study ${SMOKE_ID} (2025-10-14T09:08:00.000Z): FAILED`,
        'epp-completions (smoke-arm-epp-completions-prefix): 1 failed',
        '  PASS          verified cache reset: qwen3-0 log-confirmed, qwen3-1 log-confirmed',
        '  FAIL          front end saw the prompts: inference_extension_prefix_indexer_size is 0 after the run',
        '                fix: the Endpoint Picker indexed nothing',
        'host:',
        `  pending       results uploaded to S3: ${at}smoke-checklist.json: not there yet; the host uploads every 5 minutes and at shutdown (lab results uploads now)`,
        `  pending       runner log uploaded to S3: ${at}runner.log: only a copy from 2025-10-14T09:05:00.000Z, before the checklist; the host uploads every 5 minutes and at shutdown (lab results uploads now)`,
      ].join('\n'),
    );
  });

  it('from the synced copy once the instance is gone: an upload that never came fails with its fix', async () => {
    deployed('terminated');
    s3.on(GetObjectCommand, { Bucket: BUCKET, Key: `${STACK}/status.json` }).resolves({
      Body: body(JSON.stringify(STATUS)),
      LastModified: new Date('2025-10-14T09:10:00.000Z'),
    });
    uploaded({ 'smoke-checklist.json': '2025-10-14T09:10:00.000Z' });
    const run = await lab('status', '--stack', STACK);
    expect(run.code, run.stderr).toBe(0);
    const at = `s3://${BUCKET}/${STACK}/studies/${SMOKE_ID}/`;
    expect(run.stdout).toContain(
      `  PASS          results uploaded to S3: ${at}smoke-checklist.json uploaded 2025-10-14T09:10:00.000Z`,
    );
    expect(run.stdout).toContain(
      `  FAIL          runner log uploaded to S3: ${at}runner.log: not there yet, and the instance is gone`,
    );
    expect(run.stdout).toMatch(/fix: the host's upload \(lab-sync-results\) did not run/);
    expect(ssm).not.toHaveReceivedCommand(SendCommandCommand);
  });
});
