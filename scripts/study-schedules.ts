/**
 * The default study's instance time under each schedule, as `lab plan` estimates it
 * (lib/study/duration.ts with its default overheads): the table of docs/runner.md, "How long a
 * study takes" (`<!-- example-of: study-schedules -->`, npm run docs:examples). The simulations are
 * cached in the process, so after `lab plan` has run this costs milliseconds.
 */
import { parseLabConfig } from '../lib/config/load.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { DEFAULT_RUN_OVERHEADS, estimateStudy, type RunOverheads } from '../lib/study/duration.ts';
import { studyPlan } from '../lib/study/plan.ts';

const minutes = (seconds: number) => `${(seconds / 60).toFixed(1)} min`;
/** Issue 11's target for the serial study, instance minutes after the bootstrap. */
const SERIAL_TARGET_MINUTES = 75;

export function studySchedulesTable(): string {
  const serial = parseLabConfig({});
  const unstaged = parseLabConfig({ runner: { stageNextRun: false } });
  const paired = parseLabConfig({ study: { parallelism: 2 } });
  const pairedUnstaged = parseLabConfig({ study: { parallelism: 2 }, runner: { stageNextRun: false } });
  const o = DEFAULT_RUN_OVERHEADS;
  const doubled: RunOverheads = {
    ...o,
    jobStartSeconds: 2 * o.jobStartSeconds,
    frontEndRestartSeconds: 2 * o.frontEndRestartSeconds,
  };
  const averageGate: RunOverheads = { ...o, gateSeconds: o.gateSeconds / 2 };
  const rows: [string, LabConfig, RunOverheads][] = [
    ['serial, staged (`runner.stageNextRun`, the default)', serial, o],
    ['serial, not staged (`runner.stageNextRun: false`)', unstaged, o],
    ['`study.parallelism: 2`, staged', paired, o],
    ['`study.parallelism: 2`, not staged', pairedUnstaged, o],
    [
      `serial, staged, Job start and front-end restart twice the assumption (${doubled.jobStartSeconds} s, ${doubled.frontEndRestartSeconds} s)`,
      serial,
      doubled,
    ],
    [
      `serial, staged, the gate at its average (${averageGate.gateSeconds} s) instead of its worst`,
      serial,
      averageGate,
    ],
  ];
  const lines = [
    `| schedule | instance time after the bootstrap | cost at ${serial.instance.pricePerHourUsd.toFixed(2)} USD/h |`,
    '|---|---|---|',
  ];
  let load = 0;
  for (const [name, config, overheads] of rows) {
    const estimate = estimateStudy(config, studyPlan(config), overheads);
    if (config === serial && overheads === o)
      load = Object.values(estimate.groups).reduce((sum, g) => sum + g.loadSeconds, 0);
    lines.push(`| ${name} | ${minutes(estimate.totalSeconds)} | ${estimate.costUsd.toFixed(2)} USD |`);
  }
  const runs = studyPlan(serial).runs.length;
  lines.push(
    `| the benchmark load alone, serial (no overhead at all) | ${minutes(load)}: ${((SERIAL_TARGET_MINUTES * 60 - load) / runs).toFixed(1)} s per run left for every overhead within ${SERIAL_TARGET_MINUTES} min | |`,
  );
  return lines.join('\n');
}
