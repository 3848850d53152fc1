import { createRequire } from 'node:module';
import { join } from 'node:path';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import {
  DescribeInstancesCommand,
  EC2Client,
  EC2ServiceException,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isComplete, onEvent } from '../../../lib/aws/capacity-launch/handler.ts';
import { FakeCloudFormation, STACK_ID } from './fake-cfn.ts';
import { launchProps, offerEverywhere, wireStack } from './kit.ts';

/**
 * The FAILED response CloudFormation receives, built by the CDK Provider framework's own code
 * (aws-cdk-lib 2.276.0 in node_modules: custom-resources/lib/provider-framework/runtime/
 * framework.js and cfn-response.js), around the handler's real `onEvent`/`isComplete` exports.
 * Only the framework's transport module (outbound.js: Lambda invoke, Step Functions, the HTTPS
 * PUT) is swapped. The user function's failure reaches the framework as the Node Lambda runtime
 * sends it: `{ errorType, errorMessage, trace: error.stack.split("\n") }`
 * (aws-lambda-nodejs-runtime-interface-client, src/Errors/index.ts `toRuntimeResponse`).
 * CloudFormation refuses a response body over 4,096 bytes.
 */

const RUNTIME = join(
  process.cwd(),
  'node_modules/aws-cdk-lib/custom-resources/lib/provider-framework/runtime',
);
const nodeRequire = createRequire(import.meta.url);

const ON_EVENT_ARN =
  'arn:aws:lambda:us-west-2:111122223333:function:LlmGatewayLab-CapacityLaunchOnEventA1B2C3D4-AbCdEfGhIjKl';
const IS_COMPLETE_ARN =
  'arn:aws:lambda:us-west-2:111122223333:function:LlmGatewayLab-CapacityLaunchIsCompleteE5F6A7B8-MnOpQrStUvWx';
const RESPONSE_LIMIT = 4096;

interface Transport {
  bodies: string[];
  executions: { input: string }[];
}

const transport: Transport = { bodies: [], executions: [] };

/** As the Node runtime reports a handler's failure to a synchronous invoke. */
function runtimeError(err: unknown) {
  const error = err as Error;
  return { errorType: error.name, errorMessage: error.message, trace: (error.stack ?? '').split('\n') };
}

const fakeOutbound = {
  invokeFunction: async (req: { FunctionName: string; Payload: string }) => {
    const event = JSON.parse(req.Payload);
    const handler = req.FunctionName === ON_EVENT_ARN ? onEvent : isComplete;
    try {
      return { Payload: Buffer.from(JSON.stringify(await handler(event))) };
    } catch (err) {
      return { FunctionError: 'Unhandled', Payload: Buffer.from(JSON.stringify(runtimeError(err))) };
    }
  },
  startExecution: async (req: { input: string }) => {
    transport.executions.push(req);
    return {};
  },
  httpRequest: async (_options: unknown, body: string) => {
    transport.bodies.push(body);
  },
};

type FrameworkHandler = (event: Record<string, unknown>) => Promise<void>;
let framework: { onEvent: FrameworkHandler; isComplete: FrameworkHandler };

const ec2Mock = mockClient(EC2Client);
const cfnMock = mockClient(CloudFormationClient);
let cfn: FakeCloudFormation;

beforeAll(() => {
  const outbound = nodeRequire.resolve(join(RUNTIME, 'outbound.js'));
  // The framework's transport only: framework.js and cfn-response.js are loaded as they ship.
  nodeRequire.cache[outbound] = {
    id: outbound,
    filename: outbound,
    loaded: true,
    exports: fakeOutbound,
  } as unknown as NodeJS.Module;
  framework = nodeRequire(join(RUNTIME, 'framework.js'));
  vi.stubEnv('USER_ON_EVENT_FUNCTION_ARN', ON_EVENT_ARN);
  vi.stubEnv('USER_IS_COMPLETE_FUNCTION_ARN', IS_COMPLETE_ARN);
  vi.stubEnv('WAITER_STATE_MACHINE_ARN', 'arn:aws:states:us-west-2:111122223333:stateMachine:waiter');
  vi.stubEnv('AWS_REGION', 'us-west-2');
  vi.spyOn(console, 'log').mockImplementation(() => {});
});

afterAll(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

const AZS = ['us-west-2a', 'us-west-2b', 'us-west-2c', 'us-west-2d'];
const TYPES = ['g6.12xlarge', 'g5.12xlarge'];

const PROPS = launchProps(AZS, TYPES);

function cfnRequest(type: 'Create' | 'Update', extra: Record<string, unknown> = {}) {
  return {
    RequestType: type,
    ServiceToken: PROPS.ServiceToken,
    ResponseURL:
      'https://cloudformation-custom-resource-response-uswest2.s3-us-west-2.amazonaws.com/arn%3Aaws%3Acloudformation%3Aus-west-2%3A111122223333%3Astack/LlmGatewayLab/0f0e0d0c-0b0a-4909-8807-060504030201%7CCapacityLaunch%7C5b3c1a6e-6d1f-4f5e-9a43-2a8e0f3c7d11?X-Amz-Algorithm=AWS4-HMAC-SHA256',
    StackId: STACK_ID,
    RequestId: '5b3c1a6e-6d1f-4f5e-9a43-2a8e0f3c7d11',
    LogicalResourceId: 'CapacityLaunchResourceC3B2A1F0',
    ResourceType: 'Custom::CapacityLaunch',
    ResourceProperties: PROPS,
    ...extra,
  };
}

beforeEach(() => {
  transport.bodies = [];
  transport.executions = [];
  ec2Mock.reset();
  cfnMock.reset();
  cfn = new FakeCloudFormation();
  cfn.setResource('CapacityLaunchResourceC3B2A1F0', 'CREATE_IN_PROGRESS');
  wireStack(cfnMock, () => cfn);
  ec2Mock.on(DescribeInstancesCommand).resolves({ Reservations: [] });
  offerEverywhere(ec2Mock, AZS);
});

const noCapacity = (type: string, az: string) =>
  new EC2ServiceException({
    name: 'InsufficientInstanceCapacity',
    $fault: 'server',
    $metadata: { httpStatusCode: 500 },
    message: `We currently do not have sufficient ${type} capacity in the Availability Zone you requested (${az}). Our system will be working on provisioning additional capacity. You can currently get ${type} capacity by not specifying an Availability Zone in your request or choosing ${AZS.filter((a) => a !== az).join(', ')}.`,
  });

describe('the FAILED response on the Provider framework path', () => {
  it('a no-capacity failure over 4 AZs x 2 types stays under 4,096 bytes with every attempt once', async () => {
    ec2Mock.on(RunInstancesCommand).callsFake((input) => {
      const az = `us-west-2${String(input.NetworkInterfaces?.[0]?.SubnetId).slice(-1)}`;
      throw noCapacity(String(input.InstanceType), az);
    });

    await framework.onEvent(cfnRequest('Create'));

    expect(transport.bodies).toHaveLength(1);
    const body = transport.bodies[0] ?? '';
    const response = JSON.parse(body);
    expect(response.Status).toBe('FAILED');
    expect(Buffer.byteLength(body, 'utf8')).toBeLessThan(RESPONSE_LIMIT);
    expect(response.Reason).toMatch(/^No instance launched: every offered Availability Zone failed/);
    // Every attempt once (the stack repeats none of the message's lines), then the framework's
    // pointer to the log group.
    for (const type of TYPES) {
      for (const az of AZS) expect(response.Reason.split(`| ${az} | ${type} |`)).toHaveLength(2);
    }
    expect(response.Reason.match(/No instance launched/g)).toHaveLength(1);
    expect(response.Reason).toContain('Logs: /aws/lambda/LlmGatewayLab-CapacityLaunchOnEventA1B2C3D4');
  });

  it('an isComplete failure beside a full attempt log in Data stays under 4,096 bytes', async () => {
    const attemptLog = Array.from(
      { length: 40 },
      (_, i) =>
        `g6.12xlarge: InsufficientInstanceCapacity in us-west-2${'abcd'[i % 4]}, trying the next "AZ"`,
    ).join('\n');
    ec2Mock.on(DescribeInstancesCommand).resolves({
      Reservations: [
        {
          Instances: [
            {
              InstanceId: 'i-0bbbbbbbbbbbbbbbb',
              InstanceType: 'g6.12xlarge',
              Placement: { AvailabilityZone: 'us-west-2d' },
              State: { Name: 'terminated', Code: 48 },
              StateReason: {
                Code: 'Client.InternalError',
                Message: 'Client.InternalError: Client error on launch',
              },
            },
          ],
        },
      ],
    });

    await framework.isComplete({
      ...cfnRequest('Create'),
      PhysicalResourceId: 'i-0bbbbbbbbbbbbbbbb',
      Data: {
        InstanceId: 'i-0bbbbbbbbbbbbbbbb',
        AvailabilityZone: 'us-west-2d',
        InstanceType: 'g6.12xlarge',
        AttemptLog: attemptLog.slice(0, 1500),
        PrivateIpAddress: '',
      },
    });

    const body = transport.bodies[0] ?? '';
    expect(JSON.parse(body).Status).toBe('FAILED');
    expect(JSON.parse(body).Reason).toContain('went to terminated instead of running: Client.InternalError');
    expect(Buffer.byteLength(body, 'utf8')).toBeLessThan(RESPONSE_LIMIT);
  });
});
