import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client } from '@aws-sdk/client-ec2';
import {
  checkComplete,
  type HandlerDeps,
  handleEvent,
  type ResourceEvent,
} from '../../../lib/aws/capacity-launch/handler.ts';
import type { FakeCloudFormation } from './fake-cfn.ts';
import { STACK_ID } from './fake-cfn.ts';
import type { FakeEc2 } from './fake-ec2.ts';

/**
 * The CDK Provider framework around the real handler, as CloudFormation sees it, for sequences in
 * which CloudFormation cancels a request: onEvent runs the handler's `handleEvent`; when it
 * returns, the waiter polls `checkComplete` (time passes between polls: the fake EC2 advances);
 * the first SUCCESS or FAILED is the request's answer. Modelled on aws-cdk-lib 2.276.0
 * custom-resources/lib/provider-framework/runtime: framework.js `onEvent` and
 * `createResponseEvent` (the waiter's input is `{...request, ...onEventResult}`, a Create's
 * default physical id is its RequestId), `isComplete` (Data merged), and cfn-response.js
 * `safeHandler` (a failed Create answers with the CREATE_FAILED marker as physical id).
 * CloudFormation ignores any answer to a request it no longer waits for: `answered` records
 * them all, `cfnAccepts` says which one CloudFormation would take.
 */

export const LOGICAL_ID = 'HostLaunch';
export const CREATE_FAILED_MARKER = 'AWSCDK::CustomResourceProviderFramework::CREATE_FAILED';

export interface Answer {
  readonly status: 'SUCCESS' | 'FAILED';
  readonly physicalId: string;
  readonly reason?: string;
  readonly data?: Record<string, unknown>;
}

export interface Request {
  readonly event: ResourceEvent;
  /** The waiter's input once onEvent returned; undefined when onEvent failed. */
  waiting?: ResourceEvent;
  answer?: Answer;
}

export function simDeps(ec2: FakeEc2): HandlerDeps {
  return {
    launchEc2: new EC2Client({ region: 'us-west-2', maxAttempts: 1 }),
    ec2: new EC2Client({ region: 'us-west-2' }),
    cfn: new CloudFormationClient({ region: 'us-west-2' }),
    // While the handler sleeps, time passes: what DescribeInstances did not list yet, it lists now.
    sleep: async () => ec2.hidden.clear(),
    log: process.env.SIM_LOG ? (line) => console.log(line) : () => {},
  };
}

let requests = 0;

/** A request as CloudFormation sends it for the resource. */
export function request(
  type: ResourceEvent['RequestType'],
  props: Record<string, unknown>,
  extra: Partial<ResourceEvent> = {},
): ResourceEvent {
  requests += 1;
  return {
    RequestType: type,
    RequestId: `req-${requests}-${type.toLowerCase()}`,
    StackId: STACK_ID,
    LogicalResourceId: LOGICAL_ID,
    ResourceProperties: props,
    ...extra,
  };
}

export class ProviderSim {
  constructor(
    readonly deps: HandlerDeps,
    readonly ec2: FakeEc2,
    readonly cfn: FakeCloudFormation,
  ) {}

  /** The framework's onEvent: the handler's onEvent, then the waiter's start (or a FAILED answer). */
  async start(event: ResourceEvent): Promise<Request> {
    const req: Request = { event };
    try {
      const result = await handleEvent(event, this.deps);
      const fallback = event.RequestType === 'Create' ? (event.RequestId ?? '') : event.PhysicalResourceId;
      req.waiting = { ...event, ...result, PhysicalResourceId: result.PhysicalResourceId || fallback };
    } catch (err) {
      const physicalId =
        event.PhysicalResourceId ?? (event.RequestType === 'Create' ? CREATE_FAILED_MARKER : '');
      req.answer = { status: 'FAILED', physicalId, reason: (err as Error).message };
    }
    return req;
  }

  /** One isComplete call of the waiter; true once the request has its answer. */
  async poll(req: Request): Promise<boolean> {
    if (req.answer) return true;
    const waiting = req.waiting as ResourceEvent;
    try {
      const result = await checkComplete(waiting, this.deps);
      if (!result.IsComplete) return false;
      const data = { ...(waiting as { Data?: object }).Data, ...result.Data };
      req.answer = {
        status: 'SUCCESS',
        physicalId: result.PhysicalResourceId ?? waiting.PhysicalResourceId ?? '',
        data,
      };
    } catch (err) {
      req.answer = {
        status: 'FAILED',
        physicalId: waiting.PhysicalResourceId ?? '',
        reason: (err as Error).message,
      };
    }
    return true;
  }

  /** Polls until the answer, time passing between polls (the framework's 15-second interval). */
  async finish(req: Request, maxPolls = 40): Promise<Answer> {
    for (let i = 0; i < maxPolls; i++) {
      if (await this.poll(req)) return req.answer as Answer;
      this.ec2.advance();
    }
    throw new Error(`the waiter of ${req.event.RequestId} timed out after ${maxPolls} polls`);
  }

  /** Start and finish: a request nobody interrupts. */
  async run(event: ResourceEvent): Promise<Answer> {
    return this.finish(await this.start(event));
  }
}

/** Instances of the stack that still bill or could (anything not terminated). */
export function unended(ec2: FakeEc2): string[] {
  return ec2.alive().map((i) => `${i.InstanceId} (${i.State?.Name})`);
}
