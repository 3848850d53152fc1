import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { LOGICAL_ID, ProviderSim, request, simDeps, unended } from './cfn-sim.ts';
import { FakeCloudFormation } from './fake-cfn.ts';
import { FakeEc2 } from './fake-ec2.ts';
import {
  createdStack as created,
  forwardUpdate,
  launchProps,
  offerEverywhere,
  rollbackUpdate,
  wireEc2,
  wireStack,
} from './kit.ts';

/**
 * CloudFormation sequences in which a launch is cancelled while it runs, driven against the real
 * handler (the Provider framework modelled in cfn-sim.ts, EC2 and CloudFormation as stateful
 * fakes). Each must end with no instance of the stack left and the stack in a *_COMPLETE state:
 * CloudFormation cannot stop a handler, so the handler must notice (aws-cloudformation/
 * cloudformation-coverage-roadmap#1814 for the Delete with a generated physical id).
 */

const ec2Mock = mockClient(EC2Client);
const cfnMock = mockClient(CloudFormationClient);

const generation = (n: number) => ({
  ...launchProps(),
  LaunchTemplateVersion: String(n),
  Generation: String(n),
});

// What CloudFormation puts in a Delete for a resource whose create it cancelled.
const GENERATED_ID = 'LlmGatewayLab-HostLaunch-1XK3T9QZ0ABCD';

let ec2: FakeEc2;
let cfn: FakeCloudFormation;
let sim: ProviderSim;

beforeEach(() => {
  ec2Mock.reset();
  cfnMock.reset();
  ec2 = new FakeEc2();
  cfn = new FakeCloudFormation();
  sim = new ProviderSim(simDeps(ec2), ec2, cfn);
  wireEc2(ec2Mock, () => ec2);
  wireStack(cfnMock, () => cfn);
  offerEverywhere(ec2Mock);
});

/** Time passes until every instance asked to end has ended. */
function settle(): void {
  ec2.advance();
  ec2.advance();
}

/** A created stack with its host (generation 1) running. */
const createdStack = () => created({ sim, cfn }, generation(1));
/** The deploy that replaces generation 1's host with generation 2's starts. */
const toGeneration2 = (first: string) => forwardUpdate({ sim, cfn }, first, generation(2), generation(1));
/** A sibling fails; the launch is rolled back to generation 1. */
const backToGeneration1 = (first: string) =>
  rollbackUpdate({ sim, cfn }, first, generation(1), generation(2));

/** CloudFormation cancels the in-flight create of the resource because a sibling failed. */
function siblingFailsCreate(): void {
  cfn.setResource(LOGICAL_ID, 'CREATE_FAILED');
  cfn.setStack('ROLLBACK_IN_PROGRESS');
}

describe('a sibling fails while the host is being created', () => {
  it('the cancelled launch, still in RunInstances, ends what it starts; the Delete with a generated id succeeds', async () => {
    cfn.setResource(LOGICAL_ID, 'CREATE_IN_PROGRESS');
    const hold = ec2.holdNextRun();
    const creating = sim.start(request('Create', generation(1)));
    await hold.reached;

    siblingFailsCreate();
    cfn.setResource(LOGICAL_ID, 'DELETE_IN_PROGRESS');
    const removed = await sim.run(request('Delete', generation(1), { PhysicalResourceId: GENERATED_ID }));
    expect(removed.status).toBe('SUCCESS');
    cfn.setResource(LOGICAL_ID, 'DELETE_COMPLETE');
    cfn.setStack('ROLLBACK_COMPLETE');

    // RunInstances returns only now: the instance starts after the rollback finished.
    hold.release();
    const created = await creating;
    if (!created.answer) await sim.finish(created);
    settle();

    expect(unended(ec2)).toEqual([]);
    expect(created.answer?.status).toBe('FAILED');
    expect(ec2.instances).toHaveLength(1);
    expect(cfn.history.at(-1)).toBe('ROLLBACK_COMPLETE');
  });

  it('a launch that already returned is found by its tags and ended by the Delete', async () => {
    cfn.setResource(LOGICAL_ID, 'CREATE_IN_PROGRESS');
    const created = await sim.start(request('Create', generation(1)));
    expect(await sim.poll(created)).toBe(false);

    siblingFailsCreate();
    cfn.setResource(LOGICAL_ID, 'DELETE_IN_PROGRESS');
    const removed = await sim.run(request('Delete', generation(1), { PhysicalResourceId: GENERATED_ID }));
    cfn.setStack(removed.status === 'SUCCESS' ? 'ROLLBACK_COMPLETE' : 'ROLLBACK_FAILED');
    // The cancelled request's waiter goes on; CloudFormation ignores its answer.
    await sim.finish(created);
    settle();

    expect(removed.status).toBe('SUCCESS');
    expect(unended(ec2)).toEqual([]);
    expect(cfn.history.at(-1)).toBe('ROLLBACK_COMPLETE');
  });
});

describe('a sibling fails while the host is being replaced', () => {
  it('neither the cancelled replacement nor the rollback leaves a host, and the rollback completes', async () => {
    const first = await createdStack();
    const forward = await toGeneration2(first);
    expect(await sim.poll(forward)).toBe(false); // the old host is shutting down
    settle();
    expect(await sim.poll(forward)).toBe(false); // the replacement is launched, pending
    expect(unended(ec2)).toHaveLength(1);

    const back = await backToGeneration1(first);
    await sim.finish(forward);
    cfn.setResource(LOGICAL_ID, back.status === 'SUCCESS' ? 'UPDATE_COMPLETE' : 'UPDATE_FAILED');
    cfn.setStack(back.status === 'SUCCESS' ? 'UPDATE_ROLLBACK_COMPLETE' : 'UPDATE_ROLLBACK_FAILED');
    settle();

    expect(back).toMatchObject({ status: 'SUCCESS', physicalId: first });
    expect(back.data?.AttemptLog).toMatch(/^no host: the stack is UPDATE_ROLLBACK_IN_PROGRESS/);
    expect(unended(ec2)).toEqual([]);
    expect(cfn.history.at(-1)).toBe('UPDATE_ROLLBACK_COMPLETE');
  });

  it('a second Update (the rollback) while the first still waits: the first launches nothing afterwards', async () => {
    const first = await createdStack();
    const forward = await toGeneration2(first);
    expect(await sim.poll(forward)).toBe(false); // the old host is shutting down

    const back = await backToGeneration1(first);
    cfn.setResource(LOGICAL_ID, 'UPDATE_COMPLETE');
    cfn.setStack('UPDATE_ROLLBACK_COMPLETE');
    // The old host is terminated now; the first Update's waiter polls on.
    await sim.finish(forward);
    settle();

    expect(back.status).toBe('SUCCESS');
    expect(forward.answer?.status).toBe('FAILED');
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1); // the first host only
    expect(unended(ec2)).toEqual([]);
    expect(cfn.history.at(-1)).toBe('UPDATE_ROLLBACK_COMPLETE');
  });

  it('a superseded Update whose waiter outlives its rollback launches nothing into the next deploy', async () => {
    const first = await createdStack();
    const forward = await toGeneration2(first);
    await backToGeneration1(first);
    cfn.setResource(LOGICAL_ID, 'UPDATE_COMPLETE');
    cfn.setStack('UPDATE_ROLLBACK_COMPLETE');

    // The next deploy starts while the first Update's waiter still polls.
    const next = await forwardUpdate({ sim, cfn }, first, generation(3), generation(1));
    settle();
    expect(await sim.poll(forward)).toBe(true);
    const answer = await sim.finish(next);
    cfn.setStack('UPDATE_COMPLETE');

    expect(forward.answer?.reason).toMatch(/a newer operation on the resource began/);
    expect(answer.status).toBe('SUCCESS');
    const live = ec2.alive();
    expect(live.map((i) => i.Tags?.find((t) => t.Key === 'llm-gateway-lab:generation')?.Value)).toEqual([
      '3',
    ]);
    expect(answer.physicalId).toBe(live[0]?.InstanceId);
  });
});

describe('the stack is deleted while the host is being created', () => {
  it('the Delete with a generated id and the cancelled launch leave nothing; DELETE_COMPLETE', async () => {
    cfn.setResource(LOGICAL_ID, 'CREATE_IN_PROGRESS');
    const hold = ec2.holdNextRun();
    const creating = sim.start(request('Create', generation(1)));
    await hold.reached;

    cfn.setStack('DELETE_IN_PROGRESS');
    cfn.setResource(LOGICAL_ID, 'DELETE_IN_PROGRESS');
    const deleting = sim.start(request('Delete', generation(1), { PhysicalResourceId: GENERATED_ID }));
    const removal = await deleting;
    // RunInstances returns while the Delete's waiter polls.
    hold.release();
    const created = await creating;
    const removed = await sim.finish(removal);
    if (!created.answer) await sim.finish(created);
    cfn.setStack(removed.status === 'SUCCESS' ? 'DELETE_COMPLETE' : 'DELETE_FAILED');
    settle();

    expect(removed.status).toBe('SUCCESS');
    expect(unended(ec2)).toEqual([]);
    expect(cfn.history.at(-1)).toBe('DELETE_COMPLETE');
  });

  it('a Delete whose host is gone waits for every tagged instance of the resource to terminate', async () => {
    const host = await createdStack();
    cfn.setStack('DELETE_IN_PROGRESS');
    cfn.setResource(LOGICAL_ID, 'DELETE_IN_PROGRESS');
    const removal = await sim.start(request('Delete', generation(1), { PhysicalResourceId: host }));

    expect(await sim.poll(removal)).toBe(false); // shutting-down still bills nothing but is not gone
    settle();
    expect(await sim.poll(removal)).toBe(true);
    expect(unended(ec2)).toEqual([]);
  });
});

describe('launch is idempotent across DescribeInstances eventual consistency', () => {
  it('a replacement launched in the second AZ is not launched again in the first when it is not listed yet', async () => {
    const first = await createdStack();
    ec2.hideNewInstances = true;
    ec2.noCapacityIn.add('us-west-2a');
    const update = await toGeneration2(first);
    expect(await sim.poll(update)).toBe(false);
    ec2.advance(); // the old host is terminated; no time passes in the waiter otherwise
    expect(await sim.poll(update)).toBe(false); // launched in us-west-2b
    // Capacity comes back in us-west-2a; the next poll must find the launch, not make another.
    ec2.noCapacityIn.clear();
    const answer = await sim.finish(update);

    expect(answer.status).toBe('SUCCESS');
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 3); // first host, 2a refused, 2b
    expect(ec2.alive().map((i) => i.Placement?.AvailabilityZone)).toEqual(['us-west-2b']);
  });
});
