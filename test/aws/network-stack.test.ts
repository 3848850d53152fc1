import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseLaunchRequest } from '../../lib/aws/capacity-launch/handler.ts';
import { stopMessage } from '../../lib/aws/capacity-launch/launch.ts';
import { cellConstructId, LabStack, NETWORK_CELL_QUOTA } from '../../lib/aws/lab-stack.ts';
import { loadLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { stackCells } from '../../lib/control/testbed.ts';
import { synthValidated, testApp, type Validated } from './app.ts';
import { ControlTowerChecks } from './control-tower.ts';
import { CILIUM_CELL, networkLab, networkLabInput, nftablesCell } from './network-configs.ts';

const example = () => loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

const withNftables = () => networkLab(CILIUM_CELL, nftablesCell('m7i.2xlarge'));

/** `ownFolder`: synthesize into a folder of its own, for a test that lists what the assembly holds. */
function build(config: LabConfig, ownFolder = false) {
  // Its own folder, and like testApp() without the built-in template validation (test/aws/app.ts).
  const app = ownFolder ? new App({ builtinCloudFormationValidation: false }) : testApp();
  const stack = new LabStack(app, config.stackName, { config });
  return { app, stack };
}

type Resources = Record<string, { Type: string; Properties: Record<string, unknown>; DependsOn?: string[] }>;

describe('LabStack with lab: network (examples/network-lab.yaml)', () => {
  let template: Template;
  let resources: Resources;
  let stack: LabStack;
  let checks: Validated;
  beforeAll(() => {
    // One synthesis for the tests and for cdk-nag and the Control Tower checks.
    const built = build(example());
    checks = synthValidated(built.app, new AwsSolutionsChecks(built.app), new ControlTowerChecks());
    // Should the checks fail, the other tests still read a template, from a synthesis without them.
    ({ stack } = checks.error === undefined ? built : build(example()));
    template = Template.fromStack(stack);
    resources = template.toJSON().Resources;
  });

  const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

  it('launches one host per cell, each from its own template, and no GPU host', () => {
    expect(ofType('Custom::CapacityLaunch').map(([id]) => id.replace(/Launch.*$/, ''))).toEqual([
      'CellMesh',
      'CellDpIptables',
      'CellDpCilium',
    ]);
    template.resourceCountIs('AWS::EC2::LaunchTemplate', 3);
    expect(Object.keys(resources).some((id) => id.startsWith('Host'))).toBe(false);
  });

  it('launches c7i.2xlarge on the plain Ubuntu AMI, IMDSv2 with one hop, encrypted gp3', () => {
    for (const [, lt] of ofType('AWS::EC2::LaunchTemplate')) {
      expect(lt.Properties.LaunchTemplateData).toMatchObject({
        InstanceType: 'c7i.2xlarge',
        MetadataOptions: { HttpTokens: 'required', HttpPutResponseHopLimit: 1 },
        BlockDeviceMappings: [{ Ebs: { VolumeSize: 40, VolumeType: 'gp3', Encrypted: true } }],
      });
      expect(JSON.stringify(lt.Properties.LaunchTemplateData)).toMatch(
        /SsmParameterValue.*canonical.*ubuntu/,
      );
    }
  });

  it("warns at synth with the cells' need of the Standard quota, pointing to lab doctor for the real one", () => {
    const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('The cells need'));
    expect(warnings.map((w) => w.entry.data)).toEqual([
      expect.stringContaining(
        'The cells need 24 vCPUs of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (quota code L-1216C47A) at once (cell mesh 8 + cell dp-iptables 8 + cell dp-cilium 8)',
      ),
    ]);
    expect(String(warnings[0]?.entry.data)).toContain('lab doctor reads the real value');
  });

  it('names the Standard-instance quota in launch failures, not G and VT', () => {
    for (const [, launch] of ofType('Custom::CapacityLaunch')) {
      expect(launch.Properties).toMatchObject({
        InstanceTypes: ['c7i.2xlarge'],
        VcpusNeeded: 8,
        QuotaName: 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances',
        QuotaCode: 'L-1216C47A',
      });
    }
    expect(NETWORK_CELL_QUOTA.name).not.toContain('G and VT');
  });

  it('waits for each cell with its own WaitCondition, after its own launch, keyed by its generation', () => {
    const conditions = ofType('AWS::CloudFormation::WaitCondition');
    expect(conditions).toHaveLength(3);
    const generations = new Set<string>();
    for (const cell of ['mesh', 'dp-iptables', 'dp-cilium']) {
      const id = cellConstructId(cell);
      const [launchId, launch] = ofType('Custom::CapacityLaunch').find(([lid]) =>
        lid.startsWith(`${id}Launch`),
      ) as [string, Resources[string]];
      const generation = launch.Properties.Generation as string;
      generations.add(generation);
      const [, condition] = conditions.find(([cid]) => cid.startsWith(`${id}Ready${generation}`)) ?? [];
      expect(condition, cell).toBeDefined();
      expect(condition?.Properties).toMatchObject({ Count: 1, Timeout: '2700' });
      expect(condition?.DependsOn).toEqual(expect.arrayContaining([expect.stringMatching(`^${launchId}`)]));
    }
    // Distinct generations: no cell's launch can adopt another cell's host.
    expect(generations.size).toBe(3);
  });

  it("writes results under one prefix per cell, and each role only under its cell's", () => {
    const policies = ofType('AWS::IAM::Policy').map(([, p]) => JSON.stringify(p.Properties));
    for (const cell of ['mesh', 'dp-iptables', 'dp-cilium']) {
      const own = policies.filter((p) => p.includes(`${cellConstructId(cell)}HostInstanceRole`));
      expect(own.join(), cell).toContain(`/NetworkLab/${cell}/*`);
      for (const other of ['mesh', 'dp-iptables', 'dp-cilium'].filter((c) => c !== cell)) {
        expect(own.join()).not.toContain(`/NetworkLab/${other}/*`);
      }
    }
  });

  it('strips foreign policies of every cell role, after every cell host is gone', () => {
    const [[cleanupId, cleanup]] = ofType('Custom::RoleCleanup');
    expect(JSON.stringify(cleanup.Properties)).toContain('CellMeshHostInstanceRole');
    expect(JSON.stringify(cleanup.Properties)).toContain('CellDpCiliumHostInstanceRole');
    for (const [, launch] of ofType('Custom::CapacityLaunch')) {
      expect(launch.DependsOn).toEqual(expect.arrayContaining([expect.stringMatching(`^${cleanupId}`)]));
    }
  });

  it('gives each cell its outputs: instance, AZ, connect command, results, log, cost per hour', () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown; Description: string }>;
    for (const id of ['CellMesh', 'CellDpIptables', 'CellDpCilium']) {
      for (const name of [
        'InstanceId',
        'AvailabilityZone',
        'InstanceType',
        'ConnectCommand',
        'ResultsLocation',
        'BootstrapLog',
        'EstimatedCostPerHour',
        'MaxLifetime',
        'ReadyReport',
      ]) {
        expect(outputs[`${id}${name}`], `${id}${name}`).toBeDefined();
      }
      expect(outputs[`${id}EstimatedCostPerHour`].Value).toBe(
        '0.357 USD/hour on demand (c7i.2xlarge, instance only)',
      );
    }
    expect(JSON.stringify(outputs.CellDpCiliumBootstrapLog.Value)).toContain(
      '/NetworkLab/dp-cilium/host/bootstrap.log',
    );
    expect(outputs.CellMeshInstanceId.Description).toContain('iptables, mesh sidecar');
    // What lab run/status/results --cell read back (lib/control/testbed.ts).
    const described = Object.entries(outputs).map(([OutputKey, o]) => ({
      OutputKey,
      Description: o.Description,
    }));
    expect(stackCells(described)).toEqual(['mesh', 'dp-iptables', 'dp-cilium']);
  });

  it('passes the AwsSolutions checks', () => {
    expect(checks.verdict(new AwsSolutionsChecks()), checks.error).toBe('passed');
  });

  it('passes the Control Tower proactive controls (cfn-guard)', () => {
    expect(checks.verdict(new ControlTowerChecks()), checks.error).toBe('passed');
  });
});

describe('the quota a launch names', () => {
  const attempt = {
    az: 'us-west-2a',
    instanceType: 'c7i.2xlarge',
    code: 'VcpuLimitExceeded',
    message: 'You have requested more vCPU capacity than your current vCPU limit of 0 allows',
  };

  it('is the one the stack gave, through the resource properties', () => {
    const request = parseLaunchRequest(
      {
        LaunchTemplateId: 'lt-0123456789abcdef0',
        LaunchTemplateVersion: '1',
        Generation: 'abcd1234',
        SecurityGroupId: 'sg-0123456789abcdef0',
        StackTagKey: 'llm-gateway-lab:stack',
        StackTagValue: 'NetworkLab',
        InstanceTypes: ['c7i.2xlarge'],
        Subnets: [],
        VcpusNeeded: '8',
        QuotaName: NETWORK_CELL_QUOTA.name,
        QuotaCode: NETWORK_CELL_QUOTA.code,
      },
      'request-1',
    );
    expect(request.quota).toEqual(NETWORK_CELL_QUOTA);
    expect(stopMessage(attempt, 8, request.quota)).toContain(
      'the account\'s "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" quota in this region does not leave 8 vCPUs',
    );
    expect(stopMessage(attempt, 8, request.quota)).toContain('quota code L-1216C47A');
  });

  it('overrides the one derived from the type', () => {
    const gpu = { ...attempt, instanceType: 'g6.12xlarge' };
    expect(stopMessage(gpu, 48)).toContain('Running On-Demand G and VT instances');
    expect(stopMessage(gpu, 48, NETWORK_CELL_QUOTA)).not.toContain('G and VT');
  });
});

describe('a cell with its own instance type, and what each host boots with', () => {
  it("launches the cell's instanceType, the others the network instance type; each cell may decrypt the asset key", () => {
    const key = 'arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';
    const config = parseLabConfig({
      ...networkLabInput(CILIUM_CELL, nftablesCell('m7i.2xlarge')),
      aws: { assetKeyArns: [key] },
    });
    const template = Template.fromStack(build(config).stack);
    template.hasResourceProperties('Custom::CapacityLaunch', { InstanceTypes: ['m7i.2xlarge'] });
    template.hasResourceProperties('Custom::CapacityLaunch', { InstanceTypes: ['c7i.2xlarge'] });
    template.hasResourceProperties('AWS::EC2::LaunchTemplate', {
      LaunchTemplateData: Match.objectLike({ InstanceType: 'm7i.2xlarge' }),
    });
    // Each cell's role may decrypt the CDK asset key (aws.assetKeyArns), that key only.
    const decrypting = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
      JSON.stringify(p.Properties.PolicyDocument).includes('kms:Decrypt'),
    );
    expect(decrypting.flatMap((p) => p.Properties.Roles.map((r: { Ref: string }) => r.Ref)).sort()).toEqual([
      expect.stringMatching(/^CellDpCiliumHostInstanceRole/),
      expect.stringMatching(/^CellDpNftablesHostInstanceRole/),
    ]);
    for (const policy of decrypting)
      expect(JSON.stringify(policy.Properties.PolicyDocument)).toContain(`"Resource":"${key}"`);
  });

  it('ships each cell its own settings.env (its K3s flags) and its own manifests folder', () => {
    const assembly = build(withNftables(), true).app.synth();
    const dirs = readdirSync(assembly.directory)
      .map((name) => join(assembly.directory, name))
      .filter((dir) => existsSync(join(dir, 'settings.env')));
    const settings = dirs.map((dir) => readFileSync(join(dir, 'settings.env'), 'utf8'));
    const cilium = settings.find((s) => s.includes("CELL_NAME='dp-cilium'")) as string;
    const nftables = settings.find((s) => s.includes("CELL_NAME='dp-nftables'")) as string;
    expect(cilium).toMatch(
      /^K3S_EXEC=.*--flannel-backend=none --disable-network-policy --disable-kube-proxy/m,
    );
    expect(cilium).toContain("RESULTS_SUBDIR='dp-cilium/'");
    expect(nftables).toMatch(/^K3S_EXEC=.*--kube-proxy-arg=proxy-mode=nftables/m);
    expect(nftables).not.toContain('--disable-kube-proxy');
    expect(nftables).toContain("INSTANCE_TYPE='m7i.2xlarge'");
    const manifests = readdirSync(assembly.directory)
      .map((name) => join(assembly.directory, name))
      .filter((dir) => existsSync(join(dir, 'prerequisites.json')));
    const prerequisiteIds = manifests.map((dir) =>
      JSON.parse(readFileSync(join(dir, 'prerequisites.json'), 'utf8')).prerequisites.map(
        (p: { id: string }) => p.id,
      ),
    );
    expect(prerequisiteIds.sort()).toEqual([[], ['cilium']]);
    const ciliumDir = manifests.find((dir) => existsSync(join(dir, 'helm-values', 'cilium.yaml')));
    expect(readFileSync(join(ciliumDir as string, 'helm-values', 'cilium.yaml'), 'utf8')).toContain(
      'k8sServiceHost: __LAB_NODE_PRIVATE_IP__',
    );
  });
});
