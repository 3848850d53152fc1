import { array } from '../../../lib/aws/bootstrap/bootstrap.ts';

/**
 * settings.env's step arrays cut to `names`, in the host's own order, for `Sandbox.bootstrap`'s
 * `settings`: main.sh's loop then runs only those steps, the same functions a whole bootstrap runs.
 * A test of a fault in one step needs that step (and the next, to show it is never reached), not
 * the bootstrap before it, which the fault-free runs go through. `budgets` replaces a step's
 * budget in seconds. The markers then count the steps run ("[step 1/2]").
 */
export function onlySteps(
  steps: readonly { name: string; title: string; budgetSeconds: number }[],
  names: readonly string[],
  budgets: Record<string, number> = {},
): Record<string, string> {
  const unknown = [...names, ...Object.keys(budgets)].filter((n) => !steps.some((s) => s.name === n));
  if (unknown.length > 0) throw new Error(`not a step of this host: ${unknown.join(', ')}`);
  const kept = steps.filter((s) => names.includes(s.name));
  const value = (name: string, values: readonly (string | number)[]) =>
    array(name, values).slice(name.length + 1);
  return {
    STEP_NAMES: value(
      'STEP_NAMES',
      kept.map((s) => s.name),
    ),
    STEP_TITLES: value(
      'STEP_TITLES',
      kept.map((s) => s.title),
    ),
    STEP_BUDGETS: value(
      'STEP_BUDGETS',
      kept.map((s) => budgets[s.name] ?? s.budgetSeconds),
    ),
  };
}

/** The marker of the `index`th (from 0) of `count` steps run, as main.sh's run_step writes it. */
export const stepMarker = (index: number, count: number, title: string) =>
  `[step ${index + 1}/${count}] ${title}`;
