/**
 * Times simulate() for every routing policy at 1k, 10k and 100k prompts on the default 2-replica study
 * workload. Prefixes stay at 128 (and prompts per prefix grow): the working set against the KV cache -
 * the regime the study is built around - stays the same, only the run gets longer. Scaling prefixes
 * instead would push every load-balancing policy's hit rate to zero and time a different workload.
 *
 * Run: npx tsx scripts/bench-plan.ts   (add --expose-gc via NODE_OPTIONS for steadier heap figures)
 */
import { defaultLabConfig } from '../lib/config/load.ts';
import { planEngine, planInput } from '../lib/study/planner.ts';
import { ROUTING_POLICIES, type SimulationInput, simulate } from '../lib/study/simulator.ts';

// The workload `lab plan` simulates for the default configuration.
const CONFIG = defaultLabConfig();
const WORKLOAD: SimulationInput = planInput(CONFIG);
const ENGINE = planEngine(CONFIG);

const PROMPT_COUNTS = [1_000, 10_000, 100_000];

const gc = (globalThis as { gc?: () => void }).gc;

function heapMb(): number {
  return process.memoryUsage().heapUsed / 2 ** 20;
}

function row(cells: Array<string | number>): string {
  return cells.map((c, i) => (i === 1 ? String(c).padEnd(16) : String(c).padStart(8))).join(' | ');
}

// Warm up the JIT so that the first row does not pay for compilation.
for (const policy of ROUTING_POLICIES) simulate(WORKLOAD, policy, ENGINE);

console.log(row(['prompts', 'policy', 'ms', 'heap MB', 'hit %']));
for (const prompts of PROMPT_COUNTS) {
  let total = 0;
  for (const policy of ROUTING_POLICIES) {
    gc?.();
    const start = performance.now();
    const result = simulate({ ...WORKLOAD, prompts }, policy, ENGINE);
    const ms = performance.now() - start;
    total += ms;
    console.log(
      row([prompts, policy, ms.toFixed(1), heapMb().toFixed(1), (result.hitRate * 100).toFixed(1)]),
    );
  }
  console.log(row([prompts, 'all policies', total.toFixed(1), '', '']));
}
