import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { LabStack } from '../../lib/aws/lab-stack.ts';
import { loadLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { synthValidated, testApp, type Validated } from './app.ts';
import { ControlTowerChecks } from './control-tower.ts';

/** A customer-managed key of the CDK asset bucket (cdk bootstrap --bootstrap-kms-key-id). */
const ASSET_KEY = 'arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab';

/** Issue 17's cluster: the GPU host as server, two GPU agents and one CPU agent. */
const config = parseLabConfig({
  aws: { assetKeyArns: [ASSET_KEY] },
  instance: { readyTimeoutMinutes: 60 },
  cluster: {
    agents: [
      { name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.xlarge' },
      { name: 'client', role: 'cpu', instanceType: 'c7i.4xlarge' },
    ],
  },
});

function build() {
  const app = testApp();
  const stack = new LabStack(app, config.stackName, { config });
  return { app, stack };
}

type Resources = Record<string, { Type: string; Properties?: Record<string, unknown>; DependsOn?: string[] }>;

describe('LabStack with K3s agents (issue 17)', () => {
  let template: Template;
  let resources: Resources;
  const idsOf = (type: string) => Object.keys(resources).filter((id) => resources[id]?.Type === type);
  const serverLaunch = () =>
    idsOf('Custom::CapacityLaunch').find((id) => id.startsWith('CapacityLaunch')) as string;
  const agentLaunch = (host: string) =>
    idsOf('Custom::CapacityLaunch').find((id) => id.startsWith(`Agent${host}Launch`)) as string;

  let checks: Validated;
  beforeAll(() => {
    // One synthesis for the tests and for cdk-nag and the Control Tower checks.
    const { app, stack } = build();
    checks = synthValidated(app, new AwsSolutionsChecks(app), new ControlTowerChecks());
    // Should the checks fail, the other tests still read a template, from a synthesis without them.
    template = Template.fromStack(checks.error === undefined ? stack : build().stack);
    resources = template.toJSON().Resources as Resources;
  });

  it('launches one host per agent, each after the server and only in its Availability Zone', () => {
    expect(idsOf('Custom::CapacityLaunch')).toHaveLength(4);
    for (const [host, type, vcpus] of [
      ['Gpu1', 'g6.xlarge', 4],
      ['Gpu2', 'g6.xlarge', 4],
      ['Client1', 'c7i.4xlarge', 16],
    ] as const) {
      const id = agentLaunch(host);
      expect(id, host).toBeDefined();
      const launch = resources[id];
      expect(launch?.Properties).toMatchObject({
        InstanceTypes: [type],
        VcpusNeeded: vcpus,
        RequiredAz: { 'Fn::GetAtt': [serverLaunch(), 'AvailabilityZone'] },
      });
      expect(launch?.DependsOn).toContain(serverLaunch());
    }
    // The server itself may go to any AZ.
    expect(resources[serverLaunch()]?.Properties?.RequiredAz).toBeUndefined();
  });

  it("gives each agent the server's private address, the token's secret and the server's id in its user data", () => {
    const userData = (host: string) => {
      const id = idsOf('AWS::EC2::LaunchTemplate').find((lt) => lt.startsWith(`Agent${host}Host`)) as string;
      return JSON.stringify(resources[id]?.Properties);
    };
    for (const host of ['Gpu1', 'Gpu2', 'Client1']) {
      const text = userData(host);
      expect(text).toContain("export LAB_SERVER_URL='https://");
      expect(text).toContain(`{"Fn::GetAtt":["${serverLaunch()}","PrivateIpAddress"]}`);
      expect(text).toContain(':6443');
      expect(text).toContain(`{"Fn::GetAtt":["${serverLaunch()}","InstanceId"]}`);
      expect(text).toMatch(/export LAB_AGENT_TOKEN_SECRET='",\{"Ref":"ClusterAgentToken[0-9A-F]+"\}/);
    }
    const server = idsOf('AWS::EC2::LaunchTemplate').find((lt) =>
      lt.startsWith('HostLaunchTemplate'),
    ) as string;
    const serverText = JSON.stringify(resources[server]?.Properties);
    expect(serverText).toMatch(/export LAB_AGENT_TOKEN_SECRET='",\{"Ref":"ClusterAgentToken[0-9A-F]+"\}/);
    expect(serverText).not.toContain('LAB_SERVER_URL');
  });

  it('generates the agent token in Secrets Manager, deleted with the stack, readable by the lab hosts only', () => {
    const [secretId, ...others] = idsOf('AWS::SecretsManager::Secret');
    expect(others).toEqual([]);
    template.hasResource('AWS::SecretsManager::Secret', {
      DeletionPolicy: 'Delete',
      Properties: { GenerateSecretString: { PasswordLength: 48, ExcludePunctuation: true } },
    });
    const readers = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
      JSON.stringify(p.Properties.PolicyDocument).includes('secretsmanager:GetSecretValue'),
    );
    const roles = readers.flatMap((p) => p.Properties.Roles.map((r: { Ref: string }) => r.Ref)).sort();
    expect(roles).toHaveLength(4);
    expect(roles.filter((r: string) => r.startsWith('HostInstanceRole'))).toHaveLength(1);
    for (const host of ['Gpu1', 'Gpu2', 'Client1'])
      expect(roles.filter((r: string) => r.startsWith(`Agent${host}HostInstanceRole`))).toHaveLength(1);
    for (const policy of readers) {
      const grants = policy.Properties.PolicyDocument.Statement.filter((s: { Action: unknown }) =>
        JSON.stringify(s.Action).includes('secretsmanager:GetSecretValue'),
      );
      // Scoped to this one secret's ARN, never a wildcard.
      for (const grant of grants) expect(grant.Resource).toEqual({ Ref: secretId });
    }
    // Nothing else in the stack may read it: no other role, no resource policy opening it.
    template.resourceCountIs('AWS::SecretsManager::ResourcePolicy', 0);
  });

  it('lets every host decrypt with the asset bucket key, that key only, through S3 only', () => {
    const statements = Object.values(template.findResources('AWS::IAM::Policy')).flatMap((p) =>
      p.Properties.PolicyDocument.Statement.map((s: Record<string, unknown>) => ({
        ...s,
        roles: p.Properties.Roles.map((r: { Ref: string }) => r.Ref),
      })),
    );
    const kms = statements.filter((s) => JSON.stringify(s.Action).includes('kms:'));
    const roles = kms.flatMap((s) => s.roles).sort();
    // The server and the three agents, once each; no launch function or other role.
    expect(roles).toHaveLength(4);
    for (const role of roles) expect(role).toMatch(/^(Agent\w+)?HostInstanceRole/);
    for (const statement of kms) {
      expect(statement).toMatchObject({
        Sid: 'DecryptTheAssetsThroughS3',
        Effect: 'Allow',
        Action: 'kms:Decrypt',
        Resource: ASSET_KEY,
        Condition: {
          StringEquals: {
            'kms:ViaService': { 'Fn::Join': ['', ['s3.', { Ref: 'AWS::Region' }, '.amazonaws.com']] },
          },
        },
      });
    }
  });

  it('allows traffic between lab nodes with one self-referencing rule, and nothing from outside', () => {
    const rules = template.findResources('AWS::EC2::SecurityGroupIngress');
    expect(Object.values(rules)).toHaveLength(1);
    const [rule] = Object.values(rules);
    const [sgId] = idsOf('AWS::EC2::SecurityGroup').filter((id) => id.includes('HostSecurityGroup'));
    expect(rule?.Properties).toMatchObject({
      IpProtocol: '-1',
      GroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
      SourceSecurityGroupId: { 'Fn::GetAtt': [sgId, 'GroupId'] },
    });
    expect(rule?.Properties.CidrIp).toBeUndefined();
    for (const sg of Object.values(template.findResources('AWS::EC2::SecurityGroup'))) {
      expect(sg.Properties.SecurityGroupIngress ?? []).toEqual([]);
    }
  });

  it('waits for each agent after its launch, with the ready timeout of the lab', () => {
    const conditions = idsOf('AWS::CloudFormation::WaitCondition');
    expect(conditions).toHaveLength(4);
    for (const host of ['Gpu1', 'Gpu2', 'Client1']) {
      const id = conditions.find((c) => c.startsWith(`Agent${host}Ready`)) as string;
      expect(resources[id]?.Properties).toMatchObject({ Count: 1, Timeout: '3600' });
      expect(resources[id]?.DependsOn).toContain(agentLaunch(host));
    }
  });

  it('relaunches the agents with a new server: their generation follows the server', () => {
    const generations = (t: Resources) =>
      Object.fromEntries(
        Object.entries(t)
          .filter(([, r]) => r.Type === 'Custom::CapacityLaunch')
          .map(([id, r]) => [id.replace(/Launch.*$/, ''), r.Properties?.Generation]),
      );
    const synthesized = (c: typeof config) =>
      Template.fromStack(new LabStack(testApp(), c.stackName, { config: c })).toJSON().Resources as Resources;
    // The stack of the tests above.
    const before = generations(resources);
    expect(new Set(Object.values(before)).size).toBe(4);
    const after = generations(
      synthesized(
        parseLabConfig({ ...structuredClone(config), vllm: { ...config.vllm, gpuMemoryUtilization: 0.8 } }),
      ),
    );
    for (const host of Object.keys(before)) expect(after[host], host).not.toBe(before[host]);
  });

  it("strips foreign policies from every host's role, after every instance is gone", () => {
    const [cleanup] = idsOf('Custom::RoleCleanup');
    for (const launch of idsOf('Custom::CapacityLaunch'))
      expect(resources[launch]?.DependsOn).toContain(cleanup);
    const text = JSON.stringify(resources[cleanup as string]?.Properties);
    const roles = idsOf('AWS::IAM::Role').filter((id) => id.includes('InstanceRole'));
    expect(roles).toHaveLength(4);
    for (const role of roles) expect(text).toContain(role);
  });

  it('names each agent in the outputs, and what the cluster costs', () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const host of ['Gpu1', 'Gpu2', 'Client1']) {
      for (const name of ['InstanceId', 'AvailabilityZone', 'ConnectCommand', 'BootstrapLog', 'ReadyReport'])
        expect(Object.keys(outputs)).toContain(`Agent${host}${name}`);
    }
    expect(outputs.AgentGpu1EstimatedCostPerHour?.Value).toBe(
      '0.81 USD/hour on demand (g6.xlarge, instance only)',
    );
    expect(JSON.stringify(outputs.AgentClient1BootstrapLog?.Value)).toContain(
      '/LlmGatewayLab/agents/client-1/host/bootstrap.log',
    );
    expect(outputs.ClusterCostPerHour?.Value).toBe(
      '6.92 USD/hour on demand for 4 hosts (g6.12xlarge + g6.xlarge + g6.xlarge + c7i.4xlarge, instances only)',
    );
  });

  it('synthesizes the tracked example, examples/multi-node.yaml, offline', () => {
    const file = new URL('../../examples/multi-node.yaml', import.meta.url).pathname;
    const { config: example } = loadLabConfig({ file });
    const t = Template.fromStack(new LabStack(testApp(), example.stackName, { config: example }));
    const launches = Object.keys(t.findResources('Custom::CapacityLaunch')).map((id) =>
      id.replace(/Launch.*$/, ''),
    );
    expect(launches.sort()).toEqual(['AgentCpu1', 'AgentGpu1', 'AgentGpu2', 'Capacity']);
    t.resourceCountIs('AWS::SecretsManager::Secret', 1);
    t.resourceCountIs('AWS::EC2::SecurityGroupIngress', 1);
    const outputs = t.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.ClusterCostPerHour?.Value).toBe(
      '14.52 USD/hour on demand for 4 hosts (g6.12xlarge + g6.12xlarge + g6.12xlarge + c7i.4xlarge, instances only)',
    );
  });

  it('passes the AwsSolutions checks; the token rotation finding carries its reason', () => {
    expect(checks.verdict(new AwsSolutionsChecks()), checks.error).toBe('passed');
  });

  it('passes the Control Tower proactive controls (cfn-guard)', () => {
    expect(checks.verdict(new ControlTowerChecks()), checks.error).toBe('passed');
  });
});
