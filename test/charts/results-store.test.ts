import { Testing } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { labManifests, RESULTS_CHART } from '../../charts/lab-app.ts';
import { StudyRunnerChart } from '../../charts/study-runner.ts';
import { defaultLabConfig, parseLabConfig } from '../../lib/config/load.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { type Manifest, validateManifest } from './validate.ts';

const ON_CLAIM = parseLabConfig({
  runner: { results: { volume: 'claim', storageClassName: 'gp3', size: '50Gi' } },
});

interface PodTemplate {
  spec: {
    template: {
      spec: {
        affinity?: { podAffinity?: unknown };
        volumes: {
          name: string;
          hostPath?: { path: string };
          persistentVolumeClaim?: { claimName: string };
        }[];
        containers: {
          volumeMounts: { name: string; mountPath: string; subPath?: string; readOnly?: boolean }[];
          ports?: { containerPort: number }[];
        }[];
      };
    };
  };
}

function runnerJobOf(config = ON_CLAIM): PodTemplate {
  const chart = new StudyRunnerChart(Testing.app(), '90-runner', { namespace: config.namespace, config });
  const job = (Testing.synth(chart) as Manifest[]).find((o) => o.kind === 'Job');
  return job as unknown as PodTemplate;
}

describe('runner.results: the results folder on a claim', () => {
  it('adds 05-results (claim and its read-only server) only with volume: claim', () => {
    const charts = labManifests(ON_CLAIM);
    expect(charts.map((c) => c.chart).slice(0, 3)).toEqual(['00-namespace', RESULTS_CHART, '10-gpu']);
    const objects = charts[1].objects as unknown as Manifest[];
    for (const object of objects) validateManifest(object);
    const claim = objects.find((o) => o.kind === 'PersistentVolumeClaim') as unknown as {
      spec: { storageClassName: string; resources: { requests: { storage: string } } };
    };
    expect(claim.spec.storageClassName).toBe('gp3');
    expect(claim.spec.resources.requests.storage).toBe('50Gi');
    const server = objects.find((o) => o.kind === 'Deployment') as unknown as PodTemplate;
    const container = server.spec.template.spec.containers[0];
    expect(container.volumeMounts.find((m) => m.name === 'results')?.readOnly).toBe(true);
    expect(container.ports?.[0].containerPort).toBe(8080);
    expect(labManifests(defaultLabConfig()).map((c) => c.chart)).not.toContain(RESULTS_CHART);
  });

  it('mounts the claim in the runner, which must run beside the server holding it', () => {
    const spec = runnerJobOf().spec.template.spec;
    expect(spec.volumes.find((v) => v.name === 'results')).toEqual({
      name: 'results',
      persistentVolumeClaim: { claimName: 'lab-results' },
    });
    expect(JSON.stringify(spec.affinity)).toMatch(/results-server.*kubernetes\.io\/hostname/);
    // The lab's own host: the node folder, no affinity.
    const host = runnerJobOf(defaultLabConfig()).spec.template.spec;
    expect(host.volumes.find((v) => v.name === 'results')?.hostPath?.path).toBe('/var/lib/lab/results');
    expect(host.affinity).toBeUndefined();
  });

  it("gives each client its own folder of the claim as a subPath, as the host gives it a folder of the node's", () => {
    const spec = studyPlan(ON_CLAIM).runs[0].benchmarks[0];
    const onClaim = benchmarkJob(ON_CLAIM, spec) as unknown as PodTemplate;
    const pod = onClaim.spec.template.spec;
    expect(pod.volumes.find((v) => v.name === 'results')?.persistentVolumeClaim?.claimName).toBe(
      'lab-results',
    );
    expect(pod.containers[0].volumeMounts.find((m) => m.name === 'results')).toEqual({
      name: 'results',
      mountPath: '/out',
      subPath: spec.id,
    });
    const onHost = (benchmarkJob(defaultLabConfig(), spec) as unknown as PodTemplate).spec.template.spec;
    expect(onHost.volumes.find((v) => v.name === 'results')?.hostPath?.path).toBe(
      `/var/lib/lab/results/${spec.id}`,
    );
    expect(onHost.containers[0].volumeMounts.find((m) => m.name === 'results')?.subPath).toBeUndefined();
  });

  it('names the setting, the bad value and what is allowed', () => {
    expect(() =>
      parseLabConfig({ runner: { results: { volume: 'pvc', size: '20GB', storageClassName: 'Fast_SSD' } } }),
    ).toThrow(
      /runner\.results\.volume = "pvc": allowed: node-folder, claim[\s\S]*runner\.results\.storageClassName = "Fast_SSD": must be a StorageClass name[\s\S]*runner\.results\.size = "20GB": must be a size like "20Gi"/,
    );
    expect(() => parseLabConfig({ lab: 'network', runner: { results: { volume: 'claim' } } })).toThrow(
      /runner\.results\.volume = "claim": claim is for the LLM-gateway lab/,
    );
  });
});
