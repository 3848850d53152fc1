import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
} from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  DescribeInstanceTypeOfferingsCommand,
  DescribeInstanceTypesCommand,
  EC2Client,
  EC2ServiceException,
  type Instance,
} from '@aws-sdk/client-ec2';
import {
  type EvaluationResult,
  GetRoleCommand,
  IAMClient,
  IAMServiceException,
  NoSuchEntityException,
  type PolicyEvaluationDecisionType,
  SimulatePrincipalPolicyCommand,
} from '@aws-sdk/client-iam';
import {
  GetAWSDefaultServiceQuotaCommand,
  GetServiceQuotaCommand,
  NoSuchResourceException,
  ServiceQuotasClient,
  ServiceQuotasServiceException,
} from '@aws-sdk/client-service-quotas';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { GetCallerIdentityCommand, STSClient } from '@aws-sdk/client-sts';
import { mockClient } from 'aws-sdk-client-mock';
import { STACK_TAG_KEY } from '../../lib/aws/tags.ts';
import type { DoctorClients } from '../../lib/doctor/model.ts';

/**
 * An AWS account as `lab doctor` sees it, behind aws-sdk-client-mock: every read answers from the
 * account's state by the request's own inputs (the parameter named, the types filtered, the quota
 * code, the principal and actions simulated), pages its lists the way the services do, and fails
 * with the errors the SDK builds (a ServiceException subclass carrying the service's error name).
 */

export interface FakeInstance {
  readonly id: string;
  readonly type: string;
  readonly state: 'pending' | 'running' | 'stopping' | 'stopped';
  readonly vcpus: number;
  /** The lab stack tag's value, when it is a lab host. */
  readonly labStack?: string;
  readonly launchTime?: Date;
}

export interface FakeAccount {
  readonly account: string;
  readonly region: string;
  readonly arn: string;
  /**
   * The toolkit stack by name; absent: no such stack. `assetKey` is its FileAssetsBucketKmsKeyId
   * parameter (absent: AWS_MANAGED_KEY, what a plain cdk bootstrap sets); `createdKeyArn` the
   * FileAssetKeyArn output of a key the bootstrap created.
   */
  readonly stacks: Readonly<
    Record<string, { status: string; version: string; assetKey?: string; createdKeyArn?: string }>
  >;
  /** SSM parameters (bootstrap version, public AMI parameters). */
  readonly parameters: Readonly<Record<string, string>>;
  /** Instance type -> AZs offering it. */
  readonly offerings: Readonly<Record<string, readonly string[]>>;
  /** What EC2 says each type is (vCPUs, GPUs, memory in GiB). */
  readonly types: Readonly<Record<string, { vcpus: number; gpus: number; memoryGiB: number }>>;
  /** Applied quota values by code; a code not here answers NoSuchResourceException. */
  readonly quotas: Readonly<Record<string, number>>;
  /** AWS default quota values by code. */
  readonly defaultQuotas: Readonly<Record<string, number>>;
  /** The name Service Quotas answers for a code (QuotaName); SERVICE_QUOTA_NAMES when not given. */
  readonly quotaNames?: Readonly<Record<string, string>>;
  readonly instances: readonly FakeInstance[];
  /** Role name -> ARN (iam:GetRole). */
  readonly roles: Readonly<Record<string, string>>;
  /** The simulator's decision for a principal, action and resource. */
  readonly decide: (principal: string, action: string, resource: string) => PolicyEvaluationDecisionType;
  /** IAM actions of the doctor's calls the caller may not make (`iam:SimulatePrincipalPolicy`). */
  readonly denied: readonly string[];
}

export const ACCOUNT = '123456789012';
export const REGION = 'us-west-2';
export const AZS = ['us-west-2a', 'us-west-2b', 'us-west-2c', 'us-west-2d'];
export const GPU_AMI =
  '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id';
export const CELL_AMI = '/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id';
export const CALLER_ROLE_ARN = `arn:aws:iam::${ACCOUNT}:role/admins/LabDeployer`;

/**
 * The names Service Quotas gives the EC2 quota codes the lab uses: L-1216C47A's as in the AWS CLI
 * User Guide's get-aws-default-service-quota example; the others as the lab's table has them.
 */
export const SERVICE_QUOTA_NAMES: Readonly<Record<string, string>> = {
  'L-1216C47A': 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances',
  'L-DB2E81BA': 'Running On-Demand G and VT instances',
  'L-417A185B': 'Running On-Demand P instances',
};

/** The types' sizes as the EC2 instance type pages give them. */
export const EC2_TYPES = {
  'g6.xlarge': { vcpus: 4, gpus: 1, memoryGiB: 16 },
  'g6.12xlarge': { vcpus: 48, gpus: 4, memoryGiB: 192 },
  'g6.48xlarge': { vcpus: 192, gpus: 8, memoryGiB: 768 },
  'c7i.2xlarge': { vcpus: 8, gpus: 0, memoryGiB: 16 },
  'c7i.4xlarge': { vcpus: 16, gpus: 0, memoryGiB: 32 },
};

/** A healthy account for the default lab: every line passes. */
export function healthyAccount(): FakeAccount {
  return {
    account: ACCOUNT,
    region: REGION,
    arn: `arn:aws:sts::${ACCOUNT}:assumed-role/LabDeployer/alice`,
    stacks: { CDKToolkit: { status: 'UPDATE_COMPLETE', version: '33' } },
    parameters: {
      '/cdk-bootstrap/hnb659fds/version': '33',
      [GPU_AMI]: 'ami-0a1b2c3d4e5f60718',
      [CELL_AMI]: 'ami-0f1e2d3c4b5a69788',
    },
    offerings: {
      'g6.12xlarge': ['us-west-2a', 'us-west-2b', 'us-west-2c'],
      'g6.xlarge': AZS,
      'c7i.2xlarge': AZS,
      'c7i.4xlarge': AZS,
    },
    types: EC2_TYPES,
    quotas: { 'L-DB2E81BA': 96, 'L-1216C47A': 640 },
    defaultQuotas: { 'L-DB2E81BA': 0, 'L-1216C47A': 5, 'L-417A185B': 0 },
    instances: [],
    roles: { LabDeployer: CALLER_ROLE_ARN },
    decide: () => 'allowed',
    denied: [],
  };
}

const meta = { httpStatusCode: 400 };

function accessDenied(action: string) {
  return new IAMServiceException({
    name: 'AccessDenied',
    $fault: 'client',
    $metadata: { httpStatusCode: 403 },
    message: `User: arn:aws:sts::${ACCOUNT}:assumed-role/LabDeployer/alice is not authorized to perform: ${action}`,
  });
}

/** Lists in pages of `size`, with NextToken the index of the next page. */
function page<T>(items: readonly T[], token: string | undefined, size: number) {
  const start = token ? Number(token) : 0;
  const next = start + size < items.length ? String(start + size) : undefined;
  return { items: items.slice(start, start + size), next };
}

function instanceOf(fake: FakeInstance): Instance {
  return {
    InstanceId: fake.id,
    InstanceType: fake.type as Instance['InstanceType'],
    State: { Name: fake.state },
    // Two threads per core, as the lab's x86 types have.
    CpuOptions: { CoreCount: fake.vcpus / 2, ThreadsPerCore: 2 },
    Tags: fake.labStack === undefined ? [] : [{ Key: STACK_TAG_KEY, Value: fake.labStack }],
    ...(fake.launchTime ? { LaunchTime: fake.launchTime } : {}),
  };
}

/** The mocks of one fake account; `clients` are the SDK clients whose `send` they stand in for. */
export function mockAccount(account: FakeAccount) {
  const sts = mockClient(STSClient);
  const cloudFormation = mockClient(CloudFormationClient);
  const ssm = mockClient(SSMClient);
  const ec2 = mockClient(EC2Client);
  const serviceQuotas = mockClient(ServiceQuotasClient);
  const iam = mockClient(IAMClient);
  // Service Quotas answers a quota's name with its value, as GetServiceQuota's Quota does.
  const quotaOf = (code: string | undefined, value: number) => ({
    ServiceCode: 'ec2',
    QuotaCode: code,
    QuotaName: (account.quotaNames ?? SERVICE_QUOTA_NAMES)[code ?? ''],
    Value: value,
  });
  const deny = (action: string) => {
    if (account.denied.includes(action)) throw accessDenied(action);
  };
  /** EC2 says no with its own error code. */
  const denyEc2 = (action: string) => {
    if (account.denied.includes(action)) {
      throw new EC2ServiceException({
        name: 'UnauthorizedOperation',
        $fault: 'client',
        $metadata: { httpStatusCode: 403 },
        message: 'You are not authorized to perform this operation.',
      });
    }
  };

  sts
    .on(GetCallerIdentityCommand)
    .resolves({ Account: account.account, Arn: account.arn, UserId: 'AROAEXAMPLE:alice' });

  cloudFormation.on(DescribeStacksCommand).callsFake((input: { StackName?: string }) => {
    deny('cloudformation:DescribeStacks');
    const stack = account.stacks[input.StackName ?? ''];
    if (!stack) {
      throw new CloudFormationServiceException({
        name: 'ValidationError',
        $fault: 'client',
        $metadata: meta,
        message: `Stack with id ${input.StackName} does not exist`,
      });
    }
    return {
      Stacks: [
        {
          StackName: input.StackName,
          StackStatus: stack.status,
          CreationTime: new Date('2026-01-01T00:00:00Z'),
          Parameters: [
            { ParameterKey: 'FileAssetsBucketKmsKeyId', ParameterValue: stack.assetKey ?? 'AWS_MANAGED_KEY' },
          ],
          Outputs: [
            { OutputKey: 'BootstrapVersion', OutputValue: stack.version },
            // The template's FileAssetKeyArn: the created key, else the parameter's value.
            {
              OutputKey: 'FileAssetKeyArn',
              OutputValue:
                stack.assetKey === '' ? (stack.createdKeyArn ?? '') : (stack.assetKey ?? 'AWS_MANAGED_KEY'),
            },
          ],
        },
      ],
    };
  });

  ssm.on(GetParameterCommand).callsFake((input: { Name?: string }) => {
    deny('ssm:GetParameter');
    const value = account.parameters[input.Name ?? ''];
    if (value === undefined) throw new ParameterNotFound({ $metadata: meta, message: '' });
    return { Parameter: { Name: input.Name, Type: 'String', Value: value } };
  });

  ec2
    .on(DescribeInstanceTypeOfferingsCommand)
    .callsFake((input: { Filters?: { Name?: string; Values?: string[] }[]; NextToken?: string }) => {
      denyEc2('ec2:DescribeInstanceTypeOfferings');
      const types = input.Filters?.find((f) => f.Name === 'instance-type')?.Values ?? [];
      const all = types.flatMap((type) =>
        (account.offerings[type] ?? []).map((az) => ({
          InstanceType: type as Instance['InstanceType'],
          LocationType: 'availability-zone' as const,
          Location: az,
        })),
      );
      const { items, next } = page(all, input.NextToken, 2);
      return { InstanceTypeOfferings: items, ...(next ? { NextToken: next } : {}) };
    });

  ec2.on(DescribeInstanceTypesCommand).callsFake((input: { InstanceTypes?: string[] }) => {
    const asked = input.InstanceTypes ?? [];
    // EC2 rejects the whole request when one type is unknown to the region.
    const unknown = asked.filter((type) => !account.types[type] || !(account.offerings[type] ?? []).length);
    if (unknown.length > 0) {
      throw new EC2ServiceException({
        name: 'InvalidInstanceType',
        $fault: 'client',
        $metadata: meta,
        message: `The following supplied instance types do not exist: [${unknown.join(', ')}]`,
      });
    }
    return {
      InstanceTypes: asked.map((type) => {
        const size = account.types[type] as { vcpus: number; gpus: number; memoryGiB: number };
        return {
          InstanceType: type as Instance['InstanceType'],
          VCpuInfo: { DefaultVCpus: size.vcpus },
          MemoryInfo: { SizeInMiB: size.memoryGiB * 1024 },
          ...(size.gpus > 0
            ? { GpuInfo: { Gpus: [{ Name: 'L4', Manufacturer: 'NVIDIA', Count: size.gpus }] } }
            : {}),
        };
      }),
    };
  });

  ec2
    .on(DescribeInstancesCommand)
    .callsFake((input: { Filters?: { Name?: string; Values?: string[] }[]; NextToken?: string }) => {
      denyEc2('ec2:DescribeInstances');
      const states = input.Filters?.find((f) => f.Name === 'instance-state-name')?.Values;
      const matching = account.instances.filter((i) => !states || states.includes(i.state));
      const { items, next } = page(matching, input.NextToken, 2);
      return {
        Reservations: items.map((fake) => ({
          ReservationId: `r-${fake.id.slice(2)}`,
          Instances: [instanceOf(fake)],
        })),
        ...(next ? { NextToken: next } : {}),
      };
    });

  serviceQuotas.on(GetServiceQuotaCommand).callsFake((input: { QuotaCode?: string }) => {
    if (account.denied.includes('servicequotas:GetServiceQuota')) {
      throw new ServiceQuotasServiceException({
        name: 'AccessDeniedException',
        $fault: 'client',
        $metadata: { httpStatusCode: 403 },
        message: 'You do not have sufficient access to perform this action.',
      });
    }
    const value = account.quotas[input.QuotaCode ?? ''];
    if (value === undefined)
      throw new NoSuchResourceException({
        $metadata: meta,
        message: 'The request failed because the specified service quota does not exist.',
      });
    return { Quota: quotaOf(input.QuotaCode, value) };
  });
  serviceQuotas.on(GetAWSDefaultServiceQuotaCommand).callsFake((input: { QuotaCode?: string }) => {
    const value = account.defaultQuotas[input.QuotaCode ?? ''];
    if (value === undefined) throw new NoSuchResourceException({ $metadata: meta, message: 'no such quota' });
    return { Quota: quotaOf(input.QuotaCode, value) };
  });

  iam.on(GetRoleCommand).callsFake((input: { RoleName?: string }) => {
    deny('iam:GetRole');
    const arn = account.roles[input.RoleName ?? ''];
    if (!arn)
      throw new NoSuchEntityException({
        $metadata: { httpStatusCode: 404 },
        message: `The role with name ${input.RoleName} cannot be found.`,
      });
    return {
      Role: { RoleName: input.RoleName, Arn: arn, Path: '/', RoleId: 'AROAEXAMPLE', CreateDate: new Date(0) },
    };
  });

  iam
    .on(SimulatePrincipalPolicyCommand)
    .callsFake(
      (input: {
        PolicySourceArn?: string;
        ActionNames?: string[];
        ResourceArns?: string[];
        Marker?: string;
      }) => {
        deny('iam:SimulatePrincipalPolicy');
        const source = input.PolicySourceArn ?? '';
        const isRole = Object.values(account.roles).includes(source) || /:role\/cdk-/.test(source);
        if (!isRole && !/:user\//.test(source)) {
          throw new NoSuchEntityException({
            $metadata: { httpStatusCode: 404 },
            message: `The entity ${source} cannot be found.`,
          });
        }
        if (/:role\/cdk-/.test(source) && !account.parameters['/cdk-bootstrap/hnb659fds/version']) {
          throw new NoSuchEntityException({
            $metadata: { httpStatusCode: 404 },
            message: `The role ${source} cannot be found.`,
          });
        }
        const resources = input.ResourceArns ?? ['*'];
        const results: EvaluationResult[] = (input.ActionNames ?? []).map((action) => {
          if (resources.length === 1) {
            const decision = account.decide(source, action, resources[0] ?? '*');
            return { EvalActionName: action, EvalResourceName: resources[0], EvalDecision: decision };
          }
          const per = resources.map((resource) => ({
            EvalResourceName: resource,
            EvalResourceDecision: account.decide(source, action, resource),
          }));
          return {
            EvalActionName: action,
            EvalResourceName: '*',
            EvalDecision: per.every((r) => r.EvalResourceDecision === 'allowed') ? 'allowed' : 'implicitDeny',
            ResourceSpecificResults: per,
          };
        });
        const { items, next } = page(results, input.Marker, 5);
        return {
          EvaluationResults: items,
          IsTruncated: next !== undefined,
          ...(next ? { Marker: next } : {}),
        };
      },
    );

  const clients: DoctorClients = {
    sts: new STSClient({ region: account.region }),
    cloudFormation: new CloudFormationClient({ region: account.region }),
    ssm: new SSMClient({ region: account.region }),
    ec2: new EC2Client({ region: account.region }),
    serviceQuotas: new ServiceQuotasClient({ region: account.region }),
    iam: new IAMClient({ region: account.region }),
  };
  const mocks = { sts, cloudFormation, ssm, ec2, serviceQuotas, iam };
  return {
    clients,
    mocks,
    restore: () => {
      for (const mock of Object.values(mocks)) mock.restore();
    },
  };
}
