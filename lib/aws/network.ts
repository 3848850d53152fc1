import { createHash } from 'node:crypto';
import { Annotations, RemovalPolicy, Stack, Token } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

export interface LabNetworkProps {
  /**
   * Availability Zones to give a subnet. The launch falls back across every AZ that offers the
   * instance type, so by default the network spans all AZs of the region (an env-agnostic stack
   * only knows two placeholder AZs).
   * @default every AZ CDK knows for the stack's environment
   */
  readonly availabilityZones?: string[];
}

/**
 * The lab's own VPC: one public subnet per Availability Zone, no NAT gateway (the host reaches the
 * internet through the public IP its launch asks for; the subnets assign none by themselves), and a security group with no inbound rule: access is through
 * SSM Session Manager only.
 */
export class LabNetwork extends Construct {
  readonly vpc: ec2.Vpc;
  /** One public subnet per AZ, in the VPC's AZ order. */
  readonly subnets: ec2.ISubnet[];
  readonly securityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: LabNetworkProps = {}) {
    super(scope, id);
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      ...(props.availabilityZones ? { availabilityZones: props.availabilityZones } : { maxAzs: 99 }),
      natGateways: 0,
      // No automatic public IP: the capacity launch asks for one on the host's network interface
      // (AssociatePublicIpAddress), so nothing else started in these subnets gets one by accident.
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 20, mapPublicIpOnLaunch: false },
      ],
      restrictDefaultSecurityGroup: true,
    });
    this.vpc.addFlowLog('FlowLog', {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(
        new logs.LogGroup(this, 'FlowLogs', {
          retention: logs.RetentionDays.ONE_WEEK,
          removalPolicy: RemovalPolicy.DESTROY,
        }),
      ),
      trafficType: ec2.FlowLogTrafficType.REJECT,
    });
    this.subnets = this.vpc.publicSubnets;
    if (props.availabilityZones === undefined && Token.isUnresolved(Stack.of(this).region)) {
      // Without a region CDK cannot look the zones up and makes two placeholder subnets.
      Annotations.of(this).addWarningV2(
        '@llm-gateway-lab/placeholder-azs',
        'Synthesized without an account and region: the VPC assumed 2 Availability Zones. Deploy with CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION (or env) set so that the launch can try every AZ of the region.',
      );
    }
    this.securityGroup = new ec2.SecurityGroup(this, 'HostSecurityGroup', {
      vpc: this.vpc,
      description: 'LLM-gateway lab GPU host: no inbound rule (SSM only), all outbound',
      allowAllOutbound: true,
    });
  }

  /**
   * Short hash of what makes CloudFormation replace the subnets or the security group a launch names
   * (each resource's logical id and its properties that update by replacement, the VPC's included:
   * docs/facts.md §2.6). A replaced subnet or group has a new id, so the launch's Update replaces the
   * host; a host's generation that includes this key gets a new WaitCondition for it.
   *
   * Only typed properties are read: resolving the group's rules now would freeze their lazy values.
   */
  replacementKey(): string {
    const stack = Stack.of(this);
    const vpc = this.vpc.node.defaultChild as ec2.CfnVPC;
    const group = this.securityGroup.node.defaultChild as ec2.CfnSecurityGroup;
    const identity = {
      vpc: [
        stack.getLogicalId(vpc),
        vpc.cidrBlock,
        vpc.instanceTenancy,
        vpc.ipv4IpamPoolId,
        vpc.ipv4NetmaskLength,
      ],
      subnets: this.subnets.map((subnet) => {
        const cfn = subnet.node.defaultChild as ec2.CfnSubnet;
        return [
          stack.getLogicalId(cfn),
          cfn.vpcId,
          cfn.cidrBlock,
          cfn.availabilityZone,
          cfn.availabilityZoneId,
        ];
      }),
      securityGroup: [stack.getLogicalId(group), group.vpcId, group.groupDescription, group.groupName],
    };
    return createHash('sha256')
      .update(JSON.stringify(stack.resolve(identity)))
      .digest('hex')
      .slice(0, 8);
  }
}
