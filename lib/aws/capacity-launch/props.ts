/**
 * Property names of the CapacityLaunch custom resource, shared by the construct that writes them
 * and the handler that reads them. CloudFormation hands every scalar to the handler as a string.
 */
export const LaunchProps = {
  launchTemplateId: 'LaunchTemplateId',
  launchTemplateVersion: 'LaunchTemplateVersion',
  /** What a new instance is for; a change launches one. The template version by default. */
  generation: 'Generation',
  /** `[{ SubnetId, AvailabilityZone }]`, one per lab subnet. */
  subnets: 'Subnets',
  securityGroupId: 'SecurityGroupId',
  /** The primary type first, then the fallback types. */
  instanceTypes: 'InstanceTypes',
  preferredAzs: 'PreferredAzs',
  /** The only Availability Zone tried (a K3s agent goes where its server runs); absent: any. */
  requiredAz: 'RequiredAz',
  vcpusNeeded: 'VcpusNeeded',
  /** The On-Demand vCPU quota named in the quota message; empty: derived from the primary type. */
  quotaName: 'QuotaName',
  /** Its Service Quotas code, when known (empty otherwise). */
  quotaCode: 'QuotaCode',
  /** vCPUs every host of the stack needs of that quota at once (absent: this host alone). */
  stackVcpusNeeded: 'StackVcpusNeeded',
  /** Who needs them: `server 48 + gpu-1 48`. */
  stackVcpusHosts: 'StackVcpusHosts',
  /**
   * What to do instead when an Update finds the host gone under an unchanged generation; absent or
   * empty: relaunch. Set when a WaitCondition is keyed on the generation: that wait is over, so a
   * host launched under the same generation would run unwaited for (docs/facts.md §2.6).
   */
  relaunchAdvice: 'RelaunchAdvice',
  stackTagKey: 'StackTagKey',
  stackTagValue: 'StackTagValue',
} as const;

/** The properties whose change launches a new instance on Update (the others only shape messages). */
export const LAUNCH_INPUTS = [
  LaunchProps.launchTemplateId,
  LaunchProps.generation,
  LaunchProps.subnets,
  LaunchProps.securityGroupId,
  LaunchProps.instanceTypes,
  LaunchProps.preferredAzs,
  LaunchProps.requiredAz,
] as const;

/** Attribute names of the resource (`Fn::GetAtt`). */
export const LaunchAttributes = {
  instanceId: 'InstanceId',
  availabilityZone: 'AvailabilityZone',
  instanceType: 'InstanceType',
  attemptLog: 'AttemptLog',
  /** The instance's private IPv4 address (a K3s server's URL for its agents). */
  privateIpAddress: 'PrivateIpAddress',
} as const;

/** Subnet entries inside the `Subnets` property. */
export const SubnetFields = {
  subnetId: 'SubnetId',
  availabilityZone: 'AvailabilityZone',
} as const;
