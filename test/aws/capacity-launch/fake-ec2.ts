import {
  type DescribeInstancesCommandInput,
  type DescribeInstancesCommandOutput,
  EC2ServiceException,
  type Instance,
  type InstanceStateName,
  type RunInstancesCommandInput,
  type RunInstancesCommandOutput,
  type TerminateInstancesCommandInput,
  type TerminateInstancesCommandOutput,
} from '@aws-sdk/client-ec2';

/**
 * A small EC2 for handler tests, answering DescribeInstances (ids or filters), RunInstances and
 * TerminateInstances the way EC2 does in the respects the handler relies on: a client token
 * returns the instance it launched before; an On-Demand vCPU quota counts every instance that is
 * not terminated; termination passes through shutting-down; a new instance starts pending.
 * `advance()` moves every instance one state on, as time would.
 */

export function ec2Error(name: string, message: string, httpStatusCode = 400): EC2ServiceException {
  return new EC2ServiceException({
    name,
    $fault: httpStatusCode >= 500 ? 'server' : 'client',
    $metadata: { httpStatusCode },
    message,
  });
}

const VCPUS: Record<string, number> = { 'g6.12xlarge': 48, 'g6.48xlarge': 192 };

export class FakeEc2 {
  readonly instances: Instance[] = [];
  /** Most instances that were not terminated at one time, over the whole test. */
  maxAlive = 0;
  /** The account's "Running On-Demand G and VT instances" quota, in vCPUs. */
  quotaVcpus = 48;
  /** How many RunInstances replies to lose (the launch happens, the answer never arrives). */
  lostReplies = 0;
  /** Instances DescribeInstances does not show yet (eventual consistency right after a launch). */
  readonly hidden = new Set<string>();
  /** Whether each new instance starts out hidden from DescribeInstances (until time passes). */
  hideNewInstances = false;
  /** Availability Zones with no capacity for now (RunInstances there: InsufficientInstanceCapacity). */
  readonly noCapacityIn = new Set<string>();
  private launched = 0;
  private held?: { arrived: () => void; release: Promise<void> };

  /**
   * Holds the next RunInstances until `release()`: `reached` resolves once a launch is waiting,
   * so that a test can change the world (cancel the stack) while the call is in flight.
   */
  holdNextRun(): { reached: Promise<void>; release: () => void } {
    let arrived = () => {};
    let release = () => {};
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.held = { arrived, release: released };
    return { reached, release };
  }

  /** RunInstances as the SDK mock calls it: held when a test asked for it. */
  async runAsync(input: RunInstancesCommandInput): Promise<RunInstancesCommandOutput> {
    const held = this.held;
    if (held) {
      this.held = undefined;
      held.arrived();
      await held.release;
    }
    return this.run(input);
  }

  add(instance: Instance): Instance {
    this.instances.push(instance);
    this.countAlive();
    return instance;
  }

  describe(input: DescribeInstancesCommandInput): DescribeInstancesCommandOutput {
    let found = this.instances.filter((i) => !this.hidden.has(i.InstanceId ?? ''));
    if (input.InstanceIds) {
      found = found.filter((i) => input.InstanceIds?.includes(i.InstanceId ?? ''));
      if (found.length === 0) {
        throw ec2Error('InvalidInstanceID.NotFound', `The instance IDs '${input.InstanceIds}' do not exist`);
      }
    }
    for (const filter of input.Filters ?? []) {
      const values = filter.Values ?? [];
      found = found.filter((i) => values.includes(this.field(i, filter.Name ?? '') ?? ''));
    }
    return { Reservations: found.map((i) => ({ Instances: [i] })), $metadata: {} };
  }

  run(input: RunInstancesCommandInput): RunInstancesCommandOutput {
    const earlier = this.instances.find((i) => input.ClientToken && i.ClientToken === input.ClientToken);
    if (earlier) return this.reply(earlier);
    const type = input.InstanceType ?? '';
    const used = this.alive().reduce((sum, i) => sum + (VCPUS[i.InstanceType ?? ''] ?? 0), 0);
    if (used + (VCPUS[type] ?? 0) > this.quotaVcpus) {
      throw ec2Error(
        'VcpuLimitExceeded',
        `You have requested more vCPU capacity than your current vCPU limit of ${this.quotaVcpus} allows for the instance bucket that the specified instance type belongs to.`,
      );
    }
    const subnet = input.NetworkInterfaces?.[0]?.SubnetId ?? '';
    const az = `us-west-2${subnet.slice(-1)}`;
    if (this.noCapacityIn.has(az)) {
      throw ec2Error(
        'InsufficientInstanceCapacity',
        `We currently do not have sufficient ${type} capacity in the Availability Zone you requested (${az}).`,
        500,
      );
    }
    this.launched += 1;
    const instance = this.add({
      InstanceId: `i-0a${String(this.launched).padStart(15, '0')}`,
      InstanceType: type as Instance['InstanceType'],
      Placement: { AvailabilityZone: az },
      PrivateIpAddress: `10.0.0.${this.launched}`,
      State: { Name: 'pending', Code: 0 },
      ClientToken: input.ClientToken,
      LaunchTime: new Date(1_700_000_000_000 + this.launched * 1000),
      Tags: input.TagSpecifications?.find((t) => t.ResourceType === 'instance')?.Tags ?? [],
    });
    if (this.hideNewInstances) this.hidden.add(instance.InstanceId ?? '');
    return this.reply(instance);
  }

  private reply(instance: Instance): RunInstancesCommandOutput {
    if (this.lostReplies > 0) {
      this.lostReplies -= 1;
      // As @smithy/node-http-handler names a request that got no answer in time.
      throw Object.assign(new Error('socket timed out after 30000 ms'), { name: 'TimeoutError' });
    }
    return { Instances: [instance], $metadata: {} };
  }

  terminate(input: TerminateInstancesCommandInput): TerminateInstancesCommandOutput {
    for (const id of input.InstanceIds ?? []) {
      const instance = this.instances.find((i) => i.InstanceId === id);
      if (!instance) throw ec2Error('InvalidInstanceID.NotFound', `The instance ID '${id}' does not exist`);
      if (instance.State?.Name !== 'terminated') this.setState(instance, 'shutting-down');
    }
    return { $metadata: {} };
  }

  /** The host ends itself (its cost guard's shutdown, terminate-on-shutdown): gone at once. */
  endsItself(id: string): void {
    const instance = this.instances.find((i) => i.InstanceId === id);
    if (!instance) throw new Error(`FakeEc2: no instance ${id}`);
    this.setState(instance, 'terminated');
  }

  /** Time passes: pending instances run, shutting-down ones are terminated. */
  advance(): void {
    for (const instance of this.instances) {
      if (instance.State?.Name === 'pending') this.setState(instance, 'running');
      else if (instance.State?.Name === 'shutting-down') this.setState(instance, 'terminated');
    }
    this.hidden.clear();
  }

  alive(): Instance[] {
    return this.instances.filter((i) => i.State?.Name !== 'terminated');
  }

  stateOf(id: string): string | undefined {
    return this.instances.find((i) => i.InstanceId === id)?.State?.Name;
  }

  private setState(instance: Instance, name: InstanceStateName): void {
    instance.State = { Name: name, Code: 0 };
    this.countAlive();
  }

  private countAlive(): void {
    this.maxAlive = Math.max(this.maxAlive, this.alive().length);
  }

  private field(instance: Instance, name: string): string | undefined {
    if (name === 'client-token') return instance.ClientToken;
    if (name === 'instance-state-name') return instance.State?.Name;
    if (name.startsWith('tag:')) return instance.Tags?.find((t) => t.Key === name.slice(4))?.Value;
    throw new Error(`FakeEc2: filter ${name} is not modelled`);
  }
}
