import type { z } from 'zod';
import { BOOT_MARGIN_MINUTES, describeBaseBudgets, minimumReadyTimeoutMinutes } from '../facts/budgets.ts';
import { allArms, studyArms } from '../study/arms.ts';
import {
  type BudgetCapacity,
  cpuText,
  largestLines,
  memoryText,
  type ResourceBudget,
  resourceBudget,
} from '../study/resources.ts';
import { networkProblems } from './network-rules.ts';
import { clusterCapacity, knownClusterNodes, placementProblems } from './placement.ts';
import { budgetFitProblems, gpuWhereabouts, replicaGpuCount } from './placement-fit.ts';
import type { LabConfig } from './schema.ts';

/**
 * Rules that relate several settings. They run even when some field failed its own schema (so
 * that all problems are reported at once); every read is therefore guarded, and a rule whose
 * inputs are themselves invalid stays silent rather than adding noise.
 */

type Ctx = z.core.$RefinementCtx<LabConfig>;

const isInt = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0;

export function crossCheck(config: LabConfig, ctx: Ctx): void {
  const fail = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: 'custom', path, message, input: pick(config, path) });

  // The lab's own host uploads its node folder itself; the S3 uploader reads the claim.
  if (config.runner?.results?.upload && config.runner.results.volume !== 'claim')
    fail(
      ['runner', 'results', 'upload'],
      `needs runner.results.volume: claim (it copies the results claim to S3); got volume: ${config.runner.results.volume}`,
    );

  if (config.lab === 'network') {
    for (const problem of networkProblems(config.network, config.k3s?.version ?? ''))
      fail(problem.path, problem.message);
    // A cell's runner writes to its host's folder, which the cell's bootstrap uploads.
    if (config.runner?.results?.volume === 'claim')
      fail(
        ['runner', 'results', 'volume'],
        "claim is for the LLM-gateway lab on a cluster you bring; the network lab's cells keep their results in the host folder (allowed here: node-folder)",
      );
    return;
  }

  const { instance, vllm, workload, study, router } = config;

  for (const problem of placementProblems(config)) fail(problem.path, problem.message);

  // The replicas may use every GPU of the cluster: the server's and each GPU agent's.
  const nodes = isInt(instance.gpus) || instance.gpus === 0 ? knownClusterNodes(config) : [];
  // Only GPUs on hosts a replica fits on count (placementWarnings names the others).
  const gpus = nodes.length > 0 ? replicaGpuCount(nodes) : undefined;
  const where = `${gpus} GPU(s) a replica fits beside (${gpuWhereabouts(nodes) || 'none'})`;
  let gpusFit = true;
  const llmd = Array.isArray(study.optionalArms) && study.optionalArms.includes('llmd-precise');
  if (isInt(vllm.replicas) && gpus !== undefined && vllm.replicas > gpus) {
    gpusFit = false;
    fail(
      ['vllm', 'replicas'],
      `each replica needs its own GPU and the cluster has ${where}; allowed: 1 to ${gpus}, or add GPU agents (cluster.agents)`,
    );
  } else if (isInt(vllm.replicas) && gpus !== undefined && llmd && 2 * vllm.replicas > gpus) {
    // llm-d's KV-events replicas are a second set beside the standard one (docs/facts.md §3.7).
    gpusFit = false;
    fail(
      ['study', 'optionalArms'],
      `llmd-precise runs its own ${vllm.replicas} replica(s) beside the standard ${vllm.replicas}, needing ${2 * vllm.replicas} GPUs; the cluster has ${where}. Lower vllm.replicas to ${Math.floor(gpus / 2)} or add GPU agents (cluster.agents)`,
    );
  } else if (
    isInt(vllm.replicas) &&
    gpus !== undefined &&
    isInt(study.parallelism) &&
    study.parallelism > 1 &&
    (study.parallelism + (llmd ? 1 : 0)) * vllm.replicas > gpus
  ) {
    // The second replica pair (lib/study/pairs.ts) needs GPUs of its own: nothing is shared.
    gpusFit = false;
    const sets = study.parallelism + (llmd ? 1 : 0);
    const fewer = Math.floor(gpus / sets);
    fail(
      ['study', 'parallelism'],
      `a second pair of ${vllm.replicas} replica(s) runs beside the standard ${vllm.replicas}${llmd ? ` and llm-d's ${vllm.replicas}` : ''}, needing ${sets * vllm.replicas} GPUs; the cluster has ${where}. Allowed here: 1${fewer >= 1 ? `; or lower vllm.replicas to ${fewer}` : ''}; or add GPU agents (cluster.agents)`,
    );
  }

  // The bootstrap's steps share the WaitCondition's time; each is ended when its budget runs out.
  if (isInt(instance.readyTimeoutMinutes) && instance.readyTimeoutMinutes < minimumReadyTimeoutMinutes()) {
    fail(
      ['instance', 'readyTimeoutMinutes'],
      `must be at least ${minimumReadyTimeoutMinutes()}, got ${instance.readyTimeoutMinutes}: the bootstrap's step budgets (minutes: ${describeBaseBudgets()}) and ${BOOT_MARGIN_MINUTES} minutes of boot must fit in the time CloudFormation waits for the ready signal`,
    );
  }

  // vLLM refuses to start otherwise (vllm/config/scheduler.py, SchedulerConfig._verify_args).
  if (
    isInt(vllm.maxNumBatchedTokens) &&
    isInt(vllm.maxNumSeqs) &&
    vllm.maxNumBatchedTokens < vllm.maxNumSeqs
  ) {
    fail(
      ['vllm', 'maxNumBatchedTokens'],
      `must be at least vllm.maxNumSeqs (${vllm.maxNumSeqs}): vLLM refuses to start with fewer batched tokens than sequences per step`,
    );
  }

  const { prefixLen, suffixLen, chatTemplateTokens, outputLen, prompts, prefixes, concurrency } = workload;
  const lengths = [prefixLen, suffixLen, outputLen];
  if (lengths.every(isInt) && Number.isInteger(chatTemplateTokens) && isInt(vllm.maxModelLen)) {
    const total = prefixLen + chatTemplateTokens + suffixLen + outputLen;
    if (total > vllm.maxModelLen) {
      fail(
        ['workload', 'prefixLen'],
        `prefixLen + chatTemplateTokens + suffixLen + outputLen = ${prefixLen} + ${chatTemplateTokens} + ${suffixLen} + ${outputLen} = ${total} tokens, above vllm.maxModelLen ${vllm.maxModelLen}; shorten the workload or raise vllm.maxModelLen`,
      );
    }
  }

  // vLLM's prefix_repetition dataset makes prompts/prefixes requests per prefix and drops the
  // remainder, so the run would complete fewer requests than it asked for.
  if (isInt(prompts) && isInt(prefixes) && prompts % prefixes !== 0) {
    fail(
      ['workload', 'prompts'],
      `must be a multiple of workload.prefixes (${prefixes}) so that every prefix repeats equally; nearest: ${nearestMultiples(prompts, prefixes)}`,
    );
  }
  if (isInt(prompts) && Array.isArray(study.boundSweepPrefixes)) {
    const uneven = study.boundSweepPrefixes.filter((n) => isInt(n) && prompts % n !== 0);
    if (uneven.length > 0) {
      fail(
        ['study', 'boundSweepPrefixes'],
        `every swept prefix count must divide workload.prompts (${prompts}); ${uneven.join(', ')} do(es) not`,
      );
    }
  }

  if (isInt(vllm.replicas) && isInt(concurrency) && concurrency < vllm.replicas) {
    fail(
      ['workload', 'concurrency'],
      `the ideal-partition run gives each of the ${vllm.replicas} replicas its own client, so concurrency must be at least ${vllm.replicas}`,
    );
  }
  if (isInt(vllm.replicas) && isInt(prefixes) && prefixes < vllm.replicas) {
    fail(
      ['workload', 'prefixes'],
      `the ideal partition needs at least one prefix per replica (${vllm.replicas})`,
    );
  }
  if (isInt(vllm.replicas) && Array.isArray(workload.partitionSeeds)) {
    if (workload.partitionSeeds.length < vllm.replicas) {
      fail(
        ['workload', 'partitionSeeds'],
        `needs one seed per replica: ${vllm.replicas} replicas, ${workload.partitionSeeds.length} seeds`,
      );
    } else if (new Set(workload.partitionSeeds).size !== workload.partitionSeeds.length) {
      fail(['workload', 'partitionSeeds'], 'seeds must differ, or two replicas would get the same prefixes');
    }
  }

  if (Array.isArray(router.variants)) {
    const seen = new Set<string>();
    router.variants.forEach((variant, i) => {
      if (typeof variant?.name !== 'string') return;
      if (seen.has(variant.name)) fail(['router', 'variants', i, 'name'], `"${variant.name}" is used twice`);
      seen.add(variant.name);
      const tuning = Object.keys(variant).filter((key) => key !== 'name' && key !== 'policy');
      if (variant.policy !== 'cache_aware' && tuning.length > 0) {
        fail(
          ['router', 'variants', i],
          `${tuning.join(', ')} only apply to policy cache_aware, not ${String(variant.policy)}`,
        );
      }
    });
  }

  const armsKnown =
    Array.isArray(router.variants) &&
    router.variants.every((v) => typeof v?.name === 'string') &&
    Array.isArray(study.optionalArms);
  if (armsKnown && Array.isArray(study.concurrencySweep.arms)) {
    const enabled = studyArms(config).map((arm) => arm.id);
    study.concurrencySweep.arms.forEach((arm, i) => {
      if (enabled.includes(arm)) return;
      const optional = allArms(config).find((known) => known.id === arm && known.optional);
      fail(
        ['study', 'concurrencySweep', 'arms', i],
        optional
          ? `"${arm}" is an arm of the optional front end "${optional.frontEndId}", which is not in study.optionalArms; enable it there first`
          : `unknown arm; allowed: ${enabled.join(', ')}`,
      );
    });
  }
  if (Array.isArray(study.optionalArms) && new Set(study.optionalArms).size !== study.optionalArms.length) {
    fail(['study', 'optionalArms'], 'lists an arm twice');
  }

  // Only once the replicas have their GPUs: a study that cannot place them is reported above.
  if (gpusFit && armsKnown && [instance.vcpus, instance.memoryGiB, vllm.replicas].every(isInt)) {
    // With agents the pods spread over the hosts: first the cluster's sum, then node by node.
    const hosts = nodes.length > 1 ? nodes : [];
    const capacity = clusterCapacity(config);
    const holder = hosts.length > 0 ? `the cluster's ${hosts.length} hosts have` : `${instance.type} has`;
    const budget = budgetOf(config, capacity);
    if (budget && !budget.fits) {
      const cpu = budget.cpuMillis > budget.capacityCpuMillis;
      const over = cpu
        ? {
            path: ['instance', 'vcpus'],
            what: `${cpuText(budget.cpuMillis)} CPUs`,
            has: `${capacity.vcpus} vCPUs`,
          }
        : {
            path: ['instance', 'memoryGiB'],
            what: memoryText(budget.memoryMiB),
            has: `${capacity.memoryGiB} GiB`,
          };
      fail(
        over.path,
        `the pods that can run at once request ${over.what} but ${holder} ${over.has} (${cpuText(budget.cpuMillis)} CPUs and ${memoryText(budget.memoryMiB)} in all, largest: ${largestLines(budget, cpu ? 'cpu' : 'memory')}). Enable fewer optional arms (study.optionalArms), lower vllm.replicas or benchmark.memoryLimitGi, or use a larger instance${hosts.length > 0 ? ' or more agents' : ''}`,
      );
    }
    // The sum is not enough: each node holds only the pods its placement sends there.
    if (budget?.fits && hosts.length > 0) {
      for (const problem of budgetFitProblems(config, budget)) fail(problem.path, problem.message);
    }
  }

  const retry = config.runner?.retry;
  if (retry && typeof retry.initialDelaySeconds === 'number' && typeof retry.maxDelaySeconds === 'number') {
    if (retry.maxDelaySeconds < retry.initialDelaySeconds) {
      fail(
        ['runner', 'retry', 'maxDelaySeconds'],
        `is ${retry.maxDelaySeconds} s, below runner.retry.initialDelaySeconds (${retry.initialDelaySeconds} s); allowed: at least the initial delay`,
      );
    }
  }
}

/** The resource budget, or undefined when another invalid setting keeps the study from being planned. */
function budgetOf(config: LabConfig, capacity: BudgetCapacity): ResourceBudget | undefined {
  try {
    return resourceBudget(config, capacity);
  } catch {
    return undefined;
  }
}

function nearestMultiples(value: number, of: number): string {
  const below = Math.floor(value / of) * of;
  return below === 0 ? `${of}` : `${below} or ${below + of}`;
}

function pick(root: unknown, path: (string | number)[]): unknown {
  let node: unknown = root;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node;
}
