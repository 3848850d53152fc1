import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { networkJobContext } from '../../../charts/network/study-runner.ts';
import { synthesizeCluster } from '../../../charts/synthesize.ts';
import { loadManifestFolder } from '../../../lib/check/index.ts';
import { INSTANCE_FACTS } from '../../../lib/config/cluster.ts';
import { loadLabConfig } from '../../../lib/config/load.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { SMOKE_CONCURRENCY, smokeSchedule } from '../../../lib/network/study/smoke-schedule.ts';
import { MESH_NAMESPACES, NETWORK_RUNNER_NAME } from '../../../lib/network/topology.ts';
import { runJobs, SIDECAR_INJECT_LABEL } from '../../../lib/runner/network/jobs.ts';
import { cpuMillis, memoryMiB } from '../../../lib/study/resources.ts';
import { tempDir } from '../../temp.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
type Any = any;

/**
 * What a cell's scheduler must place at once fits its host (8 vCPU, 16 GiB for c7i.2xlarge): the
 * charts' pods, their Istio sidecars, istiod, K3s's add-ons, the runner, and the Jobs in flight:
 * one in the full study, the smoke schedule's busiest moment in a smoke study (up to
 * SMOKE_CONCURRENCY runs, each with one Job alive at a time). A pod that does not fit stays
 * Pending: the schedule's overlap would not happen, and a server that does not fit breaks the cell.
 */

interface Sum {
  cpu: number;
  memory: number;
}

/**
 * Istio's defaults (istio/istio manifests/charts/istio-control/istio-discovery/values.yaml,
 * read at 007204db, not confirmed at the pinned 1.31.1): every injected sidecar requests 100m and
 * 128Mi (`global.proxy.resources`), istiod 500m and 2048Mi (`resources`). docs/facts.md §N8.
 */
const SIDECAR: Sum = { cpu: 100, memory: 128 };
const ISTIOD: Sum = { cpu: 500, memory: 2048 };
/** K3s's CoreDNS and metrics-server (100m each, as lib/study/resources.ts counts them), with room. */
const K3S_ADD_ONS: Sum = { cpu: 500, memory: 1024 };

const config = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

function podRequests(pod: Any, sidecarCell: boolean): Sum {
  const sum = { cpu: 0, memory: 0 };
  for (const c of pod.spec.containers) {
    sum.cpu += c.resources?.requests?.cpu ? cpuMillis(c.resources.requests.cpu) : 0;
    sum.memory += c.resources?.requests?.memory ? memoryMiB(c.resources.requests.memory) : 0;
  }
  const injected =
    sidecarCell &&
    (MESH_NAMESPACES as readonly string[]).includes(pod.namespace) &&
    !pod.spec.hostNetwork &&
    pod.labels?.[SIDECAR_INJECT_LABEL] !== 'false';
  return injected ? { cpu: sum.cpu + SIDECAR.cpu, memory: sum.memory + SIDECAR.memory } : sum;
}

const template = (o: Any) => ({
  namespace: o.metadata.namespace,
  labels: o.spec.template.metadata?.labels,
  spec: o.spec.template.spec,
});

const add = (a: Sum, b: Sum, times = 1): Sum => ({
  cpu: a.cpu + b.cpu * times,
  memory: a.memory + b.memory * times,
});

describe("a cell's host holds its pods and the Jobs in flight", async () => {
  const out = tempDir('network-budget-');
  synthesizeCluster(config, out);

  for (const cell of config.network.cells) {
    it(`${cell.name}: the charts, istiod, the runner and the smoke schedule's busiest moment fit ${config.network.instance.type}`, async () => {
      const sidecarCell = cell.mesh === 'sidecar';
      const { objects } = await loadManifestFolder(join(out, cell.name));
      let standing: Sum = cell.mesh === 'none' ? K3S_ADD_ONS : add(K3S_ADD_ONS, ISTIOD);
      for (const o of objects as Any[]) {
        // The standing pods and the runner's Job; jobs/ holds the client Jobs' templates, counted below.
        const standingPod = ['Deployment', 'DaemonSet', 'StatefulSet'].includes(o.kind);
        if (!o.spec?.template?.spec || !(standingPod || o.metadata.name === NETWORK_RUNNER_NAME)) continue;
        const times = o.kind === 'Deployment' ? (o.spec.replicas ?? 1) : 1;
        standing = add(standing, podRequests(template(o), sidecarCell), times);
      }
      // One run's Jobs run one after the other: a run needs its largest Job.
      const ctx = networkJobContext(config, cell);
      const runNeed = (run: Parameters<typeof runJobs>[1]): Sum =>
        Object.values(runJobs(ctx, run))
          .map((job) => podRequests(template(job), sidecarCell))
          .reduce((a, b) => ({ cpu: Math.max(a.cpu, b.cpu), memory: Math.max(a.memory, b.memory) }), {
            cpu: 0,
            memory: 0,
          });
      const smoke = networkSmokePlan(config, cell.name);
      const schedule = smokeSchedule(smoke.runs, smoke.mesh);
      let busiest: Sum = { cpu: 0, memory: 0 };
      for (const { startSeconds } of schedule.order) {
        const inFlight = schedule.order.filter(
          (r) => r.startSeconds <= startSeconds && startSeconds < r.endSeconds,
        );
        expect(inFlight.length).toBeLessThanOrEqual(SMOKE_CONCURRENCY);
        const need = inFlight.reduce((sum, r) => add(sum, runNeed(r.item.run)), { cpu: 0, memory: 0 });
        busiest = { cpu: Math.max(busiest.cpu, need.cpu), memory: Math.max(busiest.memory, need.memory) };
      }
      const fullStudy = networkStudyPlan(config, cell.name)
        .runs.map(runNeed)
        .reduce((a, b) => ({ cpu: Math.max(a.cpu, b.cpu), memory: Math.max(a.memory, b.memory) }));
      const host = INSTANCE_FACTS[cell.instanceType ?? config.network.instance.type];
      const capacity = { cpu: host.vcpus * 1000, memory: host.memoryGiB * 1024 };
      const smokePeak = add(standing, busiest);
      const fullPeak = add(standing, fullStudy);
      expect(smokePeak.cpu, `smoke: ${standing.cpu}m standing + ${busiest.cpu}m of Jobs`).toBeLessThanOrEqual(
        capacity.cpu,
      );
      expect(smokePeak.memory).toBeLessThanOrEqual(capacity.memory);
      expect(fullPeak.cpu, `full study: ${standing.cpu}m standing + ${fullStudy.cpu}m`).toBeLessThanOrEqual(
        capacity.cpu,
      );
      expect(fullPeak.memory).toBeLessThanOrEqual(capacity.memory);
    });
  }
});
