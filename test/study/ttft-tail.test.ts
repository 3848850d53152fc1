/**
 * Where the simulator's p99 TTFT comes from (docs/planning.md, "The p99 TTFT tail"): the opening
 * burst sets it for every arm alike, and after the burst a missed prefix costs a load-balancing arm
 * its tail by queueing behind long prefills under the chunked-prefill budget (vLLM's running-first,
 * FCFS-within-budget step, docs/facts.md §3.1).
 */
import { describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { planEngine, planInput } from '../../lib/study/planner.ts';
import {
  DEFAULT_SIMULATION_MODEL,
  type RoutingPolicy,
  type SimulationInput,
  type SimulationModel,
  type SimulationTiming,
  simulate,
} from '../../lib/study/simulator.ts';

const CONFIG = defaultLabConfig();
const STUDY: SimulationInput = planInput(CONFIG);
const ENGINE: SimulationModel = { ...DEFAULT_SIMULATION_MODEL, ...planEngine(CONFIG) };
const SEEDS = [42, 43, 44, 45, 46];
/** The partition arm as the study runs it: one client per replica, half the prefixes, prompts and concurrency. */
const HALF: SimulationInput = { ...STUDY, replicas: 1, prefixes: 64, prompts: 512, concurrency: 16 };
const PARTITION_SEEDS = [42, 4242, 43, 4243];

const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

function arm(policy: RoutingPolicy, model: Partial<SimulationModel> = {}): SimulationTiming[] {
  return SEEDS.map((seed) => simulate({ ...STUDY, seed }, policy, { ...ENGINE, ...model }).timing);
}

function partition(model: Partial<SimulationModel> = {}): SimulationTiming[] {
  return PARTITION_SEEDS.map(
    (seed) => simulate({ ...HALF, seed }, 'single-replica', { ...ENGINE, ...model }).timing,
  );
}

const steadyTail = (runs: SimulationTiming[]) => mean(runs.map((t) => t.p99TtftAfterOpeningMs));
const overall = (runs: SimulationTiming[]) => mean(runs.map((t) => t.p99TtftMs));

describe('the p99 TTFT tail', () => {
  it('the opening burst (every arm starts with 16 cold requests per replica) sets the p99 of every arm alike', () => {
    const reference = overall(partition());
    for (const policy of ['round-robin', 'per-connection', 'least-loaded', 'ideal-partition'] as const) {
      const runs = arm(policy);
      // The whole run's p99 is the burst's: within 10% of the partition's, and far above the rest of the run.
      expect(Math.abs(overall(runs) / reference - 1)).toBeLessThan(0.1);
      expect(steadyTail(runs)).toBeLessThan(0.5 * overall(runs));
    }
    // The engine's FCFS prefill queue, not the API server, makes the burst: without the server's time it stays.
    const engineOnly = overall(arm('round-robin', { frontEndMsPerRequest: 0, frontEndMsPerOutputToken: 0 }));
    expect(engineOnly / overall(arm('round-robin'))).toBeGreaterThan(0.95);
  });

  it('after the burst a missed prefix makes the tail: queueing behind long prefills under the budget', () => {
    // Least loaded (what cache_aware over chat does): 42% hits against the partition's 77%.
    const gap = steadyTail(arm('least-loaded')) / steadyTail(partition());
    expect(gap).toBeGreaterThan(1.15);
    // With prefill nearly free a miss no longer holds up the requests behind it, and the gap closes.
    const freePrefill = { prefillMsPerToken: 0.0001 };
    expect(steadyTail(arm('least-loaded', freePrefill)) / steadyTail(partition(freePrefill))).toBeLessThan(
      1.1,
    );
    // The model does not reach the published measurement's "more than twice the partition's".
    expect(gap).toBeLessThan(2);
  });
});
