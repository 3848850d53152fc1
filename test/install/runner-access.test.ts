import { describe, expect, it } from 'vitest';
import { studyRunnerObjects } from '../../charts/study-runner.ts';
import { runClusterDoctor } from '../../lib/doctor/cluster.ts';
import { InstallStopped, installLab } from '../../lib/install/install.ts';
import type { InstallPlan } from '../../lib/install/plan.ts';
import { uninstallLab } from '../../lib/install/uninstall.ts';
import { describeAccess } from '../../lib/kube/cluster-api.ts';
import { rig as anyRig, GPU_NODE } from './rig.ts';

/**
 * `lab install` and `lab doctor --kubeconfig` ask the API server, by SubjectAccessReview, whether
 * the study runner's ServiceAccount may do what the runner does at run time. The fake API server
 * answers those reviews from the Roles and bindings actually applied (test/kube/fake-rbac.ts), with
 * the default roles every authenticated user has, and another authorizer's refusals in front.
 */

/** GPUs already advertised: the install skips the device plugin and its wait. */
async function rig(options: Parameters<typeof anyRig>[0] = {}) {
  const made = await anyRig({ nodes: [{ ...GPU_NODE, pluginRunning: true }], ...options });
  return { ...made, plan: made.plan as InstallPlan };
}

const SA = 'system:serviceaccount:vllm:lab-study-runner';

describe('the study runner’s access, reviewed for its ServiceAccount', () => {
  it('asks one review per permission of the runner chart’s Role and ClusterRole, and GET /version', async () => {
    const { plan, config } = await rig();
    const asked = plan.runnerAccess.questions.map(describeAccess);
    expect(asked).toEqual([
      'create jobs.batch in vllm',
      'get jobs.batch in vllm',
      'list jobs.batch in vllm',
      'delete jobs.batch in vllm',
      'get pods in vllm',
      'list pods in vllm',
      'delete pods in vllm',
      'get pods/log in vllm',
      'get deployments.apps in vllm',
      'patch deployments.apps in vllm',
      'get services in vllm',
      'list services in vllm',
      'create services in vllm',
      'patch services in vllm',
      'delete services in vllm',
      'get /metrics',
      'get /version',
    ]);
    // What install applies for it is the runner chart's own access objects, nothing else of it.
    expect(plan.runnerAccess.objects.map((o) => o.kind).sort()).toEqual(
      studyRunnerObjects(config)
        .map((o) => o.kind as string)
        .filter((k) => !['Job', 'ConfigMap'].includes(k))
        .sort(),
    );
  });

  it('lab install: PASS once its Roles are applied, then installed', async () => {
    const { server, deps, lines, plan } = await rig();
    await installLab(plan, deps);
    expect(lines).toContain(
      `  pass  the study runner (${SA}) may do all 17 things it does at run time (SubjectAccessReview each)`,
    );
    expect(lines.at(-1)).toMatch(/^installed in /);
    // The reviews went to the API server, after the runner's bindings were applied.
    const applied = server.applies.map((a) => `${a.kind} ${a.name}`);
    expect(applied).toContain('RoleBinding lab-study-runner');
    expect(applied).toContain('ClusterRoleBinding vllm-lab-study-runner-metrics');
    expect(server.requests.filter((r) => r.endsWith('/subjectaccessreviews'))).toHaveLength(17);
    // lab uninstall removes them with the charts, the cluster-scoped metrics reader included.
    await uninstallLab(plan, 'vllm', { api: deps.api, clock: deps.clock, write: () => {} });
    expect(server.live('ClusterRole')).toEqual([]);
    expect(server.live('ClusterRoleBinding')).toEqual([]);
  });

  it('lab install: FAIL naming what another authorizer refuses the runner, and the fix', async () => {
    const { deps, plan } = await rig({ othersDeny: ['get pods/log', 'get /version'] });
    const stopped = await installLab(plan, deps).catch((error: unknown) => error);
    expect(stopped).toBeInstanceOf(InstallStopped);
    const message = (stopped as Error).message;
    expect(message).toContain(
      `the study runner (${SA}) may not: get pods/log in vllm; get /version; it would stop mid-study on a 403`,
    );
    expect(message).toContain(
      'the cluster has the Roles and bindings that grant these (RoleBinding vllm/lab-study-runner, ClusterRoleBinding vllm-lab-study-runner-metrics), so something else refuses them',
    );
    expect(message).toContain(
      'get /version is granted to every authenticated user by the default ClusterRoles',
    );
    expect(message).toContain(
      `check each with kubectl auth can-i get pods --subresource=log -n vllm --as=${SA}`,
    );
  });

  it('lab install: not checked, said plainly with the kubectl command, when the user may not create SubjectAccessReviews', async () => {
    const { deps, lines, plan } = await rig({ denied: ['create subjectaccessreviews.authorization.k8s.io'] });
    await installLab(plan, deps);
    const at = lines.findIndex((l) => l.startsWith('  warn  not checked:'));
    expect(lines[at]).toBe(
      '  warn  not checked: the kubeconfig user may not create subjectaccessreviews.authorization.k8s.io, so whether the study runner may do the 17 things it does at run time was not asked; a missing permission would stop it mid-study with a 403',
    );
    expect(lines[at + 1]).toContain(`kubectl auth can-i --list -n vllm --as=${SA}`);
    expect(lines.at(-1)).toMatch(/^installed in /);
  });

  it('lab doctor before install: asks what the default roles must grant; FAIL when /version is narrowed', async () => {
    const fresh = await rig();
    const before = await runClusterDoctor(fresh.deps.api, fresh.config, fresh.plan);
    expect(before.lines.find((l) => l.check === 'runner-rbac')).toEqual({
      check: 'runner-rbac',
      status: 'pass',
      subject: 'ServiceAccount vllm/lab-study-runner',
      message: `the study runner (${SA}) may get /version (the cluster's default roles); its Roles and bindings are not applied yet: lab install applies them, then reviews each of its 17 permissions`,
    });
    const hardened = await rig({ othersDeny: ['get /version'] });
    const report = await runClusterDoctor(hardened.deps.api, hardened.config, hardened.plan);
    const line = report.lines.find((l) => l.check === 'runner-rbac');
    expect(line?.status).toBe('fail');
    expect(line?.message).toBe(
      `the study runner (${SA}) may not: get /version; it would stop mid-study on a 403`,
    );
    expect(line?.fix).toContain(
      `grant it to ${SA}; check each with kubectl auth can-i get /version --as=${SA}`,
    );
  });

  it('lab doctor after install: reviews every permission; FAIL on a refusal, WARN when it may not ask', async () => {
    const { deps, plan, config, server } = await rig();
    await installLab(plan, deps);
    expect((await runClusterDoctor(deps.api, config, plan)).lines.at(-1)).toMatchObject({
      check: 'runner-rbac',
      status: 'pass',
    });
    // The cluster's policy changes: another authorizer now refuses pods/log to the runner.
    (server.options as { othersDeny?: string[] }).othersDeny = ['get pods/log'];
    const refused = (await runClusterDoctor(deps.api, config, plan)).lines.at(-1);
    expect(refused).toMatchObject({
      status: 'fail',
      message: expect.stringContaining('may not: get pods/log in vllm;'),
    });
    (server.options as { denied?: string[] }).denied = ['create subjectaccessreviews.authorization.k8s.io'];
    const unasked = (await runClusterDoctor(deps.api, config, plan)).lines.at(-1);
    expect(unasked).toMatchObject({ status: 'warn', message: expect.stringMatching(/^not checked: /) });
  });
});
