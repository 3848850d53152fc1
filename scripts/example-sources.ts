/**
 * The named sources of `<!-- example-of: <name> -->` blocks (scripts/examples.ts): output that no
 * offline `lab` command prints, made from the lab's own code. npm run docs:examples writes them and
 * test/docs/examples.test.ts fails when a page's block differs. Each is imported only when a page
 * names it.
 */
import type { ExampleSource } from './examples.ts';

export const EXAMPLE_SOURCES: Readonly<Record<string, ExampleSource>> = {
  'smoke-checklist': {
    what: "docs/first-run.md: the smoke checklist of the rehearsal with one arm's EPP broken (test/runner/smoke-example.ts, the rehearsal test/runner/smoke-rehearsal.test.ts drives), with the upload lines lab status adds",
    make: async () => (await import('../test/runner/smoke-example.ts')).smokeChecklistExample(),
    // Its first test runs this very rehearsal: checked there, the suite runs it once.
    checkedBy: 'test/runner/smoke-rehearsal.test.ts',
  },
  'lab-status': {
    what: 'docs/study-control.md: lab status on a mocked deployed lab 15 minutes into the default study (test/cli/status-example.ts)',
    make: async () => (await import('../test/cli/status-example.ts')).statusExample(),
    // Its test of the study id, invalid runs, cost and shutdown runs this very example.
    checkedBy: 'test/cli/status-results-commands.test.ts',
  },
  'lab-teardown': {
    what: "docs/teardown.md: lab teardown's plan for a stack stuck in DELETE_FAILED by Quick Setup's policies (the mocked CloudFormation, IAM and EC2 of the test)",
    checkedBy: 'test/cli/teardown-command.test.ts',
  },
  'calibration-table': {
    what: "docs/planning.md: the timing model's in-sample error on docs/facts.md §4.1 with the default coefficients (scripts/calibration-table.ts, as scripts/bench-calibration.ts prints it)",
    make: async () => (await import('./calibration-table.ts')).calibrationTable(),
  },
  'simulator-calibration': {
    what: "docs/plan.md: the simulator's hit rate, tok/s and ITL against docs/facts.md §4.1's single-replica runs, with the upper bound's formula (scripts/calibration-table.ts)",
    make: async () => (await import('./calibration-table.ts')).simulatorCalibrationTable(),
  },
  'ttft-tail': {
    what: "docs/planning.md: the simulator's p99 TTFT per arm of the default study, over the whole run and after the opening burst (scripts/ttft-tail.ts)",
    make: async () => (await import('./ttft-tail.ts')).ttftTailTable(),
    // It runs these very simulations and checks the section's prose figures too.
    checkedBy: 'test/study/ttft-tail.test.ts',
  },
  'runner-status': {
    what: "docs/runner.md: status.json as the runner's studyStatus writes it, 14 min into the default study (scripts/runner-status-example.ts)",
    make: async () => (await import('./runner-status-example.ts')).runnerStatusExample(),
  },
  'study-schedules': {
    what: "docs/runner.md: the default study's instance time and cost per schedule, as lab plan estimates them (scripts/study-schedules.ts, lib/study/duration.ts)",
    make: async () => (await import('./study-schedules.ts')).studySchedulesTable(),
  },
};
