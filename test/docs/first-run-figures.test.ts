import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { REPO_ROOT, runLabCaptured } from '../../scripts/examples.ts';

/** The numbers a line of `lab plan` output carries, or a failure naming the line that is gone. */
/** Fails naming the figure the page does not quote (the whole page would be an unreadable message). */
function expectQuoted(page: string, text: string): void {
  expect(page.includes(text), `docs/first-run.md should say "${text}"`).toBe(true);
}

function figures(output: string, line: RegExp): string[] {
  const match = line.exec(output);
  if (!match) throw new Error(`lab plan no longer prints a line matching ${line}`);
  return match.slice(1);
}

// docs/first-run.md quotes `lab plan`'s figures in its table and prose (not an output block, so
// npm run docs:examples cannot rewrite them): this fails when the plan and the page disagree.
describe('docs/first-run.md: the time and cost of each step are what lab plan prints', () => {
  const page = readFileSync(join(REPO_ROOT, 'docs/first-run.md'), 'utf8').replace(/\s*\n\s*/g, ' ');
  let plan: string;
  let network: string;
  beforeAll(async () => {
    plan = await runLabCaptured(['plan']);
    network = await runLabCaptured(['--config', 'examples/network-lab.yaml', 'plan']);
  });

  it('the default study, its smoke study and the sum', () => {
    const [study, cost] = figures(
      plan,
      /^Estimated study duration after the bootstrap: ([\d.]+) min .* about ([\d.]+) USD/m,
    );
    const [smoke, smokeCost] = figures(
      plan,
      /^Smoke study .* ([\d.]+) min after the bootstrap, about ([\d.]+) USD/m,
    );
    const [full, fullCost] = figures(
      plan,
      /the full study begins with the same checks: ([\d.]+) min in all, about ([\d.]+) USD/,
    );
    expectQuoted(page, `| ${smoke} min | about ${smokeCost} USD |`);
    expectQuoted(
      page,
      `| ${study} min plus its smoke checks (${smoke}), ${full} in all | about ${cost} USD plus ${smokeCost} |`,
    );
    expectQuoted(page, `(2.70 + ${smokeCost} + ${fullCost} + about 0.80`);
    const total = 2.7 + Number(smokeCost) + Number(fullCost) + 0.8;
    expectQuoted(page, `costs about ${total.toFixed(1)}0 USD`);
    const [paired, pairedCost] = figures(
      plan,
      /with study\.parallelism: 2 .*: ([\d.]+) min, about ([\d.]+) USD/,
    );
    expectQuoted(page, `With \`study.parallelism: 2\`: ${paired} min, about ${pairedCost} USD.`);
    // Section 3's list and the first run's sum.
    const config = defaultLabConfig();
    expectQuoted(
      page,
      `Serial, the default: ${study} min after the bootstrap, about ${cost} USD at ${config.instance.pricePerHourUsd} USD/h (${studyPlan(config).runs.length} runs), plus its smoke checks first: ${full} min, about ${fullCost} USD in all.`,
    );
    expectQuoted(
      page,
      `${Math.round(Number(smoke))} of smoke study, ${Math.round(Number(full))} of study with its checks`,
    );
  });

  it('the network lab, each cell’s smoke study', () => {
    // runs, Jobs, runs at once, smoke minutes, smoke cost, the full study's minutes with its checks
    const cell = (name: string) =>
      figures(
        network,
        new RegExp(
          `^  ${name} +(\\d+) +(\\d+) +(\\d+) +([\\d.]+) min(?: \\(over \\d+\\))? +([\\d.]+) USD +([\\d.]+) min`,
          'm',
        ),
      );
    const [meshRuns, meshJobs, meshAtOnce, mesh, meshCost, meshFull] = cell('mesh');
    const [, , , plain, plainCost] = cell('dp-iptables');
    const [, , , cilium, ciliumCost] = cell('dp-cilium');
    expectQuoted(
      page,
      `the mesh cell's ${meshRuns} runs start ${meshJobs} Jobs, at most ${meshAtOnce} at once`,
    );
    expectQuoted(page, `(the mesh cell; ${plain} and ${cilium} min for the others)`);
    expectQuoted(page, `the cells without a mesh about **${plain} min, ${plainCost} USD**`);
    expectQuoted(page, `each (${cilium} on Cilium)`);
    expect(ciliumCost).toBe(plainCost);
    expectQuoted(page, `the mesh cell about **${mesh} min, ${meshCost} USD**`);
    expectQuoted(page, `(${meshFull} min in all for the mesh cell with its checks`);
    const [smoke, smokeCost, , fullCost] = figures(
      network,
      /all cells: smoke ([\d.]+) min, about ([\d.]+) USD; the full study begins with the same checks: ([\d.]+) min, about ([\d.]+) USD/,
    );
    expectQuoted(page, `about ${smoke} min and ${smokeCost} USD for the three example cells`);
    expectQuoted(page, `about ${fullCost} USD for the three cells)`);
  });

  it('the network lab, all cells', () => {
    const [study, cost] = figures(
      network,
      /cells run in parallel: \d+ runs, ([\d.]+) min after the bootstraps, about ([\d.]+) USD/,
    );
    const [smoke, smokeCost, full, fullCost] = figures(
      network,
      /all cells: smoke ([\d.]+) min, about ([\d.]+) USD; the full study begins with the same checks: ([\d.]+) min, about ([\d.]+) USD/,
    );
    expectQuoted(page, `smoke study in about ${smoke} min`);
    expectQuoted(page, `about ${smokeCost} USD for all three`);
    expectQuoted(page, `its study in ${study} min after the bootstraps, about ${cost} USD`);
    expectQuoted(
      page,
      `The network lab's three example cells: ${study} min after the bootstraps (the cells run in parallel), about ${cost} USD.`,
    );
    expectQuoted(page, `make it ${full} min and ${fullCost} USD`);
  });
});
