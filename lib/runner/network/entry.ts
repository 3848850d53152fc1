import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../../config/schema.ts';
import { systemClock } from '../ports.ts';
import { RUNNER_DIR, RUNNER_RESULTS_MOUNT } from '../runner-files.ts';
import { RunnerInterruptedError, StopRequest, signalExitCode, stopOnSignals } from '../stop-signal.ts';
import { networkMain } from './main.ts';
import { NETWORK_RUNNER_FILES } from './runner-files.ts';

/**
 * The network runner's entry in its pod (bundled into the cell's runner ConfigMap). Exit code 0
 * when every run of the cell's plan has a record (valid or not), 1 when the study stopped, 143
 * (SIGTERM) or 130 (SIGINT) when the runner was told to stop (stop-signal.ts).
 */
const dir = process.env.LAB_RUNNER_DIR ?? RUNNER_DIR;
const results = process.env.LAB_RESULTS_DIR ?? RUNNER_RESULTS_MOUNT;
// Its pod deleted, the runner stops at once and deletes its Jobs (docs/runner.md).
const stop = new StopRequest(systemClock);
stopOnSignals(process, stop, { log: (line) => console.log(line), exit: (code) => process.exit(code) });

async function start(): Promise<void> {
  const path = join(dir, NETWORK_RUNNER_FILES.config);
  let config: LabConfig;
  try {
    config = JSON.parse(readFileSync(path, 'utf8')) as LabConfig;
  } catch (error) {
    throw new Error(`cannot read ${path}: ${(error as Error).message}`);
  }
  if (config.lab !== 'network') {
    throw new Error(`${path} is an ${config.lab} configuration: this is the network lab's runner`);
  }
  await networkMain(dir, results, config, stop);
}

start().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(`lab network study runner: ${(error as Error).message}`);
    process.exit(error instanceof RunnerInterruptedError ? signalExitCode(error.signal) : 1);
  },
);
