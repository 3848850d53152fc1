import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { CONFIGMAP_LIMIT_BYTES, configMapDataBytes, StudyRunnerChart } from '../../charts/study-runner.ts';
import { imageTagProblem } from '../../lib/config/fields.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { smokePlan } from '../../lib/study/smoke.ts';
import { STUDY_RUNNER_NAME } from '../../lib/study/topology.ts';
import { type Manifest, validateManifest } from '../charts/validate.ts';
import { tempDir } from '../temp.ts';

const config = defaultLabConfig();

function synthRunner(overrides: unknown = {}): Manifest[] {
  const cfg = parseLabConfig(overrides);
  const chart = new StudyRunnerChart(Testing.app(), '90-runner', {
    namespace: cfg.namespace,
    labels: { 'app.kubernetes.io/part-of': 'llm-gateway-lab' },
    config: cfg,
  });
  return Testing.synth(chart) as Manifest[];
}

const objects = synthRunner();
const of = (kind: string) => {
  const found = objects.filter((o) => o.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0];
};

describe('the StudyRunner chart', () => {
  it('has a ServiceAccount, Role, RoleBinding, ConfigMap and Job in the lab namespace, and a metrics ClusterRole', () => {
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'Job',
      'Role',
      'RoleBinding',
      'ServiceAccount',
    ]);
    for (const object of objects) {
      validateManifest(object);
      if (object.kind.startsWith('Cluster')) continue;
      expect(object.metadata.name).toBe(STUDY_RUNNER_NAME);
      expect(object.metadata.namespace).toBe('vllm');
      expect(object.metadata.labels?.['app.kubernetes.io/part-of']).toBe('llm-gateway-lab');
    }
  });

  it('grants only what the runner does, in the lab namespace', () => {
    expect(of('Role').rules).toEqual([
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['create', 'get', 'list', 'delete'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'delete'] },
      { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'] },
      { apiGroups: [''], resources: ['services'], verbs: ['get', 'list', 'create', 'patch', 'delete'] },
    ]);
    expect(of('RoleBinding')).toMatchObject({
      roleRef: { kind: 'Role', name: STUDY_RUNNER_NAME },
      subjects: [{ kind: 'ServiceAccount', name: STUDY_RUNNER_NAME, namespace: 'vllm' }],
    });
  });

  it('may GET /metrics cluster-wide and nothing else, as the EPPs authorize scrapes by SubjectAccessReview', () => {
    expect(of('ClusterRole')).toMatchObject({
      metadata: { name: 'vllm-lab-study-runner-metrics' },
      rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
    });
    expect(of('ClusterRole').metadata.namespace).toBeUndefined();
    expect(of('ClusterRoleBinding')).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'vllm-lab-study-runner-metrics' },
      subjects: [{ kind: 'ServiceAccount', name: STUDY_RUNNER_NAME, namespace: 'vllm' }],
    });
  });

  it('with the AI Gateway arm, may read its route and Gateway, whose conditions the preflight checks', () => {
    const withGateway = synthRunner({ study: { optionalArms: ['ai-gateway'] } });
    const role = withGateway.find((o) => o.kind === 'Role');
    expect(role?.rules).toContainEqual({
      apiGroups: ['gateway.networking.k8s.io'],
      resources: ['httproutes', 'gateways'],
      verbs: ['get'],
    });
    const data = withGateway.find((o) => o.kind === 'ConfigMap')?.data as Record<string, string>;
    const checks = JSON.parse(data['preflight.json']);
    expect(Object.keys(checks)).toEqual(['ai-gateway', 'ai-gateway-completions']);
    expect(checks['ai-gateway']).toEqual([
      {
        group: 'gateway.networking.k8s.io',
        version: 'v1',
        namespace: 'vllm',
        kind: 'HTTPRoute',
        plural: 'httproutes',
        name: 'ai-gateway',
        conditions: ['Accepted', 'ResolvedRefs'],
        at: 'parents',
      },
      {
        group: 'gateway.networking.k8s.io',
        version: 'v1',
        namespace: 'vllm',
        kind: 'Gateway',
        plural: 'gateways',
        name: 'ai-gateway',
        conditions: ['Programmed'],
        at: 'status',
      },
    ]);
    expect(JSON.parse((of('ConfigMap').data as Record<string, string>)['preflight.json'])).toEqual({});
  });

  it('runs the bundle once on a pinned Node image with the results folder mounted', () => {
    const job = of('Job');
    expect(job.spec.backoffLimit).toBe(0);
    const pod = job.spec.template.spec;
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.serviceAccountName).toBe(STUDY_RUNNER_NAME);
    expect(pod.runtimeClassName).toBeUndefined();
    const [container] = pod.containers;
    expect(container.image).toBe(config.runner.image);
    expect(imageTagProblem(config.runner.image)).toBeUndefined();
    expect(container.command).toEqual(['node', '/opt/lab-runner/runner.mjs']);
    expect(container.resources.limits).not.toHaveProperty('nvidia.com/gpu');
    expect(container.volumeMounts).toEqual([
      { name: 'runner', mountPath: '/opt/lab-runner', readOnly: true },
      { name: 'results', mountPath: '/results' },
    ]);
    expect(pod.volumes).toEqual([
      { name: 'runner', configMap: { name: STUDY_RUNNER_NAME } },
      { name: 'results', hostPath: { path: '/var/lib/lab/results', type: 'DirectoryOrCreate' } },
    ]);
  });

  it('carries the bundle, config, both plans and the client Jobs of benchmarkJob, under the 1 MiB limit', () => {
    const data = of('ConfigMap').data as Record<string, string>;
    expect(Object.keys(data).sort()).toEqual([
      'config.json',
      'jobs.json',
      'plan.json',
      'preflight.json',
      'runner.mjs',
      'smoke-plan.json',
    ]);
    const bytes = configMapDataBytes(data);
    expect(bytes).toBeLessThan(CONFIGMAP_LIMIT_BYTES);
    // The whole object as the API server stores it, too.
    expect(Buffer.byteLength(JSON.stringify(of('ConfigMap')))).toBeLessThan(CONFIGMAP_LIMIT_BYTES);
    expect(JSON.parse(data['config.json'])).toEqual(config);
    const plan = studyPlan(config);
    expect(JSON.parse(data['plan.json'])).toEqual(JSON.parse(JSON.stringify(plan)));
    const jobs = JSON.parse(data['jobs.json']);
    expect(jobs['partition-r1']).toEqual(benchmarkJob(config, plan.runs[4].benchmarks[1]));
    // The smoke study's clients travel too (lib/study/smoke.ts), each under its own id.
    const smoke = smokePlan(config);
    expect(JSON.parse(data['smoke-plan.json'])).toEqual(JSON.parse(JSON.stringify(smoke)));
    expect(jobs['smoke-partition-r1']).toEqual(benchmarkJob(config, smoke.runs[0].benchmarks[1]));
    expect(Object.keys(jobs)).toHaveLength(
      [...plan.runs, ...smoke.runs].flatMap((run) => run.benchmarks).length,
    );
    // The bundle does not drag in cdk8s, zod or the AWS SDK.
    expect(data['runner.mjs']).not.toMatch(/cdk8s|from "zod"|@aws-sdk/);
    // A budget with room for the runner's own code (about 200 KiB at the end of 2026): cdk8s, zod
    // or the SDK would add megabytes.
    expect(Buffer.byteLength(data['runner.mjs'])).toBeLessThan(256 * 1024);
  });

  it('the bundle runs in Node and stops with a clear message outside a cluster', () => {
    const dir = tempDir('lab-runner-');
    const data = of('ConfigMap').data as Record<string, string>;
    for (const [file, text] of Object.entries(data)) writeFileSync(join(dir, file), text);
    let stderr = '';
    let status = 0;
    try {
      execFileSync(process.execPath, [join(dir, 'runner.mjs')], {
        env: { PATH: process.env.PATH ?? '', LAB_RUNNER_DIR: dir, LAB_RESULTS_DIR: join(dir, 'results') },
        stdio: 'pipe',
      });
    } catch (error) {
      const e = error as { status: number; stderr: Buffer };
      status = e.status;
      stderr = e.stderr.toString();
    }
    expect(status).toBe(1);
    expect(stderr).toMatch(/KUBERNETES_SERVICE_HOST is not set: the runner must run in a pod of the cluster/);
  });

  it('with every optional arm the ConfigMap still fits', () => {
    const all = synthRunner({ study: { optionalArms: ['epp-prefix3', 'llmd-precise'] } });
    const data = all.find((o) => o.kind === 'ConfigMap')?.data as Record<string, string>;
    expect(Object.keys(JSON.parse(data['jobs.json']))).toContain('arm-llmd-precise-prefix');
    expect(configMapDataBytes(data)).toBeLessThan(CONFIGMAP_LIMIT_BYTES);
  });
});
