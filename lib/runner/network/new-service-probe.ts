import {
  type ServiceProberResult,
  type WatchProberOutput,
  watchResult,
} from '../../network/probes/service-prober.ts';
import { freeStaticClusterIps } from '../../network/service-range.ts';
import type {
  NetworkJobOutcome,
  NetworkRun,
  PodMeshEvidence,
  ServiceScaleRunSpec,
} from '../../network/study/model.ts';
import { MESH_NAMESPACE, PLAIN_NAMESPACE, SCALE_BACKEND_PORT } from '../../network/topology.ts';
import { jobOutcome } from '../../study/validity.ts';
import { rethrowOutage } from '../call-policy.ts';
import { pollUntil } from '../poll.ts';
import { formatElapsed } from '../status.ts';
import { OUTPUT_FILES, proberJob } from './jobs.ts';
import { networkJobName } from './layout.ts';
import { meshEvidence, type StepContext } from './runner-context.ts';

/**
 * E9's "time until a new Service connects", measured so that it times the datapath and never a
 * pod start (docs/facts.md §N3, "What E9 times"; docs/network-study.md):
 * 1. pick free ClusterIPs in the Service range's static band (lib/network/service-range.ts);
 * 2. start the prober on them and wait until it is probing every address (its ready file);
 * 3. create each Service with its `spec.clusterIP`, one at a time, stamping the moment the API
 *    accepted it (the create's response) on the node's realtime clock, the prober's clock too;
 * 4. when the prober ends, each sample is the time from that acceptance to the first connect.
 */

/**
 * Between two probe Services: longer than kube-proxy's minSyncPeriod (1 s by default) and one
 * sync, so each sample waits for its own programming rather than sharing a batch.
 */
export const PROBE_SPACING_MS = 2_000;
/** How long a sample may take to connect once its Service exists. */
export const PROBE_SAMPLE_GIVE_UP_MS = 60_000;

/** Label of the Services E9's prober measures (not counted among the step's N Services). */
export const PROBE_SERVICE_LABEL = 'network-lab/service-probe';

export interface ProbeOutcome {
  readonly prober: ServiceProberResult | null;
  readonly job: NetworkJobOutcome;
  readonly pods: readonly PodMeshEvidence[];
}

/** The addresses of every Service the runner can list (its namespaces): not free. */
async function usedClusterIps(ctx: StepContext): Promise<string[]> {
  const namespaces = ctx.cell.mesh === 'none' ? [PLAIN_NAMESPACE] : [PLAIN_NAMESPACE, MESH_NAMESPACE];
  const ips: string[] = [];
  for (const ns of namespaces) for (const s of await ctx.cluster.listServices(ns, '')) ips.push(s.clusterIp);
  return ips;
}

/** Waits until the prober writes its ready file; the problem when it ends or times out first. */
async function proberProbing(ctx: StepContext, jobName: string): Promise<string | undefined> {
  const { readyTimeoutMs } = ctx.options;
  await ctx.phase('waiting for the prober to probe every address');
  const waited = await pollUntil<string | undefined>(async () => {
    if ((await ctx.deps.store.readJobOutput(jobName, OUTPUT_FILES.proberReady)) !== undefined)
      return { done: undefined };
    const counts = await ctx.cluster.getJob(PLAIN_NAMESPACE, jobName);
    const ended = counts ? jobOutcome(counts) : 'failed';
    return ended ? { done: `job/${jobName} ${ended} before it was probing` } : { waiting: 'probing' };
  }, ctx.jobs.poll(readyTimeoutMs));
  return 'done' in waited
    ? waited.done
    : `job/${jobName} was not probing within ${formatElapsed(readyTimeoutMs)}`;
}

/** Steps 1-4 above; every problem is a reason of the run. `nextName` names each probe Service. */
export async function probeNewServices(
  ctx: StepContext,
  run: NetworkRun,
  spec: ServiceScaleRunSpec,
  nextName: () => string,
  reasons: string[],
): Promise<ProbeOutcome> {
  let ips: string[];
  try {
    ips = freeStaticClusterIps(ctx.config.network.serviceCidr, await usedClusterIps(ctx), spec.samples);
  } catch (error) {
    rethrowOutage(error);
    reasons.push(`no ClusterIPs for the probe Services: ${(error as Error).message}`);
    return { prober: null, job: 'failed', pods: [] };
  }
  const targets = ips.map((ip) => `${ip}:${SCALE_BACKEND_PORT}`);
  const name = networkJobName(run.id, 'prober');
  const giveUpMs = spec.samples * PROBE_SPACING_MS + PROBE_SAMPLE_GIVE_UP_MS;
  const job = proberJob(ctx.deps.jobs, name, run.id, targets, spec.attemptTimeoutMs, giveUpMs);
  await ctx.jobs.startJob(run, job);
  const accepted = new Map<string, number>();
  const notProbing = await proberProbing(ctx, name);
  if (notProbing) reasons.push(`no Service created: ${notProbing}`);
  else {
    await ctx.phase(`creating ${targets.length} probe Services, ${PROBE_SPACING_MS / 1000} s apart`);
    const template = ctx.deps.serviceTemplate;
    for (const [i, ip] of ips.entries()) {
      const service = nextName();
      try {
        await ctx.cluster.createService({
          ...template,
          metadata: { ...template.metadata, name: service, labels: { [PROBE_SERVICE_LABEL]: 'true' } },
          spec: { ...template.spec, clusterIP: ip },
        });
        accepted.set(targets[i], ctx.deps.clock.now().getTime());
      } catch (error) {
        rethrowOutage(error);
        reasons.push(`probe Service ${service} at ${ip} not created: ${(error as Error).message}`);
      }
      if (i < ips.length - 1) await ctx.deps.clock.sleep(PROBE_SPACING_MS);
    }
  }
  await ctx.phase('waiting for the prober');
  const done = await ctx.jobs.finishJob(run, job, OUTPUT_FILES.prober);
  const pods = done.pods.map(meshEvidence);
  if (done.text === undefined) {
    reasons.push(`job/${name} ${done.outcome} and left no result file (${OUTPUT_FILES.prober})`);
    return { prober: null, job: done.outcome, pods };
  }
  try {
    const output = JSON.parse(done.text) as WatchProberOutput;
    if (output.mode !== 'watch' || !Array.isArray(output.watched))
      throw new Error(`expected the watch mode's output, got mode ${String(output.mode)}`);
    const prober = watchResult(output, accepted);
    if (prober.samples.length < spec.samples)
      reasons.push(`${prober.samples.length} of ${spec.samples} probe Services were measured`);
    return { prober, job: done.outcome, pods };
  } catch (error) {
    reasons.push(`prober result does not parse: ${(error as Error).message}`);
    return { prober: null, job: done.outcome, pods };
  }
}
