import { DescribeInstancesCommand } from '@aws-sdk/client-ec2';
import { Command } from 'commander';
import { sdkControlClients } from '../../lib/cli/aws-clients.ts';
import { registerStudyCommands } from '../../lib/cli/study-commands.ts';
import { cfn, deployed, ec2, INSTANCE, mockDeployedLab, STACK, s3, ssm } from './deployed-lab.ts';
import { exampleOutput } from './example-output.ts';
import { hostAnswers, NOW, STATUS, statusBlock } from './study-host.ts';

/**
 * docs/study-control.md's `lab status` example: the real command against the mocked deployed lab
 * of test/cli/deployed-lab.ts (SSM, S3, EC2, CloudFormation through aws-sdk-client-mock), its
 * runner 15 minutes into the default study with one invalid run, the host up an hour, the clock
 * fixed. npm run docs:examples writes it (scripts/example-sources.ts: lab-status) and
 * test/cli/status-results-commands.test.ts fails when the page differs.
 */

export const EXAMPLE_STATUS = {
  ...STATUS,
  studyId: '20251014-090000-3f2a9c1e',
  studyStartedAt: '2025-10-14T09:00:00.000Z',
  invalidRunIds: ['bound-p64'],
};

/** Mocks the lab (afresh) as the example has it. */
export function mockStatusExample(): void {
  mockDeployedLab();
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
  hostAnswers(`runner job: active\n${statusBlock(EXAMPLE_STATUS)}`);
}

/** `lab status --stack <stack>` on the example's lab at its clock: exit code and standard output. */
export async function runStatusExample(): Promise<{ code: number; stdout: string }> {
  mockStatusExample();
  const program = new Command('lab').option('-c, --config <file>').exitOverride();
  registerStudyCommands(program, {
    createClients: (region) => sdkControlClients(region ?? 'us-west-2'),
    sleep: async () => {},
    now: () => NOW,
  });
  const { value: code, stdout } = await exampleOutput(async () => {
    try {
      await program.parseAsync(['status', '--stack', STACK], { from: 'user' });
      return 0;
    } catch (error) {
      const exitCode = (error as { exitCode?: number }).exitCode;
      if (typeof exitCode !== 'number') throw error;
      return exitCode;
    }
  });
  return { code, stdout };
}

/** The page's block: the command line and what it printed. */
export function statusExampleBlock(stdout: string): string {
  return `$ bin/lab.ts status\n${stdout.replace(/\n+$/, '')}`;
}

/** Runs the example and leaves the SDK clients unmocked. */
export async function statusExample(): Promise<string> {
  try {
    const { code, stdout } = await runStatusExample();
    if (code !== 0) throw new Error(`lab status exited with ${code} in the example`);
    return statusExampleBlock(stdout);
  } finally {
    for (const client of [cfn, ec2, ssm, s3]) client.restore();
  }
}
