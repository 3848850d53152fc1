import { cachePressure } from '../study/workload.ts';
import { clusterWarnings } from './cluster.ts';
import { networkWarnings } from './network-rules.ts';
import { placementWarnings } from './placement-fit.ts';
import type { LabConfig } from './schema.ts';

/**
 * Warnings: the configuration is valid, but the study it describes could not tell routers apart
 * (docs/facts.md §4.1). Said before any money is spent.
 */
export function configWarnings(config: LabConfig): string[] {
  if (config.lab === 'network') return networkWarnings(config.network);
  return [...workloadWarnings(config), ...clusterWarnings(config), ...placementWarnings(config)];
}

function workloadWarnings(config: LabConfig): string[] {
  const { workload, vllm } = config;
  if (vllm.replicas < 2) {
    return [
      'vllm.replicas is 1: there is nothing to route between; the arms will all measure the same replica.',
    ];
  }
  const pressure = cachePressure(workload, vllm.replicas, vllm.kvCacheTokensPerReplica);
  const workingSet = `${workload.prefixes} prefixes x ${workload.prefixLen} tokens = ${pressure.workingSetTokens.toLocaleString('en-US')} tokens`;
  const kv = `${vllm.kvCacheTokensPerReplica.toLocaleString('en-US')} KV cache tokens per replica`;
  const warnings: string[] = [];
  if (config.study.parallelism > 1) {
    warnings.push(
      `study.parallelism is ${config.study.parallelism}: two runs execute at once on separate replica pairs (no GPU, cache or front end shared), but they share the host's ${config.instance.vcpus} vCPUs and its PCIe bus, so a run's latency can differ from a serial run's. Each record's overlappedWith names the runs beside it; set study.parallelism to 1 for runs that never overlap.`,
    );
  }
  if (pressure.fitsOneReplica) {
    warnings.push(
      `workload: the working set (${workingSet}) fits in one replica's cache (${kv}): every prefix stays cached everywhere, so any routing gives the same hit rate and the study cannot tell routers apart. Raise workload.prefixes or workload.prefixLen.`,
    );
  }
  if (!pressure.partitionFits) {
    warnings.push(
      `workload: even a perfect partition over ${vllm.replicas} replicas does not fit (${workingSet}; ${kv}): every policy must evict, so the study cannot show what routing could gain. Lower workload.prefixes or workload.prefixLen, or add replicas.`,
    );
  }
  return warnings;
}
