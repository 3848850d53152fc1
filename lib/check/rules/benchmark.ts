import { cachePressure } from '../../study/workload.ts';
import { flagValue, hasFlag } from '../command-line.ts';
import { nameOf, objectRef, record } from '../manifest.ts';
import {
  type ContainerRef,
  hostOf,
  mainInvocation,
  type PodTemplate,
  replicasOf,
  resolveDnsName,
  serverPods,
  type Testbed,
} from '../testbed.ts';
import { type Violation, violation } from '../violation.ts';

/** Lessons 7 and 8: the benchmark Jobs run once, leave a result, and measure something. */

/** Lesson 7: a Job that never retries or restarts, and saves its result under a known name. */
export function benchmarkRunsOnce(testbed: Testbed): Violation[] {
  return testbed.benchClients.flatMap((ref) => {
    const object = ref.pod.object;
    const found: Violation[] = [];
    if (object.kind !== 'Job') {
      found.push(
        violation(
          object,
          'kind',
          7,
          `the benchmark client runs in a ${object.kind}: it must be a Job that runs once; a restarted client meets a warm cache`,
        ),
      );
    } else {
      const backoffLimit = record(object.spec).backoffLimit;
      if (backoffLimit !== 0) {
        const actual =
          backoffLimit === undefined
            ? 'is not set (Kubernetes retries 6 times)'
            : `is ${String(backoffLimit)}`;
        found.push(
          violation(
            object,
            'spec.backoffLimit',
            7,
            `${actual}; must be 0: a retry meets the first attempt's warm cache and inflates the hit rate`,
          ),
        );
      }
    }
    const restartPolicy = ref.pod.spec.restartPolicy;
    if (restartPolicy !== 'Never') {
      found.push(
        violation(
          object,
          `${ref.pod.path}.restartPolicy`,
          7,
          `is ${String(restartPolicy ?? 'not set')}, not Never: a failed client restarts in place and reruns against a warm cache`,
        ),
      );
    }
    const invocation = mainInvocation(ref);
    if (invocation) {
      if (!hasFlag(invocation.words, '--save-result')) {
        found.push(
          violation(
            object,
            invocation.field,
            7,
            '--save-result is not set: no result file is written, so the run cannot be verified or reported',
          ),
        );
      }
      if (flagValue(invocation.words, '--result-filename') === undefined) {
        found.push(
          violation(
            object,
            invocation.field,
            7,
            "--result-filename is not set: the file name is generated, so the runner cannot find and check this run's result",
          ),
        );
      }
    }
    return found;
  });
}

export interface PressureOptions {
  /** KV cache tokens of one replica ("GPU KV cache size" in the vLLM log). */
  readonly kvCacheTokensPerReplica: number;
}

/** Whether the client's base URL names one replica directly (upper-bound and partition runs). */
function targetsOneReplica(testbed: Testbed, ref: ContainerRef, words: readonly string[]): boolean {
  const url = flagValue(words, '--base-url') ?? flagValue(words, '--host');
  const host = url ? hostOf(url) : undefined;
  const target = host ? resolveDnsName(testbed, host, ref.pod.namespace) : undefined;
  return (
    target?.kind === 'pod' &&
    serverPods(testbed).some(
      (pod) => pod.object.kind === 'StatefulSet' && target.pod.startsWith(`${nameOf(pod.object)}-`),
    )
  );
}

/** The replica set a front end spreads over; with several sets, the smallest, so a partition must fit it. */
function frontEndReplicas(pods: readonly PodTemplate[]): { replicas: number; from: string } | undefined {
  const sized = pods.map((pod) => ({ replicas: replicasOf(pod.object), from: objectRef(pod.object) }));
  return sized.sort((a, b) => a.replicas - b.replicas)[0];
}

const format = (n: number) => n.toLocaleString('en-US');

/**
 * Lesson 8: for a prefix_repetition run through a front end, the working set must overflow one
 * replica's KV cache while a perfect partition fits; otherwise every router scores the same.
 * Runs aimed at one replica directly (the upper-bound sweep, the ideal partition) are exempt:
 * they fit on purpose.
 */
export function workloadCreatesCachePressure(testbed: Testbed, options: PressureOptions): Violation[] {
  const set = frontEndReplicas(serverPods(testbed));
  if (!set) return [];
  return testbed.benchClients.flatMap((ref) => {
    const invocation = mainInvocation(ref);
    if (!invocation || flagValue(invocation.words, '--dataset-name') !== 'prefix_repetition') return [];
    if (targetsOneReplica(testbed, ref, invocation.words)) return [];
    const object = ref.pod.object;
    const prefixes = Number(flagValue(invocation.words, '--prefix-repetition-num-prefixes'));
    const prefixLen = Number(flagValue(invocation.words, '--prefix-repetition-prefix-len'));
    if (!Number.isInteger(prefixes) || !Number.isInteger(prefixLen) || prefixes <= 0 || prefixLen <= 0) {
      return [
        violation(
          object,
          invocation.field,
          8,
          '--prefix-repetition-num-prefixes and --prefix-repetition-prefix-len must be set to positive integers: the working set cannot be judged, and the study must record what ran',
        ),
      ];
    }
    const kv = options.kvCacheTokensPerReplica;
    const pressure = cachePressure({ prefixes, prefixLen }, set.replicas, kv);
    const workingSet = `working set ${prefixes} prefixes x ${format(prefixLen)} tokens = ${format(pressure.workingSetTokens)} tokens`;
    if (pressure.fitsOneReplica) {
      return [
        violation(
          object,
          invocation.field,
          8,
          `${workingSet} fits in one replica's KV cache (${format(kv)} tokens): every routing policy hits equally and the study cannot tell routers apart; raise prefixes or prefix length`,
        ),
      ];
    }
    if (!pressure.partitionFits) {
      const share = Math.ceil(prefixes / set.replicas) * prefixLen;
      return [
        violation(
          object,
          invocation.field,
          8,
          `${workingSet}: even a perfect partition over ${set.replicas} replicas (${set.from}) puts ${format(share)} tokens on one replica, more than its KV cache (${format(kv)} tokens); every policy evicts and the study cannot tell routers apart`,
        ),
      ];
    }
    return [];
  });
}
