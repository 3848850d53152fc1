import { afterEach, describe, expect, it } from 'vitest';
import { studyRunnerObjects } from '../../charts/study-runner.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { KubeCluster, type KubeTransport } from '../../lib/runner/kube-cluster.ts';
import { STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { RbacPolicy, serviceAccountSubject } from '../kube/fake-rbac-policy.ts';
import { type AccessLog, authorizing, clusterFace } from './kube-http-face.ts';
import { calibratedHitRate, runIn, startLab, stopLabs } from './rehearsal-kit.ts';
import { unusedGrants, usedPermissions } from './runner-access-kit.ts';

/**
 * The first lab's runner against the RBAC its chart gives it (charts/study-runner.ts): the
 * rehearsal's fake cluster behind the API's HTTP paths, reached through the runner's real
 * KubeCluster, every request judged by the chart's Role, ClusterRole and bindings for the
 * ServiceAccount `system:serviceaccount:vllm:lab-study-runner`, as an API server judges it. The
 * runs are chosen to take every path that calls the API: the staged gates, a front end's rollout
 * restart, the EPP's scrape and the llm-d-free evidence, the AI Gateway's status reads, a pod
 * restart as the reset fallback, and a retried pod delete that meets the replacement.
 */

afterEach(stopLabs);

const config = parseLabConfig({ study: { optionalArms: ['ai-gateway'] } });
const RUNS = [
  'partition',
  'arm-kube-proxy-prefix',
  'arm-router-cache-aware-prefix',
  'arm-epp-prefix',
  'arm-ai-gateway-completions-prefix',
];
/** A client that never ends: its Job times out and is deleted. */
const HANGING = 'arm-kube-proxy-prefix';
const accepted = {
  parents: [
    {
      parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'ai-gateway' },
      conditions: [
        { type: 'Accepted', status: 'True' },
        { type: 'ResolvedRefs', status: 'True' },
      ],
    },
  ],
};
const programmed = { conditions: [{ type: 'Programmed', status: 'True' }] };
const subject = serviceAccountSubject(config.namespace, STUDY_RUNNER_NAME);

/** The first pod delete's answer is lost after the API acted: the runner's retry meets the new pod. */
function losingFirstPodDelete(inner: KubeTransport): KubeTransport {
  let lost = false;
  return async (method, path, body, contentType) => {
    const answer = await inner(method, path, body, contentType);
    if (!lost && method === 'DELETE' && /\/pods\/[^/]+$/.test(path)) {
      lost = true;
      throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    }
    return answer;
  };
}

async function rehearse(objects: Record<string, unknown>[]) {
  const policy = new RbacPolicy(objects);
  const lab = await startLab({
    config,
    runs: RUNS,
    cluster: {
      behaviour: { [HANGING]: { hangs: true } },
      hitRate: (spec) =>
        spec.target.kind === 'arm' && spec.target.arm === 'ai-gateway-completions'
          ? 0.7
          : calibratedHitRate(spec),
      statuses: { 'httproutes/ai-gateway': accepted, 'gateways/ai-gateway': programmed },
    },
  });
  // No reset endpoint: each reset falls back to restarting the replicas' pods.
  for (const replica of lab.replicas) replica.devMode = false;
  const log: AccessLog = { requests: [], refused: [] };
  lab.pickers.authorize = (request) => {
    log.requests.push(request);
    const allowed = policy.allows(subject, request);
    if (!allowed) log.refused.push(request);
    return allowed;
  };
  const study = await runIn(lab, {
    cluster: (fake) =>
      new KubeCluster(
        losingFirstPodDelete(authorizing(clusterFace(fake), policy, subject, log)),
        config.namespace,
      ),
  });
  return { study, log, policy, lab };
}

describe('the first lab’s runner under its chart’s RBAC', () => {
  it('is refused nothing, and uses every permission the chart grants', async () => {
    const { study, log, policy, lab } = await rehearse(studyRunnerObjects(config));
    expect(log.refused).toEqual([]);
    for (const run of study.runs) {
      if (run.id === HANGING)
        expect(run.invalidReasons.join()).toContain('did not finish before the timeout');
      else expect(run.valid, `${run.id}: ${run.invalidReasons.join('; ')}`).toBe(true);
    }
    // The paths taken: pod restarts (one retried), a Job deleted.
    expect(lab.cluster.deletedPods.length).toBeGreaterThan(0);
    expect(lab.cluster.events).toContain(`delete job/bench-${HANGING}`);
    expect(usedPermissions(log.requests)).toEqual([
      'create jobs.batch in vllm',
      'create services in vllm',
      'delete jobs.batch in vllm',
      'delete pods in vllm',
      'delete services in vllm',
      'get /metrics',
      'get /version',
      'get deployments.apps in vllm',
      'get gateways.gateway.networking.k8s.io in vllm',
      'get httproutes.gateway.networking.k8s.io in vllm',
      'get jobs.batch in vllm',
      'get pods in vllm',
      'get pods/log in vllm',
      'get services in vllm',
      'list jobs.batch in vllm',
      'list pods in vllm',
      'list services in vllm',
      'patch deployments.apps in vllm',
      'patch services in vllm',
    ]);
    // Least privilege: nothing granted that the runner never does.
    expect(unusedGrants(policy, subject, log.requests)).toEqual([]);
  });

  it('stops on the API’s 403 when its Role lacks a rule the runner needs', async () => {
    const objects = studyRunnerObjects(config).map((object) =>
      object.kind === 'Role'
        ? {
            ...object,
            rules: (object.rules as { resources: string[] }[]).filter((r) => !r.resources.includes('jobs')),
          }
        : object,
    );
    // The runner's first call, clearing leftover Jobs, is refused: the study stops before any run.
    await expect(rehearse(objects)).rejects.toThrow(
      'HTTP 403: jobs.batch is forbidden: User "system:serviceaccount:vllm:lab-study-runner" cannot list resource "jobs" in API group "batch" in the namespace "vllm"',
    );
  });
});
