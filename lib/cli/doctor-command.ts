import { type Command, CommanderError } from 'commander';
import type { LabConfig } from '../config/schema.ts';
import type { DoctorClients } from '../doctor/model.ts';
import { onCluster } from './cluster-commands.ts';
import { type ClusterOptions, withClusterOptions } from './cluster-options.ts';

interface DoctorCommandOptions extends ClusterOptions {
  readonly region?: string;
  readonly json?: boolean;
  readonly qualifier?: string;
  readonly toolkitStackName?: string;
}

/** Builds the AWS clients for a region (`undefined`: the SDK's own resolution). */
export type DoctorClientFactory = (region: string | undefined) => DoctorClients;

function fail(message: string): never {
  process.stderr.write(`lab doctor: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

/**
 * `lab doctor`: reads the account the credentials resolve to and says, line by line, whether
 * `cdk deploy` of the configuration can succeed there (credentials, CDK bootstrap, instance types,
 * AMIs, vCPU quotas, live lab hosts, deploy permissions). Read-only; exits 1 when a line fails.
 * Progress goes to stderr, so `--json` on stdout stays clean.
 */
export function registerDoctorCommand(program: Command, createClients?: DoctorClientFactory): void {
  withClusterOptions(
    program
      .command('doctor')
      .description(
        "check the AWS account before deploying: credentials, CDK bootstrap, instance types and AMIs in the region, vCPU quotas, live lab hosts and deploy permissions; with --kubeconfig/--context, check a cluster for lab install instead: GPUs, RuntimeClass, node labels and taints, the runner's node and results, RBAC (read-only; exits 1 on any FAIL)",
      ),
  )
    .option(
      '--region <region>',
      "the region to deploy to (default: the AWS SDK's: AWS_REGION, then the profile)",
    )
    .option('--json', 'print the report as JSON (lines with check, status, subject, message, fix; ok)')
    .option(
      '--qualifier <qualifier>',
      "the CDK bootstrap qualifier (default: cdk.json's @aws-cdk/core:bootstrapQualifier, else hnb659fds)",
    )
    .option('--toolkit-stack-name <name>', 'the CDK bootstrap stack (default: CDKToolkit)')
    .action(async (options: DoctorCommandOptions) => {
      const { loadLabConfig } = await import('../config/load.ts');
      const { config } = loadLabConfig({ file: program.opts().config });
      const { AwsCliError } = await import('../aws-cli/errors.ts');
      const { bootstrapRequirement } = await import('../doctor/bootstrap-requirement.ts');
      const { runDoctor, doctorPassed } = await import('../doctor/doctor.ts');
      const { doctorJson, formatDoctor } = await import('../doctor/format.ts');
      const progress = (step: string) => process.stderr.write(`lab doctor: ${step} ...\n`);
      if (options.kubeconfig || options.context) {
        await clusterDoctor(config, options, progress);
        return;
      }
      try {
        progress("reading this aws-cdk-lib's bootstrap requirement");
        const requirement = bootstrapRequirement({
          ...(options.qualifier === undefined ? {} : { qualifier: options.qualifier }),
          ...(options.toolkitStackName === undefined ? {} : { toolkitStackName: options.toolkitStackName }),
        });
        const clients = (createClients ?? (await import('./aws-clients.ts')).sdkDoctorClients)(
          options.region,
        );
        const report = await runDoctor(clients, config, { requirement, progress });
        process.stdout.write(options.json ? doctorJson(report) : formatDoctor(report));
        if (!doctorPassed(report)) throw new CommanderError(1, 'lab.doctor.failed', 'a check failed');
      } catch (error) {
        if (error instanceof AwsCliError) fail(error.message);
        throw error;
      }
    });
}

/** `lab doctor --kubeconfig/--context`: lab install's cluster checks as doctor lines. */
async function clusterDoctor(
  config: LabConfig,
  options: DoctorCommandOptions,
  progress: (step: string) => void,
): Promise<void> {
  const awsOnly = [
    ['--region', options.region],
    ['--qualifier', options.qualifier],
    ['--toolkit-stack-name', options.toolkitStackName],
  ].filter(([, value]) => value !== undefined);
  if (awsOnly.length > 0) {
    fail(
      `${awsOnly.map(([flag]) => flag).join(', ')}: for the AWS account check; --kubeconfig/--context check a cluster instead: use one or the other`,
    );
  }
  const { installPlan } = await import('../install/plan.ts');
  const { runClusterDoctor } = await import('../doctor/cluster.ts');
  const { clusterDoctorJson, clusterDoctorPassed, formatClusterDoctor } = await import('../doctor/format.ts');
  await onCluster('doctor', options, async ({ api }) => {
    const report = await runClusterDoctor(api, config, installPlan(config), progress);
    process.stdout.write(options.json ? clusterDoctorJson(report) : formatClusterDoctor(report));
    if (!clusterDoctorPassed(report)) throw new CommanderError(1, 'lab.doctor.failed', 'a check failed');
  });
}
