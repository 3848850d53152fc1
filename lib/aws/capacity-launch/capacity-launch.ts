import { ArnFormat, CustomResource, Duration, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { acknowledgeHandler, acknowledgeProviderFramework } from '../acknowledgements.ts';
import { HandlerBundling, handlerCode, handlerName } from '../handler-code.ts';
import { STACK_TAG_KEY } from '../tags.ts';
import type { OnDemandQuota, StackQuotaNeed, StackTag } from './launch.ts';
import { LaunchAttributes, LaunchProps, SubnetFields } from './props.ts';

/** The tag key every launched instance and volume carries; termination is allowed only on it. */
export const DEFAULT_STACK_TAG_KEY = STACK_TAG_KEY;

// The Provider framework's waiter cannot run longer than this.
const MAX_TOTAL_TIMEOUT = Duration.hours(1);

export interface CapacityLaunchProps {
  /**
   * The host's launch template. It must carry no network interfaces and no security groups: every
   * attempt gives its own subnet, public IP and security group on a network interface, and EC2
   * rejects a request that has those beside the template's. Its latest version is launched, so a
   * new template version launches a new instance on the next deploy.
   */
  readonly launchTemplate: ec2.LaunchTemplate;
  /** The lab's subnets, at most one per Availability Zone is used; the instance gets a public IP. */
  readonly subnets: ec2.ISubnet[];
  /** Put on the instance's network interface. */
  readonly securityGroup: ec2.ISecurityGroup;
  /** The EC2 instance type tried first, e.g. g6.12xlarge. */
  readonly instanceType: string;
  /**
   * Types tried, in order, after every offered Availability Zone failed for the one before.
   *
   * @default - none: only `instanceType`
   */
  readonly fallbackInstanceTypes?: string[];
  /**
   * Availability Zones tried first, in this order; each must have one of `subnets`.
   *
   * @default - none: the offered AZs in name order
   */
  readonly preferredAzs?: string[];
  /**
   * The only Availability Zone to launch in, e.g. a K3s server's (a token from its launch): the
   * fallback types are tried there, other AZs never. Overrides `preferredAzs`.
   *
   * @default - any AZ with a lab subnet that offers the type
   */
  readonly availabilityZone?: string;
  /** vCPUs of `instanceType`, named in the quota message (48 for g6.12xlarge). */
  readonly vcpusNeeded: number;
  /**
   * The On-Demand vCPU quota the instances count against, named when a launch stops on it.
   *
   * @default - derived from the failing type's family (launch.ts onDemandQuotaFor)
   */
  readonly quota?: OnDemandQuota;
  /**
   * What every host of the stack needs of this host's quota at once, named in the quota message
   * (an increase to one host's size would stop the next launch).
   *
   * @default - the message names this host's vCPUs only
   */
  readonly stackNeed?: StackQuotaNeed;
  /** The role of the instance profile in the launch template: the launch function may pass only it. */
  readonly instanceRole: iam.IRole;
  /**
   * The tag put on the instance and its volumes at launch; termination is allowed only on instances
   * carrying it.
   *
   * @default - { key: 'llm-gateway-lab:stack', value: the stack name }
   */
  readonly stackTag?: StackTag;
  /**
   * How long the launch may take until the instance is running (at most 1 hour).
   *
   * @default Duration.minutes(30)
   */
  readonly totalTimeout?: Duration;
  /**
   * Time between two checks of the instance state.
   *
   * @default Duration.seconds(15)
   */
  readonly queryInterval?: Duration;
  /**
   * How long the launch functions' logs are kept.
   *
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Names what the instance boots with. A running instance is replaced when this, the launch
   * template, the subnets, the security group, the types or the AZ preference change
   * (LAUNCH_INPUTS, props.ts); a caller that keys a wait on it must fold all of those into it
   * (LabHost does), or a replacement caused by one of them runs with nothing waiting for it. A new
   * template version alone (e.g. a newer AMI behind an SSM parameter) keeps the running host.
   *
   * @default - the launch template's latest version number
   */
  readonly generation?: string;
  /**
   * When set, an Update that finds the host gone (its lifetime guard or a person ended it) while
   * its generation stays the same fails with this advice instead of relaunching: for a caller
   * whose WaitCondition is keyed on `generation`, that wait is over, and a host launched under it
   * would run with nothing waiting for its bootstrap. The advice says how to get a new generation.
   *
   * @default - such an Update relaunches under the same generation
   */
  readonly relaunchAdvice?: string;
}

function problem(prop: string, detail: string): Error {
  return new Error(`CapacityLaunch: ${prop} ${detail}`);
}

/** Eager checks of the props whose values are known at synthesis; tokens are left to deploy time. */
export function validateCapacityLaunchProps(props: CapacityLaunchProps): void {
  if (props.subnets.length === 0) throw problem('subnets', 'must list at least one subnet, got []');
  if (!props.instanceType.trim())
    throw problem('instanceType', `must name an instance type, got "${props.instanceType}"`);
  const types = [props.instanceType, ...(props.fallbackInstanceTypes ?? [])];
  const repeated = types.find((t, i) => types.indexOf(t) !== i);
  if (repeated !== undefined) {
    throw problem('fallbackInstanceTypes', `must not repeat a type already tried, got "${repeated}" twice`);
  }
  if (!Number.isInteger(props.vcpusNeeded) || props.vcpusNeeded < 1) {
    throw problem('vcpusNeeded', `must be a whole number of at least 1, got ${props.vcpusNeeded}`);
  }
  const subnetAzs = props.subnets.map((s) => s.availabilityZone);
  if (!subnetAzs.some((az) => Token.isUnresolved(az))) {
    for (const az of props.preferredAzs ?? []) {
      if (!subnetAzs.includes(az)) {
        throw problem(
          'preferredAzs',
          `names "${az}", which has no subnet; the subnets are in ${[...new Set(subnetAzs)].sort().join(', ')}`,
        );
      }
    }
  }
  const total = props.totalTimeout?.toSeconds();
  if (total !== undefined && (total < 60 || total > MAX_TOTAL_TIMEOUT.toSeconds())) {
    throw problem('totalTimeout', `must be from 1 minute to 1 hour, got ${total} seconds`);
  }
  const interval = props.queryInterval?.toSeconds();
  if (interval !== undefined && (interval < 1 || interval >= (total ?? 1800))) {
    throw problem(
      'queryInterval',
      `must be at least 1 second and less than totalTimeout, got ${interval} seconds`,
    );
  }
  const key = props.stackTag?.key;
  if (key !== undefined && (key === '' || key.toLowerCase().startsWith('aws:'))) {
    throw problem('stackTag', `key must be non-empty and not start with "aws:", got "${key}"`);
  }
}

/** Why the resolved launch template data cannot be combined with the per-attempt network interface. */
export function launchTemplateProblems(data: Record<string, unknown> | undefined): string[] {
  const present = (name: string) => {
    const value = data?.[name];
    return value !== undefined && !(Array.isArray(value) && value.length === 0);
  };
  return ['networkInterfaces', 'securityGroupIds', 'securityGroups']
    .filter(present)
    .map(
      (name) => `the launch template sets ${name}; CapacityLaunch gives the network interface per attempt`,
    );
}

const HANDLER_RUNTIME = lambda.Runtime.NODEJS_22_X;

/**
 * Both functions run one bundle (index.mjs, an ES module), made by esbuild in the synthesizing
 * process, no Docker. The Node 22 runtime provides the AWS SDK v3 (and its @smithy packages).
 */
const HANDLER_BUNDLING = new HandlerBundling({
  entry: new URL('./handler.ts', import.meta.url),
  runtime: HANDLER_RUNTIME,
  format: 'esm',
  minify: true,
  externalModules: ['@aws-sdk/*', '@smithy/*'],
});

/**
 * Launches the lab's GPU host with Availability Zone fallback: a custom resource whose handler tries
 * every AZ that offers the type, then the fallback types, and reports each attempt (docs/facts.md §2.1).
 *
 * One host at a time: when an update changes the launch inputs, `onEvent` terminates the old host
 * and `isComplete` launches the replacement only once the old one is `terminated`, so an update
 * needs the vCPU quota of one host, not two. Client tokens derive from the CloudFormation request
 * id and the AZ, a live instance tagged with this stack and generation is adopted instead of
 * launching another, and a launch whose reply was lost is looked up by its token.
 */
export class CapacityLaunch extends Construct {
  /** The launched instance's id. */
  readonly instanceId: string;
  /** The Availability Zone the instance runs in. */
  readonly availabilityZone: string;
  /** The instance type that was launched (the primary or a fallback). */
  readonly instanceType: string;
  /** One line per attempt, newest kept when shortened. */
  readonly attemptLog: string;
  /** The instance's private IPv4 address. */
  readonly privateIpAddress: string;
  /** The function that launches, keeps or terminates the instance. */
  readonly onEventFunction: lambda.Function;
  /** The function that waits for `running` or `terminated`. */
  readonly isCompleteFunction: lambda.Function;
  /** The custom resource itself: what deletion-order dependencies should name. */
  readonly resource: CustomResource;

  constructor(scope: Construct, id: string, props: CapacityLaunchProps) {
    super(scope, id);
    validateCapacityLaunchProps(props);
    const stack = Stack.of(this);
    const stackTag = props.stackTag ?? { key: DEFAULT_STACK_TAG_KEY, value: stack.stackName };
    const template = props.launchTemplate;
    const templateId = template.launchTemplateId as string;
    const retention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;

    this.node.addValidation({
      validate: () => {
        const cfn = template.node.defaultChild as ec2.CfnLaunchTemplate;
        return launchTemplateProblems(stack.resolve(cfn.launchTemplateData));
      },
    });

    this.onEventFunction = this.handlerFunction('OnEvent', 'onEvent', Duration.minutes(10), retention);
    // isComplete launches too: a replacement launches only once the old host is terminated.
    this.isCompleteFunction = this.handlerFunction(
      'IsComplete',
      'isComplete',
      Duration.minutes(10),
      retention,
    );
    const launchers = [this.onEventFunction, this.isCompleteFunction];

    const arn = (resource: string, resourceName: string, account?: string) =>
      stack.formatArn({
        service: 'ec2',
        resource,
        resourceName,
        account,
        arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
      });
    const templateArn = arn('launch-template', templateId);
    const instanceArns = arn('instance', '*');

    for (const fn of launchers) {
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'RunInstancesFromTheLabTemplateOnly',
          actions: ['ec2:RunInstances'],
          resources: [instanceArns],
          conditions: {
            ArnLike: { 'ec2:LaunchTemplate': templateArn },
            StringEquals: {
              [`aws:RequestTag/${stackTag.key}`]: stackTag.value,
              // Only the types this resource may launch (the primary and its fallbacks).
              'ec2:InstanceType': [props.instanceType, ...(props.fallbackInstanceTypes ?? [])],
            },
          },
        }),
      );
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'RunInstancesUsesTheLabNetworkAndTemplate',
          actions: ['ec2:RunInstances'],
          // Interfaces and volumes are created by the launch, so their ids are not known beforehand;
          // the image comes from the template (a public AMI: no account in its ARN).
          resources: [
            templateArn,
            ...props.subnets.map((s) => arn('subnet', s.subnetId)),
            arn('security-group', props.securityGroup.securityGroupId),
            arn('network-interface', '*'),
            arn('volume', '*'),
            arn('image', '*', ''),
          ],
        }),
      );
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'TagOnlyWhileLaunching',
          actions: ['ec2:CreateTags'],
          resources: [instanceArns, arn('volume', '*')],
          conditions: { StringEquals: { 'ec2:CreateAction': 'RunInstances' } },
        }),
      );
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'PassOnlyTheInstanceRole',
          actions: ['iam:PassRole'],
          resources: [props.instanceRole.roleArn],
          conditions: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
        }),
      );
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'TerminateOnlyTheStacksInstances',
          actions: ['ec2:TerminateInstances'],
          resources: [instanceArns],
          conditions: { StringEquals: { [`aws:ResourceTag/${stackTag.key}`]: stackTag.value } },
        }),
      );
      // Whether a launch request still stands (standing.ts): this stack only.
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'ReadThisStacksStatus',
          actions: ['cloudformation:DescribeStacks', 'cloudformation:DescribeStackResource'],
          resources: [stack.stackId],
        }),
      );
      // DescribeInstances and DescribeInstanceTypeOfferings do not support resource-level permissions.
      fn.addToRolePolicy(
        new iam.PolicyStatement({
          sid: 'ReadInstancesAndOfferings',
          actions: ['ec2:DescribeInstances', 'ec2:DescribeInstanceTypeOfferings'],
          resources: ['*'],
        }),
      );
    }

    const provider = new cr.Provider(this, 'Provider', {
      onEventHandler: this.onEventFunction,
      isCompleteHandler: this.isCompleteFunction,
      totalTimeout: props.totalTimeout ?? Duration.minutes(30),
      queryInterval: props.queryInterval ?? Duration.seconds(15),
      logGroup: new logs.LogGroup(this, 'ProviderLogs', { retention, removalPolicy: RemovalPolicy.DESTROY }),
    });

    acknowledgeHandler(this.onEventFunction);
    acknowledgeHandler(this.isCompleteFunction);
    acknowledgeProviderFramework(provider, [this.onEventFunction, this.isCompleteFunction]);
    const wildcard = (resource: string, account = '<AWS::AccountId>') =>
      `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:${account}:${resource}/*]`;
    for (const fn of launchers)
      Validations.of(fn).acknowledge(
        {
          id: wildcard('instance'),
          reason:
            'The instance id is not known before RunInstances; launching requires this template and the stack tag, terminating requires the stack tag',
        },
        {
          id: wildcard('network-interface'),
          reason:
            'RunInstances creates the interface, so its id cannot be known; it is created only with the lab template in the lab subnets',
        },
        {
          id: wildcard('volume'),
          reason:
            'RunInstances creates the root volume, so its id cannot be known; tagging is allowed only during RunInstances',
        },
        {
          id: wildcard('image', ''),
          reason: 'The AMI is a public DLAMI resolved from SSM at deploy time; the template fixes which one',
        },
        {
          id: 'AwsSolutions-IAM5[Resource::*]',
          reason:
            'DescribeInstances and DescribeInstanceTypeOfferings do not support resource-level permissions',
        },
      );

    const resource = new CustomResource(this, 'Resource', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::CapacityLaunch',
      properties: {
        [LaunchProps.launchTemplateId]: templateId,
        [LaunchProps.launchTemplateVersion]: template.latestVersionNumber,
        [LaunchProps.generation]: props.generation ?? template.latestVersionNumber,
        [LaunchProps.subnets]: props.subnets.map((s) => ({
          [SubnetFields.subnetId]: s.subnetId,
          [SubnetFields.availabilityZone]: s.availabilityZone,
        })),
        [LaunchProps.securityGroupId]: props.securityGroup.securityGroupId,
        [LaunchProps.instanceTypes]: [props.instanceType, ...(props.fallbackInstanceTypes ?? [])],
        [LaunchProps.preferredAzs]: props.preferredAzs ?? [],
        // Only when set: an unchanged one-host stack keeps its launch inputs, and so its host.
        ...(props.availabilityZone === undefined ? {} : { [LaunchProps.requiredAz]: props.availabilityZone }),
        [LaunchProps.vcpusNeeded]: props.vcpusNeeded,
        [LaunchProps.quotaName]: props.quota?.name ?? '',
        [LaunchProps.quotaCode]: props.quota?.code ?? '',
        ...(props.stackNeed
          ? {
              [LaunchProps.stackVcpusNeeded]: props.stackNeed.vcpus,
              [LaunchProps.stackVcpusHosts]: props.stackNeed.hosts,
            }
          : {}),
        // Only when set: a stack without it keeps its properties, and so its host.
        ...(props.relaunchAdvice ? { [LaunchProps.relaunchAdvice]: props.relaunchAdvice } : {}),
        [LaunchProps.stackTagKey]: stackTag.key,
        [LaunchProps.stackTagValue]: stackTag.value,
      },
    });
    // The role (and its policies) outlive the instance: on delete the instance goes first.
    resource.node.addDependency(props.instanceRole);
    this.resource = resource;

    this.instanceId = resource.getAttString(LaunchAttributes.instanceId);
    this.availabilityZone = resource.getAttString(LaunchAttributes.availabilityZone);
    this.instanceType = resource.getAttString(LaunchAttributes.instanceType);
    this.attemptLog = resource.getAttString(LaunchAttributes.attemptLog);
    this.privateIpAddress = resource.getAttString(LaunchAttributes.privateIpAddress);
  }

  private handlerFunction(
    id: string,
    handler: string,
    timeout: Duration,
    retention: logs.RetentionDays,
  ): lambda.Function {
    return new lambda.Function(this, id, {
      code: handlerCode(HANDLER_BUNDLING),
      handler: handlerName(HANDLER_BUNDLING, handler),
      runtime: HANDLER_RUNTIME,
      timeout,
      memorySize: 256,
      logGroup: new logs.LogGroup(this, `${id}Logs`, { retention, removalPolicy: RemovalPolicy.DESTROY }),
    });
  }
}
