import {
  CloudFormationServiceException,
  type DescribeStackResourceCommandInput,
  type DescribeStackResourceCommandOutput,
  type DescribeStacksCommandInput,
  type DescribeStacksCommandOutput,
  type ResourceStatus,
  type StackStatus,
} from '@aws-sdk/client-cloudformation';

/**
 * The part of CloudFormation the launch handler reads: a stack's status and its resources'
 * statuses, each with the time it last changed (DescribeStacks, DescribeStackResource). Every
 * change moves a clock on by one second, so a new operation on a resource has a new time, as in
 * CloudFormation's `LastUpdatedTimestamp` ("Time the status was updated").
 */

export const STACK_NAME = 'LlmGatewayLab';
export const STACK_ID = `arn:aws:cloudformation:us-west-2:111122223333:stack/${STACK_NAME}/0f0e0d0c-0b0a-4909-8807-060504030201`;

interface ResourceRecord {
  status: ResourceStatus;
  since: Date;
  physicalId?: string;
}

export class FakeCloudFormation {
  stackStatus: StackStatus = 'CREATE_IN_PROGRESS';
  readonly resources = new Map<string, ResourceRecord>();
  /** Every stack status, in order. */
  readonly history: StackStatus[] = ['CREATE_IN_PROGRESS'];
  private clock = 1_800_000_000_000;

  private tick(): Date {
    this.clock += 1000;
    return new Date(this.clock);
  }

  setStack(status: StackStatus): void {
    this.stackStatus = status;
    this.history.push(status);
    this.tick();
  }

  setResource(logicalId: string, status: ResourceStatus, physicalId?: string): void {
    const before = this.resources.get(logicalId);
    this.resources.set(logicalId, {
      status,
      since: this.tick(),
      physicalId: physicalId ?? before?.physicalId,
    });
  }

  removeResource(logicalId: string): void {
    this.resources.delete(logicalId);
  }

  statusOf(logicalId: string): string | undefined {
    return this.resources.get(logicalId)?.status;
  }

  describeStacks(input: DescribeStacksCommandInput): DescribeStacksCommandOutput {
    this.checkStack(input.StackName);
    return {
      Stacks: [
        {
          StackId: STACK_ID,
          StackName: STACK_NAME,
          StackStatus: this.stackStatus,
          CreationTime: new Date(0),
        },
      ],
      $metadata: {},
    };
  }

  describeStackResource(input: DescribeStackResourceCommandInput): DescribeStackResourceCommandOutput {
    this.checkStack(input.StackName);
    const record = this.resources.get(input.LogicalResourceId ?? '');
    if (!record) {
      throw new CloudFormationServiceException({
        name: 'ValidationError',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: `Resource ${input.LogicalResourceId} does not exist for stack ${STACK_NAME}`,
      });
    }
    return {
      StackResourceDetail: {
        StackName: STACK_NAME,
        StackId: STACK_ID,
        LogicalResourceId: input.LogicalResourceId,
        PhysicalResourceId: record.physicalId,
        ResourceType: 'Custom::CapacityLaunch',
        ResourceStatus: record.status,
        LastUpdatedTimestamp: record.since,
      },
      $metadata: {},
    };
  }

  private checkStack(name: string | undefined): void {
    if (name !== STACK_ID && name !== STACK_NAME) {
      throw new CloudFormationServiceException({
        name: 'ValidationError',
        $fault: 'client',
        $metadata: { httpStatusCode: 400 },
        message: `Stack with id ${name} does not exist`,
      });
    }
  }
}
