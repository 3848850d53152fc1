import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { StudyRunnerChart } from '../../charts/study-runner.ts';
import { synthesizeCluster } from '../../charts/synthesize.ts';
import { checkManifests, type KubeObject } from '../../lib/check/index.ts';
import { loadLabConfig } from '../../lib/config/load.ts';
import { clusterNodeRoles, labPlacement } from '../../lib/config/placement.ts';
import { onRunnerNode, RUNNER_NODE_ENV } from '../../lib/runner/layout.ts';
import { findRun, studyPlan } from '../../lib/study/plan.ts';
import { tempDir } from '../temp.ts';
import { find, type SynthesizedLab, synthLab } from './synth.ts';
import { type Manifest, validateManifest } from './validate.ts';

const EXAMPLE = new URL('../../examples/multi-node.yaml', import.meta.url);
const example = () => parse(readFileSync(EXAMPLE, 'utf8'));

const ROLE = 'llm-gateway-lab/node-role';
const GPU = { [ROLE]: 'gpu' };
const CPU = { [ROLE]: 'cpu' };

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary pod fields
const podSpec = (object: Manifest): any =>
  object.kind === 'Job' ||
  object.kind === 'Deployment' ||
  object.kind === 'StatefulSet' ||
  object.kind === 'DaemonSet'
    ? object.spec.template.spec
    : undefined;

/** The synthesized charts plus every benchmark Job of the study, as `lab check` sees dist/. */
function withJobs(lab: SynthesizedLab): KubeObject[] {
  const jobs = studyPlan(lab.config).runs.flatMap((run) =>
    run.benchmarks.map((spec) => benchmarkJob(lab.config, spec)),
  );
  return [...lab.objects, ...jobs] as unknown as KubeObject[];
}

describe('examples/multi-node.yaml (2 GPU agents, 1 CPU agent, 8 replicas)', () => {
  it('is valid, with 12 GPUs for its 8 replicas and a CPU node', () => {
    const { config, warnings } = loadLabConfig({ file: EXAMPLE.pathname, env: {} });
    expect(config.vllm.replicas).toBe(8);
    expect(config.cluster.agents.map((a) => [a.role, a.count, a.instanceType])).toEqual([
      ['gpu', 2, 'g6.12xlarge'],
      ['cpu', 1, 'c7i.4xlarge'],
    ]);
    expect(clusterNodeRoles(config)).toEqual(['gpu', 'cpu']);
    // Only the quota reminders: no placement or workload warning.
    expect(warnings.every((w) => w.startsWith('cluster: the hosts need'))).toBe(true);
  });

  it('synthesizes: every object passes its schema, the study has 8 partition clients', () => {
    const config = loadLabConfig({ file: EXAMPLE.pathname, env: {} }).config;
    const out = tempDir('multi-node-');
    synthesizeCluster(config, out);
    const files = readdirSync(out).filter((f) => f.endsWith('.yaml'));
    expect(files).toContain('90-runner.yaml');
    const objects = files.flatMap((file) =>
      parseAllDocuments(readFileSync(join(out, file), 'utf8')).map((d) => d.toJSON() as Manifest),
    );
    for (const object of objects) validateManifest(object);
    expect(find(objects, 'StatefulSet', 'qwen3').spec.replicas).toBe(8);
    const partition = readdirSync(join(out, 'jobs')).filter((f) => f === 'partition.yaml');
    expect(partition).toHaveLength(1);
    const clients = parseAllDocuments(readFileSync(join(out, 'jobs', 'partition.yaml'), 'utf8'));
    expect(clients).toHaveLength(8);
  });

  it('places replicas on GPU nodes spread over every host, front ends on the CPU node', () => {
    const lab = synthLab(example());
    const replicas = podSpec(find(lab.objects, 'StatefulSet', 'qwen3'));
    expect(replicas.nodeSelector).toEqual(GPU);
    expect(replicas.runtimeClassName).toBe('nvidia');
    expect(replicas.topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'ScheduleAnyway',
        labelSelector: { matchLabels: { app: 'qwen3' } },
      },
    ]);
    // The runner's node (the K3s server) also holds every client: the replicas prefer the others.
    expect(replicas.affinity).toEqual({
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            preference: {
              matchExpressions: [
                { key: 'node-role.kubernetes.io/control-plane', operator: 'NotIn', values: ['true'] },
              ],
            },
          },
        ],
      },
    });
    for (const [kind, name] of [
      ['Deployment', 'vllm-router-cache-aware'],
      ['Deployment', 'qwen3-epp'],
      ['Deployment', 'envoy-epp'],
    ]) {
      expect(podSpec(find(lab.objects, kind, name)).nodeSelector, `${kind} ${name}`).toEqual(CPU);
    }
    // The device plugin runs where the GPUs are.
    expect(podSpec(find(lab.objects, 'DaemonSet', 'nvidia-device-plugin')).nodeSelector).toEqual(GPU);
  });

  it('keeps the benchmark clients on GPU nodes with the runtime class, and no GPU request', () => {
    const lab = synthLab(example());
    const plan = studyPlan(lab.config);
    const partition = findRun(plan, 'partition');
    expect(partition.benchmarks).toHaveLength(8);
    for (const spec of partition.benchmarks) {
      const pod = benchmarkJob(lab.config, spec).spec.template as { spec: Record<string, unknown> };
      expect(pod.spec.nodeSelector).toEqual(GPU);
      expect(pod.spec.runtimeClassName).toBe('nvidia');
    }
  });

  it('runs the runner on the K3s server, a GPU node, tells it its node, and pins the clients there', () => {
    const lab = synthLab(example());
    const objects = Testing.synth(
      new StudyRunnerChart(Testing.app(), '90-runner', { namespace: 'vllm', config: lab.config }),
    ) as Manifest[];
    const runner = podSpec(find(objects, 'Job', 'lab-study-runner'));
    // K3s labels its server node-role.kubernetes.io/control-plane=true; its bootstrap uploads the results folder.
    expect(runner.nodeSelector).toEqual({ ...GPU, 'node-role.kubernetes.io/control-plane': 'true' });
    expect(runner.containers[0].env).toContainEqual({
      name: RUNNER_NODE_ENV,
      valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } },
    });
    // At run time each client Job is required onto that node, its own selector kept.
    const spec = findRun(studyPlan(lab.config), 'partition').benchmarks[7];
    const job = benchmarkJob(lab.config, spec);
    // Outside a pod (no node name) the Job is left as it is.
    expect(onRunnerNode(job, undefined)).toBe(job);
    const pinned = onRunnerNode(job, 'ip-10-0-1-5');
    validateManifest(pinned as unknown as Manifest);
    const pod = (pinned.spec.template as { spec: Record<string, unknown> }).spec;
    expect(pod.nodeSelector).toEqual(GPU);
    expect(pod.affinity).toEqual({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['ip-10-0-1-5'] }] },
          ],
        },
      },
    });
  });

  it('passes lab check, and a replica moved to the CPU node fails it', () => {
    const lab = synthLab(example());
    const options = {
      placement: labPlacement(lab.config),
      clusterRoles: clusterNodeRoles(lab.config),
      // The cluster's hosts together: 3 x g6.12xlarge and a c7i.4xlarge.
      nodeCpu: 3 * 48 + 16,
      nodeMemoryGiB: 3 * 192 + 32,
    };
    expect(checkManifests(withJobs(lab), options)).toEqual([]);
    const objects = withJobs(lab);
    const sts = objects.find((o) => o.kind === 'StatefulSet') as unknown as Manifest;
    sts.spec.template.spec.nodeSelector = CPU;
    expect(checkManifests(objects, options).map((v) => [v.object, v.lesson])).toEqual([
      ['StatefulSet vllm/qwen3', 12],
    ]);
  });
});

describe('placement on a cluster of your own (EKS GPU node groups, on-premises)', () => {
  const eks = {
    placement: {
      frontEnds: 'cpu',
      gpuNodes: {
        nodeSelector: { 'eks.amazonaws.com/nodegroup': 'gpu-l4' },
        tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
        // The EKS GPU AMI makes nvidia containerd's default runtime: no RuntimeClass needed.
        runtimeClassName: null,
      },
      cpuNodes: { nodeSelector: { 'eks.amazonaws.com/nodegroup': 'general' } },
      runnerNodeSelector: { 'lab.example.com/results': 'true' },
    },
  };

  it('takes node selectors, tolerations and the runtime class from the configuration', () => {
    const lab = synthLab(eks);
    const gpuPool = {
      nodeSelector: { 'eks.amazonaws.com/nodegroup': 'gpu-l4' },
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
    };
    const replicas = podSpec(find(lab.objects, 'StatefulSet', 'qwen3'));
    expect(replicas).toMatchObject(gpuPool);
    expect(replicas.runtimeClassName).toBeUndefined();
    const plugin = podSpec(find(lab.objects, 'DaemonSet', 'nvidia-device-plugin'));
    expect(plugin.nodeSelector).toEqual(gpuPool.nodeSelector);
    expect(plugin.runtimeClassName).toBeUndefined();
    const router = podSpec(find(lab.objects, 'Deployment', 'vllm-router-round-robin'));
    expect(router.nodeSelector).toEqual({ 'eks.amazonaws.com/nodegroup': 'general' });
    expect(router.tolerations).toBeUndefined();
    const spec = findRun(studyPlan(lab.config), 'bound-p128').benchmarks[0];
    const client = benchmarkJob(lab.config, spec).spec.template as { spec: Record<string, unknown> };
    expect(client.spec).toMatchObject(gpuPool);
    expect(client.spec.runtimeClassName).toBeUndefined();
    for (const object of lab.objects) validateManifest(object);
    // lab check judges the runtime class against the configuration too: none expected, none flagged.
    const options = { placement: labPlacement(lab.config), clusterRoles: ['gpu', 'cpu'] as const };
    expect(checkManifests(withJobs(lab), options)).toEqual([]);
  });

  it('puts the llm-d EPP on a GPU node even when front ends go to CPU: it reads the model cache', () => {
    const lab = synthLab({ ...example(), vllm: { replicas: 4 }, study: { optionalArms: ['llmd-precise'] } });
    expect(podSpec(find(lab.objects, 'Deployment', 'qwen3-llmd-precise')).nodeSelector).toEqual(GPU);
    expect(podSpec(find(lab.objects, 'Deployment', 'qwen3-epp')).nodeSelector).toEqual(CPU);
    expect(podSpec(find(lab.objects, 'StatefulSet', 'qwen3-kv')).nodeSelector).toEqual(GPU);
  });

  it("puts the AI Gateway arm's Envoy proxies on the front ends' nodes through its EnvoyProxy", () => {
    const lab = synthLab({ ...example(), study: { optionalArms: ['ai-gateway'] } });
    const proxy = find(lab.objects, 'EnvoyProxy', 'vllm-ai-gateway');
    expect(proxy.spec.provider.kubernetes.envoyDeployment.pod).toEqual({ nodeSelector: CPU });
    validateManifest(proxy);
  });

  it('keeps every lab pod on the GPU host when the cluster has no CPU node (the one-host lab)', () => {
    const lab = synthLab();
    for (const object of lab.objects) {
      const spec = podSpec(object);
      if (spec) expect(spec.nodeSelector, `${object.kind} ${object.metadata.name}`).toEqual(GPU);
      // One GPU node: no preference to express.
      if (spec) expect(spec.affinity, `${object.kind} ${object.metadata.name}`).toBeUndefined();
    }
  });
});
