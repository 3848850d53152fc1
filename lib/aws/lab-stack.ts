import {
  Annotations,
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
import { synthesizeNetworkCell } from '../../charts/network/cell-app.ts';
import { agentNodes, clusterNodes, clusterPricePerHourUsd, vcpusByQuota } from '../config/cluster.ts';
import type { NetworkCell } from '../config/network.ts';
import type { LabConfig } from '../config/schema.ts';
import { type DoctorHost, doctorHosts } from '../doctor/hosts.ts';
import { onDemandQuotaFor } from '../facts/instances.ts';
import { KUBE_PROXY_NODE_PORT } from '../study/topology.ts';
import { acknowledgeControlTowerRules } from './acknowledgements.ts';
import { type AgentHostParts, ClusterAgents } from './agents.ts';
import { agentResultsSubdir } from './bootstrap/agent.ts';
import { AGENT_TOKEN_SECRET_VARIABLE, LOG_OBJECT } from './bootstrap/bootstrap.ts';
import { cellLifetimeMinutes, writeCellBootstrapFolder } from './bootstrap/cell.ts';
import { CapacityLaunch } from './capacity-launch/capacity-launch.ts';
import type { OnDemandQuota, StackQuotaNeed } from './capacity-launch/launch.ts';
import { cellConstructId, cellOutputDescription } from './cell-outputs.ts';
import { GpuHost, type HostInstanceSettings, LabHost, RELAUNCH_ADVICE } from './gpu-host.ts';
import { LabNetwork } from './network.ts';
import { RoleCleanup } from './role-cleanup/role-cleanup.ts';

/**
 * The Standard On-Demand vCPU quota, which the network lab's default CPU cells count against
 * (docs/facts.md §N1). A cell's own quota follows its type's family (`onDemandQuotaFor`).
 */
export const NETWORK_CELL_QUOTA: OnDemandQuota = {
  name: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances',
  code: 'L-1216C47A',
};

/** What the stack builds for one network-lab cell. */
export interface NetworkCellHost {
  readonly cell: NetworkCell;
  readonly host: LabHost;
  readonly launch: CapacityLaunch;
  readonly ready: CfnWaitCondition;
}

/** A cell's instance settings: the network lab's, with the cell's type when it names one. */
export function cellInstance(config: LabConfig, cell: NetworkCell): HostInstanceSettings {
  const { instance } = config.network;
  return { ...instance, type: cell.instanceType ?? instance.type };
}

export { cellConstructId } from './cell-outputs.ts';

/**
 * Per quota name, what every host of the stack needs of it at once: the server and its agents, or
 * every cell at its own type (the hosts `lab doctor` checks, lib/doctor/hosts.ts).
 */
export function stackQuotaNeeds(config: LabConfig): ReadonlyMap<string, StackQuotaNeed> {
  return new Map(
    vcpusByQuota(doctorHosts(config)).map((need) => [
      need.quota.name,
      { vcpus: need.vcpus, hosts: need.hosts.map((host) => `${host.name} ${host.vcpus}`).join(' + ') },
    ]),
  );
}

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
  /** The GPU host (LLM-gateway lab); undefined for the network lab. */
  readonly host?: GpuHost;
  /** The GPU host's launch (LLM-gateway lab); undefined for the network lab. */
  readonly launch?: CapacityLaunch;
  /** One host per cell (network lab); empty for the LLM-gateway lab. */
  readonly cells: readonly NetworkCellHost[] = [];
  /** The K3s agents, their token and rule (LLM-gateway lab with cluster.agents); undefined otherwise. */
  readonly agents?: ClusterAgents;

  constructor(scope: Construct, id: string, props: LabStackProps) {
    super(scope, id, props);
    const { config } = props;
    if (config.runner.results.volume === 'claim') {
      // The host's bootstrap uploads and `lab status` reads the node folder (lib/control/host-scripts.ts).
      throw new Error(
        "runner.results.volume: claim is for a cluster you bring (lab install); the lab's own host keeps its results in the node folder, which its bootstrap uploads to the results bucket. Set runner.results.volume: node-folder (the default) for cdk deploy",
      );
    }

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
    acknowledgeControlTowerRules(this);
    Validations.of(this).acknowledge({
      id: 'CloudFormation-Validate::F6101',
      reason:
        'WaitCondition Data is a JSON string in outputs, as in the AWS::CloudFormation::WaitCondition documentation example',
    });
    const needs = stackQuotaNeeds(config);
    if (config.lab === 'network') {
      const hosts = doctorHosts(config);
      this.cells = config.network.cells.map((cell, i) =>
        this.addCell(config, cell, hosts[i] as DoctorHost, needs),
      );
      for (const need of vcpusByQuota(hosts)) {
        const code = need.quota.code ? ` (quota code ${need.quota.code})` : '';
        // The account's quota is not known at synth, and AWS publishes no one default for it
        // (docs/facts.md §2.1, unconfirmed): lab doctor reads the account's applied value.
        Annotations.of(this).addWarningV2(
          '@llm-gateway-lab/cell-quota',
          `The cells need ${need.vcpus} vCPUs of "${need.quota.name}"${code} at once (${needs.get(need.quota.name)?.hosts}). The account's quota in this region is not known at synth (a new account's default may be lower): lab doctor reads the real value and names the increase to request; run it before deploying`,
        );
      }
      const roleCleanup = new RoleCleanup(this, 'RoleCleanup', { roles: this.cells.map((c) => c.host.role) });
      roleCleanup.mustRunAfterDeletionOf(...this.cells.map((c) => c.launch.resource));
      return;
    }

    const agents = agentNodes(config);
    // The token and the intra-lab rule exist before the server, whose user data names the token.
    this.agents =
      agents.length > 0
        ? new ClusterAgents(this, 'Cluster', {
            config,
            agents,
            securityGroup: this.network.securityGroup,
            subnets: this.network.subnets,
            networkKey: this.network.replacementKey(),
            resultsBucket: this.resultsBucket,
            quotaNeeds: needs,
          })
        : undefined;
    this.host = new GpuHost(this, 'Host', {
      config,
      networkKey: this.network.replacementKey(),
      resultsBucket: this.resultsBucket,
      ...(this.agents
        ? { environment: { [AGENT_TOKEN_SECRET_VARIABLE]: this.agents.agentToken.secretArn } }
        : {}),
    });
    this.agents?.allowRead(this.host);

    const launch = new CapacityLaunch(this, 'CapacityLaunch', {
      launchTemplate: this.host.launchTemplate,
      subnets: this.network.subnets,
      securityGroup: this.network.securityGroup,
      instanceType: config.instance.type,
      fallbackInstanceTypes: config.instance.fallbackTypes,
      preferredAzs: config.instance.preferredAzs,
      vcpusNeeded: config.instance.vcpus,
      ...optionalNeed(needs, onDemandQuotaFor(config.instance.type)),
      instanceRole: this.host.role,
      // A replacement waits for the old host to terminate (its final upload may take up to 10
      // minutes), then launches and waits for the new one: more than the default 30 minutes.
      totalTimeout: Duration.minutes(50),
      // Relaunch exactly when the wait condition below is new, so every new host is waited for.
      generation: this.host.generation,
      relaunchAdvice: RELAUNCH_ADVICE,
    });
    this.launch = launch;
    const agentHosts = this.agents?.addAgents({ launch, generation: this.host.generation }) ?? [];

    // Systems Manager may attach policies to the instance roles after deploy; strip them before the
    // roles are deleted, and only once every instance is gone (docs/facts.md §2.4).
    const roleCleanup = new RoleCleanup(this, 'RoleCleanup', {
      roles: [this.host.role, ...agentHosts.map((a) => a.host.role)],
    });
    roleCleanup.mustRunAfterDeletionOf(launch.resource, ...agentHosts.map((a) => a.launch.resource));

    // Named by the host generation: a changed bootstrap or manifests set launches a new instance,
    // and cdk deploy must wait for that one's signal, not reuse the old, completed condition.
    const ready = new CfnWaitCondition(this, `Ready${this.host.generation}`, {
      handle: this.host.readyHandle.ref,
      count: 1,
      timeout: String(config.instance.readyTimeoutMinutes * 60),
    });
    // Waiting starts only once an instance exists to send the signal.
    ready.node.addDependency(launch);

    this.addOutputs(config, this.launch, ready);
    for (const agent of agentHosts) this.addAgentOutputs(config, agent);
  }

  /**
   * One network-lab cell: its host (the cell's manifests folder and bootstrap, results under
   * `<stack>/<cell>/`), its launch within the Standard-instance quota, its WaitCondition and outputs.
   */
  private addCell(
    config: LabConfig,
    cell: NetworkCell,
    facts: DoctorHost,
    needs: ReadonlyMap<string, StackQuotaNeed>,
  ): NetworkCellHost {
    const instance = cellInstance(config, cell);
    const id = cellConstructId(cell.name);
    const host = new LabHost(this, `${id}Host`, {
      instance,
      networkKey: this.network.replacementKey(),
      description: `Network lab cell ${cell.name}: SSM Session Manager, its own assets, its results prefix`,
      lifetimeMinutes: cellLifetimeMinutes(config),
      writeManifests: (dir) => synthesizeNetworkCell(config, cell, dir),
      writeBootstrap: (dir) => writeCellBootstrapFolder(config, cell, dir),
      resultsBucket: this.resultsBucket,
      resultsPrefix: `${this.stackName}/${cell.name}/`,
      assetKeyArns: config.aws.assetKeyArns,
    });
    const launch = new CapacityLaunch(this, `${id}Launch`, {
      launchTemplate: host.launchTemplate,
      subnets: this.network.subnets,
      securityGroup: this.network.securityGroup,
      instanceType: instance.type,
      fallbackInstanceTypes: [...instance.fallbackTypes],
      preferredAzs: [...instance.preferredAzs],
      // The cell's own type: its vCPUs and its family's quota (not always Standard).
      vcpusNeeded: facts.vcpus,
      quota: facts.quota,
      ...optionalNeed(needs, facts.quota),
      instanceRole: host.role,
      totalTimeout: Duration.minutes(50),
      generation: host.generation,
      relaunchAdvice: RELAUNCH_ADVICE,
    });
    const ready = new CfnWaitCondition(this, `${id}Ready${host.generation}`, {
      handle: host.readyHandle.ref,
      count: 1,
      timeout: String(config.network.instance.readyTimeoutMinutes * 60),
    });
    ready.node.addDependency(launch);
    this.addCellOutputs(config, cell, id, launch, ready, facts.pricePerHourUsd);
    return { cell, host, launch, ready };
  }

  private addCellOutputs(
    config: LabConfig,
    cell: NetworkCell,
    id: string,
    launch: CapacityLaunch,
    ready: CfnWaitCondition,
    pricePerHourUsd: number,
  ): void {
    const { instance } = config.network;
    const type = cellInstance(config, cell).type;
    const output = this.addHostOutputs(
      id,
      (description) => cellOutputDescription(cell.name, description),
      launch,
      `${cell.name}/`,
      `its host (${cell.datapath}, mesh ${cell.mesh})`,
    );
    output('InstanceType', launch.instanceType, 'the type that launched');
    output(
      'ResultsLocation',
      `s3://${this.resultsBucket.bucketName}/${this.stackName}/${cell.name}/`,
      'where the host syncs results',
    );
    output(
      'EstimatedCostPerHour',
      `${pricePerHourUsd.toFixed(3)} USD/hour on demand (${type}, instance only)`,
      type === instance.type ? 'from network.instance.pricePerHourUsd' : `from the instance table (${type})`,
    );
    output(
      'MaxLifetime',
      `${instance.maxLifetimeHours} h after boot the host uploads results, shuts down and terminates`,
      'cost guard (network.instance.maxLifetimeHours)',
    );
    output('ReadyReport', Token.asString(ready.attrData), 'what the bootstrap reported: the datapath proof');
  }

  /**
   * The outputs every named host has (a network-lab cell, a K3s agent): its instance, AZ, launch
   * attempts, a shell and its bootstrap log. Returns the writer of the host's further outputs.
   */
  private addHostOutputs(
    id: string,
    describe: (description: string) => string,
    launch: CapacityLaunch,
    resultsSubdir: string,
    host = 'its host',
  ) {
    const output = (name: string, value: string, description: string) =>
      new CfnOutput(this, `${id}${name}`, { value, description: describe(description) });
    output('InstanceId', launch.instanceId, host);
    output('AvailabilityZone', launch.availabilityZone, 'where capacity was found');
    output('LaunchAttempts', launch.attemptLog, 'every Availability Zone tried, and why it failed');
    output(
      'ConnectCommand',
      `aws ssm start-session --region ${this.region} --target ${launch.instanceId}`,
      'a shell on the host (SSM Session Manager; no SSH, no inbound rule from outside the lab)',
    );
    output(
      'BootstrapLog',
      `s3://${this.resultsBucket.bucketName}/${this.stackName}/${resultsSubdir}${LOG_OBJECT}`,
      'the bootstrap log, uploaded every few minutes',
    );
    return output;
  }

  private addAgentOutputs(config: LabConfig, agent: AgentHostParts): void {
    const { node, id, launch, ready } = agent;
    const output = this.addHostOutputs(
      id,
      (description) =>
        `Agent ${node.name} (${node.role} node, ${node.instanceType}, in the server's Availability Zone): ${description}`,
      launch,
      agentResultsSubdir(node.name),
    );
    output(
      'EstimatedCostPerHour',
      `${node.pricePerHourUsd.toFixed(2)} USD/hour on demand (${node.instanceType}, instance only)`,
      'from the instance table or cluster.agents[].pricePerHourUsd',
    );
    output(
      'MaxLifetime',
      `${config.instance.maxLifetimeHours} h after boot the host shuts down and terminates`,
      'cost guard (instance.maxLifetimeHours, as the server)',
    );
    output(
      'ReadyReport',
      Token.asString(ready.attrData),
      'what its bootstrap reported: the join, the model cache',
    );
  }

  private addOutputs(config: LabConfig, launch: CapacityLaunch, ready: CfnWaitCondition): void {
    const instanceId = launch.instanceId;
    const output = (id: string, value: string, description: string) =>
      new CfnOutput(this, id, { value, description });
    output('InstanceId', instanceId, 'The GPU host');
    output('AvailabilityZone', launch.availabilityZone, 'Where capacity was found');
    output('InstanceType', launch.instanceType, 'The type that launched');
    output('LaunchAttempts', launch.attemptLog, 'Every Availability Zone tried, and why it failed');
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
    const nodes = clusterNodes(config);
    if (nodes.length > 1) {
      output(
        'ClusterCostPerHour',
        `${clusterPricePerHourUsd(nodes).toFixed(2)} USD/hour on demand for ${nodes.length} hosts (${nodes.map((n) => n.instanceType).join(' + ')}, instances only)`,
        'The server and every K3s agent (cluster.agents)',
      );
    }
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

/** The stack's need of a quota as CapacityLaunch props, when the stack has one. */
function optionalNeed(
  needs: ReadonlyMap<string, StackQuotaNeed>,
  quota: OnDemandQuota,
): { stackNeed?: StackQuotaNeed } {
  const need = needs.get(quota.name);
  return need ? { stackNeed: need } : {};
}
