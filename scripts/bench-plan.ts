/**
 * Times simulate() for every reference policy and every arm model of the default study at 1k, 10k and 100k prompts on the default 2-replica study
 * workload. Prefixes stay at 128 (and prompts per prefix grow): the working set against the KV cache -
 * the regime the study is built around - stays the same, only the run gets longer. Scaling prefixes
 * instead would push every load-balancing policy's hit rate to zero and time a different workload.
 *
 * Run: npx tsx scripts/bench-plan.ts   (add --expose-gc via NODE_OPTIONS for steadier heap figures)
 */
import { defaultLabConfig } from '../lib/config/load.ts';
import { armInput, armRouting } from '../lib/study/arm-predictions.ts';
import { studyArms } from '../lib/study/arms.ts';
import { planEngine, planInput } from '../lib/study/planner.ts';
import { ROUTING_POLICIES, type Routing, type SimulationInput, simulate } from '../lib/study/simulator.ts';

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
  return cells.map((c, i) => (i === 1 ? String(c).padEnd(36) : String(c).padStart(8))).join(' | ');
}

// Reference policies, then each arm's front-end model on its own workload (no chat template over completions).
const ROUTINGS: Array<{ name: string; routing: Routing; input: SimulationInput }> = [
  ...ROUTING_POLICIES.map((policy) => ({ name: policy, routing: policy, input: WORKLOAD })),
  ...studyArms(CONFIG).map((arm) => ({
    name: arm.id,
    routing: armRouting(CONFIG, arm),
    input: armInput(CONFIG, arm, WORKLOAD),
  })),
];

// Warm up the JIT so that the first row does not pay for compilation.
for (const { routing, input } of ROUTINGS) simulate(input, routing, ENGINE);

console.log(row(['prompts', 'policy', 'ms', 'heap MB', 'hit %']));
for (const prompts of PROMPT_COUNTS) {
  let total = 0;
  for (const { name, routing, input } of ROUTINGS) {
    gc?.();
    const start = performance.now();
    const result = simulate({ ...input, prompts }, routing, ENGINE);
    const ms = performance.now() - start;
    total += ms;
    console.log(row([prompts, name, ms.toFixed(1), heapMb().toFixed(1), (result.hitRate * 100).toFixed(1)]));
  }
  console.log(row([prompts, 'all', total.toFixed(1), '', '']));
}
