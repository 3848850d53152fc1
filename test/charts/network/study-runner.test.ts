import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import {
  NetworkStudyRunnerChart,
  networkJobContext,
  serviceTemplateManifest,
} from '../../../charts/network/study-runner.ts';
import { CONFIGMAP_LIMIT_BYTES, configMapDataBytes } from '../../../charts/study-runner.ts';
import { loadLabConfig, parseLabConfig } from '../../../lib/config/load.ts';
import type { LabConfig } from '../../../lib/config/schema.ts';
import type { NetworkStudyPlan } from '../../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../../lib/network/study/plan.ts';
import { networkSmokePlan } from '../../../lib/network/study/smoke.ts';
import { cellByName, NETWORK_RUNNER_NAME } from '../../../lib/network/topology.ts';
import { CONNTRACK_READ_SCRIPT, DATAPATH_SCRIPT } from '../../../lib/runner/network/host-output.ts';
import {
  ciliumCommandJob,
  conntrackDriverJob,
  hostCommandJob,
  proberJob,
  runJobs,
} from '../../../lib/runner/network/jobs.ts';
import { missingPlanJobs } from '../../../lib/runner/network/main.ts';
import { NETWORK_RUNNER_FILES } from '../../../lib/runner/network/runner-files.ts';
import type { JobObject } from '../../../lib/runner/ports.ts';
import { tempDir } from '../../temp.ts';
import { type Manifest, validateManifest } from '../validate.ts';

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary manifest fields
type Any = any;

const example = loadLabConfig({ file: 'examples/network-lab.yaml' }).config;

function synth(config: LabConfig, cellName: string): Manifest[] {
  const chart = new NetworkStudyRunnerChart(Testing.app(), '90-study-runner', {
    config,
    cell: cellByName(config.network, cellName),
  });
  return Testing.synth(chart) as Manifest[];
}

const byKind = (objects: Manifest[], kind: string): Any[] => objects.filter((o) => o.kind === kind);

describe('the network study runner chart', () => {
  for (const cell of example.network.cells) {
    describe(`cell ${cell.name}`, () => {
      const objects = synth(example, cell.name);
      const configMap = byKind(objects, 'ConfigMap')[0];
      const jobs = JSON.parse(configMap.data[NETWORK_RUNNER_FILES.jobs]) as Record<string, JobObject>;

      it('validates every object, and every Job it carries, against the Kubernetes schemas', () => {
        for (const object of objects) expect(() => validateManifest(object), object.kind).not.toThrow();
        expect(Object.keys(jobs).length).toBeGreaterThan(0);
        for (const job of Object.values(jobs)) {
          expect(() => validateManifest(job as unknown as Manifest), job.metadata.name).not.toThrow();
          expect(job.spec.backoffLimit, job.metadata.name).toBe(0);
          expect(job.metadata.name.length).toBeLessThanOrEqual(63);
        }
        expect(() => validateManifest(serviceTemplateManifest() as unknown as Manifest)).not.toThrow();
      });

      it('carries the configuration, the cell plan and a Job for every static run of it', () => {
        const plan = JSON.parse(configMap.data[NETWORK_RUNNER_FILES.plan]) as NetworkStudyPlan;
        expect(plan).toEqual(networkStudyPlan(example, cell.name));
        expect(JSON.parse(configMap.data[NETWORK_RUNNER_FILES.config])).toEqual(example);
        expect(JSON.parse(configMap.data[NETWORK_RUNNER_FILES.context]).cell).toBe(cell.name);
        expect(missingPlanJobs(networkJobContext(example, cell), plan, jobs)).toEqual([]);
        // The smoke plan too: the smoke profile and the full study's checks run its Jobs.
        const smoke = JSON.parse(configMap.data[NETWORK_RUNNER_FILES.smoke]) as NetworkStudyPlan;
        expect(smoke).toEqual(networkSmokePlan(example, cell.name));
        expect(missingPlanJobs(networkJobContext(example, cell), smoke, jobs)).toEqual([]);
        expect(configMapDataBytes(configMap.data)).toBeLessThan(CONFIGMAP_LIMIT_BYTES);
      });

      it('runs the fortio image with arguments only: it is FROM scratch, with no shell (docs/facts.md §N2)', () => {
        const containers = Object.values(jobs).flatMap((job) => {
          const spec = (job.spec as Any).template.spec;
          return [...(spec.initContainers ?? []), ...spec.containers];
        });
        const fortio = containers.filter((c: Any) => c.image === example.network.fortio.image);
        expect(fortio.length).toBeGreaterThan(0);
        for (const c of fortio) {
          expect(c.command, c.name).toBeUndefined();
          expect(c.args[0], c.name).toBe('load');
        }
      });

      it('runs the runner pinned to the cell node with the results folder, as a Job that is not retried', () => {
        const [job] = byKind(objects, 'Job');
        expect(job.metadata).toMatchObject({ name: NETWORK_RUNNER_NAME, namespace: 'plain' });
        expect(job.spec.backoffLimit).toBe(0);
        const pod = job.spec.template.spec;
        expect(pod.nodeSelector).toEqual({ 'network-lab/cell': cell.name });
        expect(pod.serviceAccountName).toBe(NETWORK_RUNNER_NAME);
        expect(pod.volumes).toContainEqual({
          name: 'results',
          hostPath: { path: '/var/lib/lab/results', type: 'DirectoryOrCreate' },
        });
        expect(pod.containers[0].image).toBe(example.runner.image);
      });

      it('grants least privilege: no wildcard, no exec, writes only where the study works', () => {
        const rules = [...byKind(objects, 'Role'), ...byKind(objects, 'ClusterRole')].flatMap((r) =>
          r.rules.map((rule: Any) => ({ ns: r.metadata.namespace ?? '(cluster)', ...rule })),
        );
        for (const rule of rules) {
          expect(rule.verbs).not.toContain('*');
          expect(rule.resources).not.toContain('*');
          expect(rule.resources).not.toContain('pods/exec');
          expect(rule.verbs).not.toContain('patch');
        }
        const roles = byKind(objects, 'Role')
          .map((r) => r.metadata.namespace)
          .sort();
        const expected = [
          'plain',
          ...(cell.mesh !== 'none' ? ['mesh', 'mesh-default'] : []),
          ...(cell.datapath === 'cilium' ? ['kube-system'] : []),
        ];
        expect(roles).toEqual(expected.sort());
        const cluster = rules.filter((r) => r.ns === '(cluster)');
        expect(cluster).toEqual(
          cell.mesh !== 'none'
            ? [
                expect.objectContaining({
                  resources: ['namespaces'],
                  verbs: ['get'],
                  resourceNames: ['mesh', 'mesh-default'],
                }),
              ]
            : [],
        );
        // Services are created and deleted in plain only; mesh's are listed (E9's free ClusterIPs).
        const services = rules.filter((r) => r.resources.includes('services'));
        expect(services.map((r) => `${r.ns}: ${r.verbs.join(',')}`)).toEqual([
          'plain: create,list,delete',
          ...(cell.mesh !== 'none' ? ['mesh: list'] : []),
        ]);
        // Pods are deleted only in the mesh namespaces (restarts after the label), never in plain
        // or kube-system.
        expect(
          rules.filter((r) => r.resources.includes('pods') && r.verbs.includes('delete')).map((r) => r.ns),
        ).toEqual(cell.mesh !== 'none' ? ['mesh', 'mesh-default'] : []);
        for (const binding of byKind(objects, 'RoleBinding'))
          expect(binding.subjects).toEqual([
            { kind: 'ServiceAccount', name: NETWORK_RUNNER_NAME, namespace: 'plain' },
          ]);
      });
    });
  }

  it('the Jobs the runner builds at run time validate too, host commands privileged in the host network', () => {
    const ctx = networkJobContext(example, cellByName(example.network, 'dp-cilium'));
    const built = [
      hostCommandJob(ctx, 'net-datapath', 'study', DATAPATH_SCRIPT),
      hostCommandJob(ctx, 'net-ct-read', 'e10-limit-2048', CONNTRACK_READ_SCRIPT),
      ciliumCommandJob(ctx, 'net-cilium-status', 'study', 'cilium-dbg status'),
      proberJob(ctx, 'net-e9-services-100-prober', 'e9-services-100', ['10.43.0.12:8080'], 20, 100_000),
      conntrackDriverJob(ctx, 'net-e10-limit-2048-driver', 'e10-limit-2048', 4000, 5),
    ];
    for (const job of built) {
      expect(() => validateManifest(job as unknown as Manifest), job.metadata.name).not.toThrow();
      expect(job.spec.backoffLimit).toBe(0);
    }
    const pod = (job: JobObject): Any => (job.spec as Any).template.spec;
    expect(pod(built[0])).toMatchObject({
      hostNetwork: true,
      nodeSelector: { 'network-lab/cell': 'dp-cilium' },
    });
    expect(pod(built[0]).containers[0].securityContext.privileged).toBe(true);
    expect(pod(built[2]).containers[0].image).toBe('quay.io/cilium/cilium:v1.20.2');
    // E9: the prober watches the address (no start time: it runs before the Service exists) and
    // says when it is probing.
    expect(pod(built[3]).containers[0].command).toContain('10.43.0.12:8080');
    expect(pod(built[3]).containers[0].command).toContain('/out/probing.json');
  });

  it('renders fortio with the run settings and its JSON into the output folder', () => {
    const plan = networkStudyPlan(example, 'mesh');
    const run = plan.runs.find((r) => r.id === 'e1-mesh-mtls-r1');
    if (!run) throw new Error('no e1-mesh-mtls-r1');
    const ctx = networkJobContext(example, cellByName(example.network, 'mesh'));
    const job = runJobs(ctx, run)['net-e1-mesh-mtls-r1'];
    const pod = (job.spec as Any).template.spec;
    expect(job.metadata.namespace).toBe('mesh');
    expect(pod.serviceAccountName).toBe('good');
    expect(pod.containers[0].args).toEqual([
      'load',
      '-c',
      '16',
      '-qps',
      '500',
      '-t',
      '25s',
      '-r',
      '0.00001',
      '-p',
      '50,90,99',
      '-json',
      '/out/fortio.json',
      'http://fortio.mesh.svc.cluster.local:8080/echo',
    ]);
    expect(pod.volumes[0].hostPath.path).toBe('/var/lib/lab/results/jobs/net-e1-mesh-mtls-r1');
  });

  it('ships its own bundle, which runs in Node and stops with a clear message outside a cluster', () => {
    const data = byKind(synth(example, 'dp-iptables'), 'ConfigMap')[0].data as Record<string, string>;
    const bundle = data[NETWORK_RUNNER_FILES.bundle];
    expect(bundle).not.toMatch(/cdk8s|from "zod"|@aws-sdk|from "esbuild"/);
    expect(Buffer.byteLength(bundle)).toBeLessThan(200 * 1024);
    const run = (files: Record<string, string>) => {
      const dir = tempDir('network-runner-bundle-');
      for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
      try {
        execFileSync(process.execPath, [join(dir, NETWORK_RUNNER_FILES.bundle)], {
          env: { PATH: process.env.PATH ?? '', LAB_RUNNER_DIR: dir, LAB_RESULTS_DIR: join(dir, 'results') },
          stdio: 'pipe',
        });
        return { status: 0, stderr: '' };
      } catch (error) {
        const e = error as { status: number; stderr: Buffer };
        return { status: e.status, stderr: e.stderr.toString() };
      }
    };
    expect(run(data)).toEqual({
      status: 1,
      stderr: expect.stringMatching(
        /KUBERNETES_SERVICE_HOST is not set: the runner must run in a pod of the cluster/,
      ),
    });
    const llm = { ...data, [NETWORK_RUNNER_FILES.config]: JSON.stringify(parseLabConfig({})) };
    expect(run(llm).stderr).toMatch(/is an llm-gateway configuration: this is the network lab's runner/);
  });

  it('refuses a plan whose ConfigMap would exceed the Kubernetes limit, naming the cell', () => {
    const huge = parseLabConfig({
      lab: 'network',
      network: {
        // Room in Cilium's LB map for the Services (B + 2 entries each), so only the size stops it.
        // 1,500 steps make a ConfigMap of about 3.3 MB, three times the limit (30,000 made 59 MB
        // and took 4 s of CPU to build).
        cilium: { lbMapMax: 131_072 },
        experiments: { serviceScale: { steps: Array.from({ length: 1_500 }, (_, i) => i) } },
      },
    });
    expect(() => synth(huge, 'mesh')).toThrow(
      /runner ConfigMap of cell mesh holds \d+ bytes, over Kubernetes' limit/,
    );
  });
});
