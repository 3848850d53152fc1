import {
  CfnOutput,
  CfnWaitCondition,
  Duration,
  RemovalPolicy,
  Stack,
  type StackProps,
  Token,
  Validations,
} from 'aws-cdk-lib';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import type { LabConfig } from '../config/schema.ts';
import { KUBE_PROXY_NODE_PORT } from '../study/topology.ts';
import { acknowledgeControlTowerRules } from './acknowledgements.ts';
import { LOG_OBJECT } from './bootstrap/bootstrap.ts';
import { CapacityLaunch } from './capacity-launch/capacity-launch.ts';
import { GpuHost } from './gpu-host.ts';
import { LabNetwork } from './network.ts';
import { RoleCleanup } from './role-cleanup/role-cleanup.ts';

/** Days a replaced or deleted result file is kept as a noncurrent version of the results bucket. */
export const RESULTS_NONCURRENT_DAYS = 7;

export interface LabStackProps extends StackProps {
  /** The lab configuration both synthesizers share. */
  readonly config: LabConfig;
}

/**
 * The testbed on AWS: network, GPU host definition, the launch with Availability Zone fallback,
 * and a wait condition the bootstrap signals, so that `cdk deploy` returns only when the testbed
 * is usable and a failed bootstrap rolls the stack back.
 */
export class LabStack extends Stack {
  /** Where study results land; kept on `cdk destroy` so that destroying the lab keeps the data. */
  readonly resultsBucket: s3.Bucket;
  readonly network: LabNetwork;
  readonly host: GpuHost;
  readonly launch: CapacityLaunch;

  constructor(scope: Construct, id: string, props: LabStackProps) {
    super(scope, id, props);
    const { config } = props;

    this.resultsBucket = new s3.Bucket(this, 'Results', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      // The host syncs every 5 minutes, and each sync of a changed file leaves the old copy as a
      // noncurrent version: without expiry a long study piles them up in a bucket kept forever.
      lifecycleRules: [
        {
          id: 'ExpireReplacedResults',
          noncurrentVersionExpiration: Duration.days(RESULTS_NONCURRENT_DAYS),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // The TLS-only policy must stay with the retained bucket.
    this.resultsBucket.policy?.applyRemovalPolicy(RemovalPolicy.RETAIN);
    Validations.of(this.resultsBucket).acknowledge({
      id: 'AwsSolutions-S1',
      reason:
        "Only the lab's own host writes here, under its stack prefix; object-level access can be audited with CloudTrail data events without a second retained bucket",
    });
    this.network = new LabNetwork(this, 'Network');

    this.host = new GpuHost(this, 'Host', { config, resultsBucket: this.resultsBucket });

    this.launch = new CapacityLaunch(this, 'CapacityLaunch', {
      launchTemplate: this.host.launchTemplate,
      subnets: this.network.subnets,
      securityGroup: this.network.securityGroup,
      instanceType: config.instance.type,
      fallbackInstanceTypes: config.instance.fallbackTypes,
      preferredAzs: config.instance.preferredAzs,
      vcpusNeeded: config.instance.vcpus,
      instanceRole: this.host.role,
      // A replacement waits for the old host to terminate (its final upload may take up to 10
      // minutes), then launches and waits for the new one: more than the default 30 minutes.
      totalTimeout: Duration.minutes(50),
      // Relaunch exactly when the wait condition below is new, so every new host is waited for.
      generation: this.host.generation,
    });

    // Systems Manager may attach policies to the instance role after deploy; strip them before the
    // role is deleted, and only once the instance is gone (lab-spec 2.4).
    const roleCleanup = new RoleCleanup(this, 'RoleCleanup', { roles: [this.host.role] });
    roleCleanup.mustRunAfterDeletionOf(this.launch.resource);

    // Named by the host generation: a changed bootstrap or manifests set launches a new instance,
    // and cdk deploy must wait for that one's signal, not reuse the old, completed condition.
    const ready = new CfnWaitCondition(this, `Ready${this.host.generation}`, {
      handle: this.host.readyHandle.ref,
      count: 1,
      timeout: String(config.instance.readyTimeoutMinutes * 60),
    });
    // Waiting starts only once an instance exists to send the signal.
    ready.node.addDependency(this.launch);

    this.addOutputs(config, ready);
    acknowledgeControlTowerRules(this);
    Validations.of(this).acknowledge({
      id: 'CloudFormation-Validate::F6101',
      reason:
        'WaitCondition Data is a JSON string in outputs, as in the AWS::CloudFormation::WaitCondition documentation example',
    });
  }

  private addOutputs(config: LabConfig, ready: CfnWaitCondition): void {
    const instanceId = this.launch.instanceId;
    const output = (id: string, value: string, description: string) =>
      new CfnOutput(this, id, { value, description });
    output('InstanceId', instanceId, 'The GPU host');
    output('AvailabilityZone', this.launch.availabilityZone, 'Where capacity was found');
    output('InstanceType', this.launch.instanceType, 'The type that launched');
    output('LaunchAttempts', this.launch.attemptLog, 'Every Availability Zone tried, and why it failed');
    output(
      'ConnectCommand',
      `aws ssm start-session --region ${this.region} --target ${instanceId}`,
      'A shell on the host (SSM Session Manager; no SSH, no inbound rule)',
    );
    output(
      'PortForwardCommand',
      `aws ssm start-session --region ${this.region} --target ${instanceId} --document-name AWS-StartPortForwardingSession --parameters portNumber=${KUBE_PROXY_NODE_PORT},localPortNumber=8000`,
      'The kube-proxy front end on localhost:8000; for other front ends run kubectl port-forward in a session',
    );
    output(
      'ResultsBucketName',
      this.resultsBucket.bucketName,
      'Study results; retained on cdk destroy (versioned: see "Destroying the lab" in the README to delete it)',
    );
    output(
      'ResultsLocation',
      `s3://${this.resultsBucket.bucketName}/${this.stackName}/`,
      'Where the host syncs results',
    );
    output(
      'BootstrapLog',
      `s3://${this.resultsBucket.bucketName}/${this.stackName}/${LOG_OBJECT}`,
      'The bootstrap log, uploaded every few minutes: readable even when the host never signalled (a WaitCondition timeout)',
    );
    output(
      'EstimatedCostPerHour',
      `${config.instance.pricePerHourUsd.toFixed(2)} USD/hour on demand (${config.instance.type}, instance only)`,
      'From instance.pricePerHourUsd',
    );
    output(
      'MaxLifetime',
      `${config.instance.maxLifetimeHours} h after boot the host uploads results, shuts down and terminates (at most ${(config.instance.maxLifetimeHours * config.instance.pricePerHourUsd).toFixed(2)} USD)`,
      'Cost guard (instance.maxLifetimeHours)',
    );
    output(
      'ReadyReport',
      Token.asString(ready.attrData),
      'What the bootstrap reported: replicas, GPU UUIDs, shutdown deadline',
    );
  }
}
