import type { LabConfig } from '../config/schema.ts';
import { checkAmis } from './ami.ts';
import { checkAssetKey } from './asset-key.ts';
import { type BootstrapRequirement, checkBootstrap } from './bootstrap.ts';
import { resolveCaller } from './credentials.ts';
import { notChecked } from './errors.ts';
import { doctorHosts, preferredAzs, pricePerHour } from './hosts.ts';
import { checkInstanceTypes } from './instance-types.ts';
import { type InstanceSummary, readInstances } from './instances.ts';
import { judgeLiveHosts } from './live-hosts.ts';
import type { CallerContext, DoctorClients, DoctorLine, Progress } from './model.ts';
import { checkPermissions } from './permissions.ts';
import { checkQuotas } from './quota.ts';

/**
 * `lab doctor`: every check, in order, against one account and region. Each check takes the
 * injected clients; a check whose call fails becomes a warning line, and only missing credentials
 * or a missing region stop the run (thrown as the shared one-line AWS error).
 */

export interface DoctorReport {
  readonly stackName: string;
  readonly lab: LabConfig['lab'];
  readonly account: string;
  readonly region: string;
  readonly lines: readonly DoctorLine[];
}

export interface DoctorOptions {
  readonly requirement: BootstrapRequirement;
  readonly progress?: Progress;
  /** The clock the host ages are measured with. */
  readonly now?: () => Date;
}

/** Whether `cdk deploy` can be expected to succeed: no line failed. */
export function doctorPassed(report: DoctorReport): boolean {
  return report.lines.every((line) => line.status !== 'fail');
}

export async function runDoctor(
  clients: DoctorClients,
  config: LabConfig,
  options: DoctorOptions,
): Promise<DoctorReport> {
  const say = options.progress ?? (() => {});
  const now = options.now ?? (() => new Date());
  say('resolving the credentials and region (sts:GetCallerIdentity)');
  const { caller, line: credentials } = await resolveCaller(clients);
  const hosts = doctorHosts(config);
  const lines: DoctorLine[] = [credentials];
  say(
    `reading the CDK bootstrap (${options.requirement.toolkitStackName}, ${options.requirement.versionParameter})`,
  );
  lines.push(await checkBootstrap(clients, options.requirement, caller));
  say(`reading the key of the CDK asset bucket (${options.requirement.toolkitStackName} parameters)`);
  lines.push(await checkAssetKey(clients, config.aws.assetKeyArns, options.requirement, caller));
  say('reading the instance type offerings per Availability Zone');
  const types = await checkInstanceTypes(clients, hosts, preferredAzs(config), caller);
  lines.push(...types.lines);
  // The quota counts a type's real vCPUs, whatever the configuration says.
  const counted = hosts.map((host) => ({
    ...host,
    vcpus: types.sizes.get(host.types[0] ?? '')?.vcpus ?? host.vcpus,
  }));
  say('resolving the AMI parameters');
  lines.push(...(await checkAmis(clients, hosts, caller)));
  say("reading the region's instances");
  const instances = await readInstancesOrLine(clients, caller);
  say('reading the vCPU quotas (Service Quotas)');
  lines.push(
    ...(await checkQuotas(
      clients,
      counted,
      config.stackName,
      Array.isArray(instances) ? instances : undefined,
      caller,
    )),
  );
  lines.push(
    ...(Array.isArray(instances)
      ? judgeLiveHosts(instances, config.stackName, (type) => pricePerHour(config, type), caller, now())
      : [instances]),
  );
  say('simulating the deploy permissions (iam:SimulatePrincipalPolicy)');
  lines.push(...(await checkPermissions(clients, options.requirement, caller)));
  return {
    stackName: config.stackName,
    lab: config.lab,
    account: caller.account,
    region: caller.region,
    lines,
  };
}

async function readInstancesOrLine(
  clients: DoctorClients,
  caller: CallerContext,
): Promise<InstanceSummary[] | DoctorLine> {
  try {
    return await readInstances(clients);
  } catch (error) {
    return notChecked('live-hosts', caller.region, 'ec2:DescribeInstances', error);
  }
}
