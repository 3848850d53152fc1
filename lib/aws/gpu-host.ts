import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CfnElement, CfnWaitConditionHandle, Stack, Validations } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3assets from 'aws-cdk-lib/aws-s3-assets';
import { Construct } from 'constructs';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import type { LabConfig } from '../config/schema.ts';
import { lifetimeMinutes, renderLauncher, writeBootstrapFolder } from './bootstrap/index.ts';

/**
 * The root volume's gp3 throughput: the model cache lives there, and loading weights at gp3's
 * baseline of 125 MiB/s would take minutes per replica. gp3 allows up to 0.25 MiB/s per
 * provisioned IOPS (3,000 by default, so 750 MiB/s); the extra throughput is billed by the
 * MiB/s-month (aws-cdk-lib aws-ec2 EbsDeviceOptionsBase.throughput; EBS User Guide, gp3).
 */
export const ROOT_VOLUME_THROUGHPUT_MIBPS = 500;

/** CDK context key whose new value makes the next deploy launch a fresh host. */
export const RELAUNCH_CONTEXT_KEY = 'relaunch';

/**
 * What a lab host's launch says when an Update finds the host gone under its old generation: only a
 * new generation gets a WaitCondition that waits for the new host (docs/facts.md §2.6).
 */
export const RELAUNCH_ADVICE = `Launch a new host, waited for by a new WaitCondition, with: npx cdk deploy -c ${RELAUNCH_CONTEXT_KEY}=$(date +%s)`;

/** The instance settings a host is launched and identified with (GPU host or network-lab cell). */
export interface HostInstanceSettings {
  readonly type: string;
  readonly fallbackTypes: readonly string[];
  readonly preferredAzs: readonly string[];
  readonly rootVolumeGiB: number;
  readonly amiParameter: string;
}

export interface LabHostProps {
  readonly instance: HostInstanceSettings;
  /** The instance role's description: who the host is. */
  readonly description: string;
  /**
   * The host's lifetime in minutes (its maxLifetimeHours): the deadline the user data arms first,
   * before the bootstrap's persistent timer replaces it.
   */
  readonly lifetimeMinutes: number;
  /**
   * The network's replacement key (LabNetwork.replacementKey): a replaced subnet or security group
   * replaces the host, so it is part of the generation and the host gets a new WaitCondition.
   */
  readonly networkKey: string;
  /** Writes the manifests folder the host applies (synthesized in-process, never a stale dist/). */
  readonly writeManifests: (dir: string) => void;
  /** Writes the bootstrap folder: the shell program and its settings.env. */
  readonly writeBootstrap: (dir: string) => void;
  /** Where the host syncs study results; the role may write only under `resultsPrefix`. */
  readonly resultsBucket: s3.IBucket;
  /** The host's prefix of the results bucket, ending in `/` (what its settings.env uses too). */
  readonly resultsPrefix: string;
  /**
   * Deploy-time inputs the launcher exports (tokens: a server URL, a secret ARN).
   *
   * @default - none
   */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * Whatever else should launch a new instance when it changes, e.g. a K3s agent's server
   * generation: an agent must join every new server.
   *
   * @default - nothing else
   */
  readonly generationInputs?: string;
  /**
   * Customer-managed KMS keys of the CDK asset bucket (config `aws.assetKeyArns`): the host gets
   * kms:Decrypt on exactly these, through S3 only, to read its bootstrap and manifests objects.
   *
   * @default - none: the bucket's key needs no IAM statement (AWS managed, or the bootstrap's own)
   */
  readonly assetKeyArns?: readonly string[];
}

/**
 * Everything that defines a lab host except its launch: the instance role, the bootstrap and
 * the synthesized manifests as S3 assets, and the launch template whose user data is a small
 * launcher (user data is limited to 16 KB; the bootstrap itself is far larger). The GPU host and
 * each network-lab cell are one of these.
 */
export class LabHost extends Construct {
  readonly role: iam.Role;
  readonly launchTemplate: ec2.LaunchTemplate;
  /** Managed policies the stack itself attaches to the role (the allow-list of the role cleanup). */
  readonly managedPolicies: readonly iam.IManagedPolicy[];
  /**
   * Short hash of what the host boots with (bootstrap and manifests). A new generation launches a
   * new instance, so whatever waits for its signal must be new as well.
   */
  readonly generation: string;
  /** The handle this generation's bootstrap signals SUCCESS or FAILURE to (a presigned URL). */
  readonly readyHandle: CfnWaitConditionHandle;

  constructor(scope: Construct, id: string, props: LabHostProps) {
    super(scope, id);
    const { instance } = props;
    const stack = Stack.of(this);

    this.managedPolicies = [iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore')];
    this.role = new iam.Role(this, 'InstanceRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: props.description,
      managedPolicies: [...this.managedPolicies],
    });

    // AmazonSSMManagedInstanceCore allows ssm:GetParameter* on every parameter of the account
    // ("Resource": "*"); Session Manager needs none of them and the host reads none (its AMI
    // parameter is resolved by CloudFormation), so an explicit deny keeps the account's
    // parameters, SecureStrings included, out of the host's reach.
    this.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'NoParameterReads',
        effect: iam.Effect.DENY,
        actions: [
          'ssm:GetParameter',
          'ssm:GetParameters',
          'ssm:GetParametersByPath',
          'ssm:GetParameterHistory',
        ],
        resources: [
          stack.formatArn({
            service: 'ssm',
            resource: 'parameter',
            resourceName: '*',
            region: '*',
            account: '*',
          }),
        ],
      }),
    );

    // The manifests are synthesized here, in-process, from the same config: never a stale dist/.
    const manifestsDir = mkdtempSync(join(tmpdir(), 'lab-manifests-'));
    props.writeManifests(manifestsDir);
    const manifests = new s3assets.Asset(this, 'Manifests', { path: manifestsDir });
    // The bootstrap folder: the shell program of lib/aws/bootstrap/sh and its settings.env.
    const bootstrapDir = mkdtempSync(join(tmpdir(), 'lab-bootstrap-'));
    props.writeBootstrap(bootstrapDir);
    const bootstrap = new s3assets.Asset(this, 'Bootstrap', { path: bootstrapDir });
    // Exactly the two asset objects, not the whole staging bucket.
    this.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:GetObject'],
        resources: [manifests, bootstrap].map((asset) => asset.bucket.arnForObjects(asset.s3ObjectKey)),
      }),
    );
    // A bucket encrypted with a customer-managed key (cdk bootstrap --bootstrap-kms-key-id) serves
    // an object only to a caller that may decrypt with that key; S3 asks KMS on the caller's behalf,
    // so kms:ViaService confines the grant to S3 of this region (docs/facts.md §2.7).
    const assetKeyArns = props.assetKeyArns ?? [];
    if (assetKeyArns.length > 0) {
      this.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'DecryptTheAssetsThroughS3',
          actions: ['kms:Decrypt'],
          resources: [...assetKeyArns],
          conditions: { StringEquals: { 'kms:ViaService': `s3.${stack.region}.amazonaws.com` } },
        }),
      );
    }
    // `aws s3 sync` of the results folder, both ways: list, write and read under the host's prefix only.
    const { resultsPrefix } = props;
    this.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [props.resultsBucket.bucketArn],
        conditions: { StringLike: { 's3:prefix': [`${resultsPrefix}*`] } },
      }),
    );
    this.role.addToPolicy(
      new iam.PolicyStatement({
        // Put: the results sync. Get: a relaunched host restores its studies (07-apply.sh restore_studies).
        actions: ['s3:PutObject', 's3:GetObject'],
        resources: [props.resultsBucket.arnForObjects(`${resultsPrefix}*`)],
      }),
    );
    Validations.of(this.role).acknowledge(
      {
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]',
        reason:
          'Session Manager is the only way in (no SSH, no inbound rule); this AWS-maintained policy is the minimum SSM documents for it',
      },
      {
        id: `AwsSolutions-IAM5[Resource::<${stack.getLogicalId(props.resultsBucket.node.defaultChild as CfnElement)}.Arn>/${resultsPrefix}*]`,
        reason:
          "Result files are named at run time; reads and writes are confined to the stack's own prefix of its own bucket",
      },
    );

    // Everything that makes the capacity launch start a new instance (its LAUNCH_INPUTS, props.ts):
    // the types and AZs, the network (subnets, security group), the launch template (this path
    // names it), and what the host boots with.
    const { type, fallbackTypes, preferredAzs, rootVolumeGiB, amiParameter } = instance;
    // `cdk deploy -c relaunch=<any new value>` replaces a host that is gone (lifetime guard,
    // terminateWhenDone): CloudFormation updates the launch only when its inputs change.
    const relaunch = String(this.node.tryGetContext(RELAUNCH_CONTEXT_KEY) ?? '');
    const launchInputs = JSON.stringify({
      type,
      fallbackTypes,
      preferredAzs,
      rootVolumeGiB,
      amiParameter,
      relaunch,
      network: props.networkKey,
      template: this.node.path,
      // Only when given: the generation of a host without it stays what it was.
      ...(props.generationInputs === undefined ? {} : { more: props.generationInputs }),
    });
    this.generation = createHash('sha256')
      .update(`${bootstrap.assetHash}/${manifests.assetHash}/${launchInputs}`)
      .digest('hex')
      .slice(0, 8);
    // A completed wait condition never waits again, so each generation gets its own handle.
    this.readyHandle = new CfnWaitConditionHandle(this, `ReadyHandle${this.generation}`);

    const userData = ec2.UserData.custom(
      renderLauncher({
        region: stack.region,
        lifetimeMinutes: props.lifetimeMinutes,
        bootstrapS3Uri: bootstrap.s3ObjectUrl,
        manifestsS3Uri: manifests.s3ObjectUrl,
        waitHandleUrl: this.readyHandle.ref,
        resultsBucket: props.resultsBucket.bucketName,
        stackName: stack.stackName,
        ...(props.environment ? { environment: props.environment } : {}),
      }),
    );

    this.launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      machineImage: ec2.MachineImage.fromSsmParameter(instance.amiParameter, {
        os: ec2.OperatingSystemType.LINUX,
      }),
      instanceType: new ec2.InstanceType(instance.type),
      role: this.role,
      userData,
      requireImdsv2: true,
      // One-minute CloudWatch metrics: a stuck bootstrap shows in CPU and network at once.
      detailedMonitoring: true,
      // One hop: pods (one network namespace further) cannot reach the metadata service and so
      // never see the instance role's credentials.
      httpPutResponseHopLimit: 1,
      instanceInitiatedShutdownBehavior: ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
      blockDevices: [
        {
          deviceName: '/dev/sda1',
          volume: ec2.BlockDeviceVolume.ebs(instance.rootVolumeGiB, {
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            throughput: ROOT_VOLUME_THROUGHPUT_MIBPS,
            encrypted: true,
            deleteOnTermination: true,
          }),
        },
      ],
      // No security group and no network interface here: each launch attempt gives its AZ's
      // subnet, the public IP and the security group on the request's network interface, and
      // RunInstances rejects a template network interface beside a request subnet (docs/facts.md §2.1).
    });
  }
}

export interface GpuHostProps {
  readonly config: LabConfig;
  /** The network's replacement key (LabNetwork.replacementKey). */
  readonly networkKey: string;
  /** Where the host syncs study results; the role may write only under the stack's prefix. */
  readonly resultsBucket: s3.IBucket;
  /**
   * Deploy-time inputs of the launcher (with agents: the agent token's secret ARN).
   *
   * @default - none
   */
  readonly environment?: Readonly<Record<string, string>>;
}

/** The LLM-gateway lab's GPU host: the whole cluster folder and the GPU bootstrap, results under the stack's prefix. */
export class GpuHost extends LabHost {
  constructor(scope: Construct, id: string, props: GpuHostProps) {
    const { config, resultsBucket } = props;
    super(scope, id, {
      instance: config.instance,
      networkKey: props.networkKey,
      description: 'LLM-gateway lab GPU host: SSM Session Manager, its own assets, its results prefix',
      lifetimeMinutes: lifetimeMinutes(config),
      writeManifests: (dir) => synthesizeCluster(config, dir),
      writeBootstrap: (dir) => writeBootstrapFolder(config, dir),
      resultsBucket,
      resultsPrefix: `${Stack.of(scope).stackName}/`,
      assetKeyArns: config.aws.assetKeyArns,
      ...(props.environment ? { environment: props.environment } : {}),
    });
  }
}
