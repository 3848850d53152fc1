import type { FakeEc2 } from './fake-ec2.ts';

/**
 * CloudFormation's wait conditions as docs/facts.md §2.6 describes them: a handle keeps every signal
 * it received for its whole life; a WaitCondition is created once per logical id and never updated
 * (a template that keeps its logical id keeps its finished state); it completes on `count` SUCCESS
 * signals of its handle, fails on a FAILURE, and times out after `timeoutPolls` looks.
 */

export type SignalStatus = 'SUCCESS' | 'FAILURE';
export type WaitState = 'waiting' | 'complete' | 'failed' | 'timed out';

interface Condition {
  readonly handle: string;
  readonly count: number;
  readonly timeoutPolls: number;
  polls: number;
  state: WaitState;
}

export class FakeWaitConditions {
  /** Signals per handle, in arrival order; one per UniqueId (a repeat replaces it). */
  readonly signals = new Map<string, { status: SignalStatus; uniqueId: string }[]>();
  private readonly conditions = new Map<string, Condition>();

  /** A PUT to the handle's presigned URL. */
  signal(handle: string, status: SignalStatus, uniqueId: string): void {
    const kept = (this.signals.get(handle) ?? []).filter((s) => s.uniqueId !== uniqueId);
    this.signals.set(handle, [...kept, { status, uniqueId }]);
  }

  /** Creates the condition when the template adds it; false when the stack already has it (no update). */
  create(logicalId: string, handle: string, count = 1, timeoutPolls = 20): boolean {
    if (this.conditions.has(logicalId)) return false;
    this.conditions.set(logicalId, { handle, count, timeoutPolls, polls: 0, state: 'waiting' });
    return true;
  }

  delete(logicalId: string): void {
    this.conditions.delete(logicalId);
  }

  /** One look at a waiting condition; a finished one keeps its state. */
  check(logicalId: string): WaitState {
    const condition = this.conditions.get(logicalId);
    if (!condition) throw new Error(`FakeWaitConditions: no condition ${logicalId}`);
    if (condition.state !== 'waiting') return condition.state;
    const signals = this.signals.get(condition.handle) ?? [];
    condition.polls += 1;
    if (signals.some((s) => s.status === 'FAILURE')) condition.state = 'failed';
    else if (signals.filter((s) => s.status === 'SUCCESS').length >= condition.count)
      condition.state = 'complete';
    else if (condition.polls > condition.timeoutPolls) condition.state = 'timed out';
    return condition.state;
  }
}

/**
 * The hosts' bootstraps: a host that is running finishes its bootstrap on the next tick and signals
 * the handle its user data names (that of the generation it was launched for), once, with `outcome`.
 */
export class FakeBootstraps {
  outcome: SignalStatus = 'SUCCESS';
  private readonly booted = new Set<string>();

  constructor(
    private readonly ec2: FakeEc2,
    private readonly waits: FakeWaitConditions,
  ) {}

  /** The handle a host of `generation` signals (the stack's `ReadyHandle<generation>`). */
  static handleOf(generation: string): string {
    return `ReadyHandle${generation}`;
  }

  tick(): void {
    for (const instance of this.ec2.instances) {
      const id = instance.InstanceId ?? '';
      if (instance.State?.Name !== 'running' || this.booted.has(id)) continue;
      this.booted.add(id);
      const generation = instance.Tags?.find((t) => t.Key === 'llm-gateway-lab:generation')?.Value ?? '';
      this.waits.signal(FakeBootstraps.handleOf(generation), this.outcome, id);
    }
  }
}
