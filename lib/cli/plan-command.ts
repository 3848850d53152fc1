import { type Command, CommanderError, InvalidArgumentError } from 'commander';
import type { PlanOverrides } from '../study/planner.ts';

function positiveInteger(option: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n <= 0) {
      throw new InvalidArgumentError(`${option} must be a whole number greater than 0, got "${value}".`);
    }
    return n;
  };
}

function fail(message: string): never {
  process.stderr.write(`lab plan: ${message}\n`);
  throw new CommanderError(1, 'commander.error', message);
}

/** `kvTokens` -> `--kv-tokens`. */
function optionName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * `lab plan`: predicted figures for every arm of the configured study (each front end's model, with
 * its run-to-run spread) and for the reference policies, on the configured (or what-if) workload.
 * With a network-lab configuration: per cell the entries, LB map headroom, conntrack expectations,
 * runs, duration, cost and warnings of docs/facts.md §N7.
 */
export function registerPlanCommand(program: Command): void {
  program
    .command('plan')
    .description(
      'predict, before renting a GPU, whether the workload can tell routers apart (network lab: entries, conntrack, runs and cost per cell)',
    )
    .option('--prefixes <n>', 'distinct prefixes (default: workload.prefixes)', positiveInteger('--prefixes'))
    .option(
      '--prefix-len <tokens>',
      'tokens per prefix (default: workload.prefixLen)',
      positiveInteger('--prefix-len'),
    )
    .option(
      '--replicas <n>',
      'vLLM replicas (default: vllm.replicas); the study estimate follows it (one partition client per replica)',
      positiveInteger('--replicas'),
    )
    .option(
      '--concurrency <n>',
      'requests in flight (default: workload.concurrency)',
      positiveInteger('--concurrency'),
    )
    .option('--prompts <n>', 'requests in the run (default: workload.prompts)', positiveInteger('--prompts'))
    .option(
      '--kv-tokens <tokens>',
      'KV cache tokens per replica (default: vllm.kvCacheTokensPerReplica)',
      positiveInteger('--kv-tokens'),
    )
    .option(
      '--json',
      'print JSON for other tools (hit rates as fractions 0-1; arms.arms holds each arm with mean and spread; network lab: seconds, USD, counts)',
    )
    .option('--cell <name>', 'network lab: plan only this cell')
    .option(
      '--calibrate-from <results-dir>',
      "refit the timing model on that study's single-replica runs (its study.json) and predict with it",
    )
    .action(async (options: PlanOverrides & { json?: boolean; cell?: string; calibrateFrom?: string }) => {
      const { loadLabConfig } = await import('../config/load.ts');
      const { config, warnings } = loadLabConfig({ file: program.opts().config });
      for (const warning of warnings)
        process.stderr.write(`warning: ${warning}
`);
      const { cell, json, calibrateFrom, ...whatIf } = options;
      if (config.lab === 'network') {
        const given = Object.keys(whatIf).filter((k) => whatIf[k as keyof PlanOverrides] !== undefined);
        if (given.length > 0) {
          fail(
            `${given.map(optionName).join(', ')}: what-if values of the LLM-gateway lab's workload; this configuration is the network lab (lab: network), whose plan takes --cell and --json`,
          );
        }
        if (calibrateFrom !== undefined)
          fail(
            `--calibrate-from ${calibrateFrom}: calibrates the LLM-gateway lab's timing model; this configuration is the network lab`,
          );
        const names = config.network.cells.map((c) => c.name);
        if (cell !== undefined && !names.includes(cell)) {
          fail(`--cell ${cell}: no such cell in network.cells (cells: ${names.join(', ')})`);
        }
        const { formatNetworkPlan, planNetworkStudy } = await import('../network/study/planner.ts');
        const plan = planNetworkStudy(config, cell === undefined ? {} : { cells: [cell] });
        process.stdout.write(json ? `${JSON.stringify(plan, null, 2)}\n` : formatNetworkPlan(plan));
        return;
      }
      if (cell !== undefined)
        fail(`--cell ${cell}: cells belong to the network lab; this configuration is the LLM-gateway lab`);
      let calibrationText = '';
      let timing = {};
      let calibrationJson: object | undefined;
      if (calibrateFrom !== undefined) {
        const { loadStudy, StudyFileError } = await import('../report/load.ts');
        const { studyFileOf } = await import('../report/write.ts');
        const { formatCalibration, selfCalibrate } = await import('../study/self-calibration.ts');
        const file = studyFileOf(calibrateFrom);
        let record: Awaited<ReturnType<typeof loadStudy>>;
        try {
          record = await loadStudy(file);
        } catch (error) {
          if (!(error instanceof StudyFileError)) throw error;
          fail(`--calibrate-from ${calibrateFrom}: ${error.message}`);
        }
        const calibration = selfCalibrate(record);
        if (!calibration.available) fail(`--calibrate-from ${calibrateFrom}: ${calibration.reason}`);
        timing = calibration.fit.coefficients;
        calibrationText = formatCalibration(file, calibration);
        calibrationJson = {
          source: file,
          coefficients: calibration.fit.coefficients,
          rmsBefore: calibration.fit.rmsBefore,
          rmsAfter: calibration.fit.rmsAfter,
          rows: calibration.fit.rows,
        };
      }
      const { formatPlan, planJson, planStudy, withReplicas } = await import('../study/planner.ts');
      const { estimateStudy, formatEstimate, DEFAULT_RUN_OVERHEADS } = await import('../study/duration.ts');
      const { studyPlan } = await import('../study/plan.ts');
      const { clusterPricePerHourUsd } = await import('../config/cluster.ts');
      const { knownClusterNodes } = await import('../config/placement.ts');
      const plan = planStudy(config, whatIf, timing);
      // The study's duration and cost are for the configured study and cluster (every host is
      // paid for), with the what-if replica count: it shapes the runs (one partition client each).
      const studied = whatIf.replicas ? withReplicas(config, whatIf.replicas) : config;
      const hosts = knownClusterNodes(config);
      const price = hosts.length > 0 ? clusterPricePerHourUsd(hosts) : config.instance.pricePerHourUsd;
      const estimate = estimateStudy(studied, studyPlan(studied), DEFAULT_RUN_OVERHEADS, price);
      // A serial study on a cluster with the GPUs for a second replica pair: what opting in would give.
      const { replicaGpuCount } = await import('../config/placement-fit.ts');
      const sets = studied.study.optionalArms.includes('llmd-precise') ? 3 : 2;
      const paired =
        studied.study.parallelism === 1 &&
        hosts.length > 0 &&
        replicaGpuCount(hosts) >= sets * studied.vllm.replicas
          ? { ...studied, study: { ...studied.study, parallelism: 2 } }
          : undefined;
      const pairedEstimate = paired && estimateStudy(paired, studyPlan(paired), DEFAULT_RUN_OVERHEADS, price);
      const pairedLine = pairedEstimate
        ? `  with study.parallelism: 2 (the cluster has the GPUs for a second replica pair; runs then overlap): ${(pairedEstimate.totalSeconds / 60).toFixed(1)} min, about ${pairedEstimate.costUsd.toFixed(2)} USD\n`
        : '';
      const { estimateSmoke, formatSmokeEstimate } = await import('../study/smoke-estimate.ts');
      const smokeEstimate = estimateSmoke(studied, price);
      process.stdout.write(
        options.json
          ? `${JSON.stringify({ ...planJson(plan), ...(calibrationJson ? { calibration: calibrationJson } : {}), estimate, smokeEstimate, ...(pairedEstimate ? { estimateWithParallelism2: pairedEstimate } : {}) }, null, 2)}\n`
          : `${calibrationText}${formatPlan(plan)}\n${formatEstimate(estimate)}${formatSmokeEstimate(smokeEstimate, estimate)}${pairedLine}`,
      );
    });
}
