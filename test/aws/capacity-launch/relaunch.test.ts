import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import 'aws-sdk-client-mock-vitest/extend';
import { beforeEach, describe, expect, it } from 'vitest';
import { RELAUNCH_ADVICE } from '../../../lib/aws/gpu-host.ts';
import { type Answer, LOGICAL_ID, ProviderSim, request, simDeps, unended } from './cfn-sim.ts';
import { FakeCloudFormation } from './fake-cfn.ts';
import { FakeEc2 } from './fake-ec2.ts';
import { FakeBootstraps, FakeWaitConditions, type WaitState } from './fake-wait.ts';
import { createdStack, LAB_AZS, launchProps, offerEverywhere, wireEc2, wireStack } from './kit.ts';

/**
 * A lab host that is gone (its cost guard or a person ended it) and the next deploy, with the
 * stack's WaitCondition in the picture: the real handler behind the simulated Provider framework,
 * a stateful EC2, and CloudFormation's wait conditions with their documented physics (a handle
 * keeps its signals, a condition is never updated: docs/facts.md §2.6). A deploy must either wait
 * for the new host's bootstrap on a fresh WaitCondition or fail; it must never complete on a host
 * nothing waited for.
 */

const ec2Mock = mockClient(EC2Client);
const cfnMock = mockClient(CloudFormationClient);

/** The lab's launch properties: generation `gen`, launch template version `version`. */
const labProps = (gen: number, version = gen) => ({
  ...launchProps(),
  LaunchTemplateVersion: String(version),
  Generation: String(gen),
  RelaunchAdvice: RELAUNCH_ADVICE,
});
type Props = ReturnType<typeof labProps>;

let ec2: FakeEc2;
let cfn: FakeCloudFormation;
let sim: ProviderSim;
let waits: FakeWaitConditions;
let bootstraps: FakeBootstraps;

beforeEach(() => {
  ec2Mock.reset();
  cfnMock.reset();
  ec2 = new FakeEc2();
  cfn = new FakeCloudFormation();
  sim = new ProviderSim(simDeps(ec2), ec2, cfn);
  waits = new FakeWaitConditions();
  bootstraps = new FakeBootstraps(ec2, waits);
  wireEc2(ec2Mock, () => ec2);
  wireStack(cfnMock, () => cfn);
  offerEverywhere(ec2Mock);
});

const readyOf = (props: Props) => `Ready${props.Generation}`;

/** Time passes for the WaitCondition: hosts boot and signal, until it is no longer waiting. */
function waitFor(logicalId: string): { state: WaitState; looks: number } {
  let looks = 0;
  for (;;) {
    looks += 1;
    const state = waits.check(logicalId);
    if (state !== 'waiting') return { state, looks };
    ec2.advance();
    bootstraps.tick();
  }
}

interface Deploy {
  readonly launch: Answer;
  /** The new generation's WaitCondition: how it ended and how often CloudFormation looked. */
  readonly ready?: { state: WaitState; looks: number };
}

/**
 * One `cdk deploy` as CloudFormation orders it: the launch's Update, then the WaitCondition of the
 * generation when the template adds it (it depends on the launch); a failure of either rolls the
 * launch back with its old properties.
 */
async function deploy(props: Props, before: Props, physicalId: string): Promise<Deploy> {
  cfn.setStack('UPDATE_IN_PROGRESS');
  cfn.setResource(LOGICAL_ID, 'UPDATE_IN_PROGRESS');
  const launch = await sim.run(
    request('Update', props, { PhysicalResourceId: physicalId, OldResourceProperties: before }),
  );
  const added =
    launch.status === 'SUCCESS' && waits.create(readyOf(props), FakeBootstraps.handleOf(props.Generation));
  const ready = added ? waitFor(readyOf(props)) : undefined;
  if (launch.status === 'SUCCESS' && (ready === undefined || ready.state === 'complete')) {
    cfn.setResource(LOGICAL_ID, 'UPDATE_COMPLETE', launch.physicalId);
    cfn.setStack('UPDATE_COMPLETE');
    return { launch, ...(ready ? { ready } : {}) };
  }
  cfn.setResource(LOGICAL_ID, 'UPDATE_FAILED');
  cfn.setStack('UPDATE_ROLLBACK_IN_PROGRESS');
  cfn.setResource(LOGICAL_ID, 'UPDATE_IN_PROGRESS');
  const current = launch.status === 'SUCCESS' ? launch.physicalId : physicalId;
  const back = await sim.run(
    request('Update', before, { PhysicalResourceId: current, OldResourceProperties: props }),
  );
  if (added) waits.delete(readyOf(props));
  cfn.setResource(LOGICAL_ID, back.status === 'SUCCESS' ? 'UPDATE_COMPLETE' : 'UPDATE_FAILED');
  cfn.setStack(back.status === 'SUCCESS' ? 'UPDATE_ROLLBACK_COMPLETE' : 'UPDATE_ROLLBACK_FAILED');
  return { launch, ...(ready ? { ready } : {}) };
}

/** The stack created with its host of generation 1 running and its WaitCondition complete. */
async function createdLab(): Promise<string> {
  const host = await createdStack({ sim, cfn }, labProps(1));
  waits.create('Ready1', FakeBootstraps.handleOf('1'));
  expect(waitFor('Ready1').state).toBe('complete');
  return host;
}

describe('a deploy after the host is gone', () => {
  it('under the same generation (a new AMI only) fails with the relaunch command and leaves no host', async () => {
    const host = await createdLab();
    ec2.endsItself(host); // the cost guard's deadline

    // A newer AMI behind the SSM parameter: a new template version, the same generation.
    const { launch } = await deploy(labProps(1, 2), labProps(1, 1), host);

    expect(launch.status).toBe('FAILED');
    expect(launch.reason).toContain(`${host} is terminated`);
    expect(launch.reason).toContain('npx cdk deploy -c relaunch=$(date +%s)');
    // Never UPDATE_COMPLETE on a host whose bootstrap no WaitCondition waited for.
    expect(cfn.history.at(-1)).toBe('UPDATE_ROLLBACK_COMPLETE');
    expect(ec2Mock).toHaveReceivedCommandTimes(RunInstancesCommand, 1);
    expect(unended(ec2)).toEqual([]);
  });

  it('with -c relaunch (a new generation) launches the host and waits for its bootstrap on a fresh handle', async () => {
    const host = await createdLab();
    ec2.endsItself(host);

    const { launch, ready } = await deploy(labProps(2), labProps(1), host);

    expect(launch.status).toBe('SUCCESS');
    expect(launch.physicalId).not.toBe(host);
    // CloudFormation looked more than once: the new host's signal came after the launch answered.
    expect(ready?.state).toBe('complete');
    expect(ready?.looks).toBeGreaterThan(1);
    expect(waits.signals.get('ReadyHandle2')?.map((s) => s.uniqueId)).toEqual([launch.physicalId]);
    expect(cfn.history.at(-1)).toBe('UPDATE_COMPLETE');
    expect(ec2.alive().map((i) => i.InstanceId)).toEqual([launch.physicalId]);
  });

  it('with -c relaunch whose new host fails its bootstrap: the fresh WaitCondition fails and the rollback ends it', async () => {
    const host = await createdLab();
    ec2.endsItself(host);
    bootstraps.outcome = 'FAILURE';

    const { launch, ready } = await deploy(labProps(2), labProps(1), host);

    expect(launch.status).toBe('SUCCESS');
    expect(ready?.state).toBe('failed');
    ec2.advance();
    expect(unended(ec2)).toEqual([]);
    expect(cfn.history.at(-1)).toBe('UPDATE_ROLLBACK_COMPLETE');
  });

  it('a host that is still running is kept by a new template version, with no new wait', async () => {
    const host = await createdLab();

    const { launch, ready } = await deploy(labProps(1, 2), labProps(1, 1), host);

    expect(launch).toMatchObject({ status: 'SUCCESS', physicalId: host });
    expect(ready).toBeUndefined();
    expect(cfn.history.at(-1)).toBe('UPDATE_COMPLETE');
  });
});

describe('a deploy whose network change replaces the host', () => {
  // A new subnet (the region gained an AZ, or a subnet was replaced): the launch's Update replaces
  // the running host (the type stays offered in us-west-2a and -b only).
  const wider = { Subnets: launchProps([...LAB_AZS, 'us-west-2c']).Subnets };
  const widerNetwork = (props: Props): Props => ({ ...props, ...wider });

  it('with the generation following the network (LabHost), waits for the new host on a fresh WaitCondition', async () => {
    const host = await createdLab();

    const { launch, ready } = await deploy(widerNetwork(labProps(2)), labProps(1), host);

    expect(launch.status).toBe('SUCCESS');
    expect(launch.physicalId).not.toBe(host);
    expect(ready?.state).toBe('complete');
    expect(ready?.looks).toBeGreaterThan(1);
    expect(waits.signals.get('ReadyHandle2')?.map((s) => s.uniqueId)).toEqual([launch.physicalId]);
    expect(ec2.alive().map((i) => i.InstanceId)).toEqual([launch.physicalId]);
    expect(cfn.history.at(-1)).toBe('UPDATE_COMPLETE');
  });

  it('under an unchanged generation the deploy would complete before the new host booted (why the generation follows)', async () => {
    const host = await createdLab();

    const { launch, ready } = await deploy(widerNetwork(labProps(1)), labProps(1), host);

    // The host was replaced, yet no WaitCondition was added: UPDATE_COMPLETE with the new host's
    // bootstrap unreported, and its signal would go to the old, finished handle.
    expect(launch.status).toBe('SUCCESS');
    expect(launch.physicalId).not.toBe(host);
    expect(ready).toBeUndefined();
    expect(cfn.history.at(-1)).toBe('UPDATE_COMPLETE');
    expect(waits.signals.get('ReadyHandle1')?.map((s) => s.uniqueId)).toEqual([host]);
  });
});

describe('the simulated wait conditions', () => {
  it("a condition on a reused handle completes at once on the old host's signal (why each generation has its own)", async () => {
    await createdLab();
    waits.create('ReadyAgain', FakeBootstraps.handleOf('1'));
    expect(waits.check('ReadyAgain')).toBe('complete');
  });
});
