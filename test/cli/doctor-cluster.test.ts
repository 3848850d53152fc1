import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { clusterExampleBlock, currentClusterBlock, runClusterExample } from '../doctor/cluster-example.ts';
import { type FakeApiOptions, FakeApiServer, type FakeNode } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { captureOutput } from './capture.ts';

const GPU = 'llm-gateway-lab/node-role';
const SERVER: FakeNode = {
  name: 'gpu-0',
  labels: { [GPU]: 'gpu', 'node-role.kubernetes.io/control-plane': 'true' },
  gpus: 4,
  pluginRunning: true,
};

let server: FakeApiServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
  vi.unstubAllEnvs();
});

/** A configuration file; a cluster you bring keeps the results on a claim unless `yaml` says otherwise. */
function configFile(yaml = ''): string {
  const file = join(mkdtempSync(join(tmpdir(), 'lab-doctor-config-')), 'lab.yaml');
  writeFileSync(file, /results:/.test(yaml) ? yaml : `runner:\n  results:\n    volume: claim\n${yaml}`);
  return file;
}

async function doctor(options: Partial<FakeApiOptions>, ...args: string[]) {
  vi.stubEnv('LAB_CONFIG', undefined);
  server = new FakeApiServer({
    clock: new FakeClock(),
    nodes: [SERVER],
    runtimeClasses: ['nvidia'],
    storageClasses: [{ name: 'gp3', default: true, waitForFirstConsumer: true }],
    ...options,
  });
  const kubeconfig = await server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-doctor-cluster-')));
  const config = args.includes('--config') ? [] : ['--config', configFile()];
  const run = await captureOutput(() => runLab(['doctor', '--kubeconfig', kubeconfig, ...config, ...args]));
  const lines = run.stdout.split('\n');
  /** The report's line of one check (and subject), with its fix line when it has one. */
  const line = (check: string, subject = '') => {
    const at = lines.findIndex((l) => new RegExp(`^(PASS|WARN|FAIL)  ${check}  ${subject}`).test(l));
    if (at < 0) return undefined;
    return lines[at + 1]?.startsWith('      fix: ') ? `${lines[at]}\n${lines[at + 1]}` : lines[at];
  };
  return { code: run.value, stdout: run.stdout, stderr: run.stderr, line, server };
}

describe('lab doctor --kubeconfig: lab install checks as doctor lines', () => {
  it('a cluster that can run the lab: every line PASS, exit 0, nothing applied', async () => {
    const run = await doctor({});
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^lab doctor: the llm-gateway lab on context fake \(http:\/\/127\.0\.0\.1:\d+\), Kubernetes v1\.36\.0\+fake\n\n/,
    );
    expect(run.line('cluster', 'fake')).toMatch(
      /^PASS {2}cluster {2}fake: http:\/\/127\.0\.0\.1:\d+ answers: Kubernetes v1\.36\.0\+fake$/,
    );
    expect(run.line('gpus')).toBe(
      'PASS  gpus  placement.gpuNodes: 4 nvidia.com/gpu allocatable on 1 node(s) matching placement.gpuNodes (llm-gateway-lab/node-role=gpu); the replicas request 2',
    );
    expect(run.line('runtime-class')).toBe('PASS  runtime-class  nvidia: RuntimeClass nvidia exists');
    expect(run.line('nodes', 'placement.runnerNodeSelector')).toMatch(
      /^PASS {2}nodes {2}placement\.runnerNodeSelector: the study runner and its clients: 1 node\(s\) match/,
    );
    expect(run.line('results-storage')).toBe(
      'PASS  results-storage  runner.results: a PersistentVolumeClaim of 20Gi from the default StorageClass gp3 (ebs.csi.aws.com)',
    );
    expect(run.line('rbac')).toBe(
      "PASS  rbac  kubeconfig user: the kubeconfig user may create everything the lab installs and read the study's pods (list, pods/proxy, pods/log)",
    );
    expect(run.stdout).toMatch(
      /\n\d+ passed, 0 warning\(s\), no failure: lab install can go ahead on context fake\.\n$/,
    );
    expect(run.stderr).toContain('lab doctor: reading the nodes and RuntimeClasses');
    expect(run.server.applies).toEqual([]);
  });

  it('gpus: WARN before a device plugin runs (lab install brings one), FAIL when too few are advertised', async () => {
    const waiting = await doctor({ nodes: [{ ...SERVER, pluginRunning: false }] });
    expect(waiting.code).toBe(0);
    expect(waiting.line('gpus')).toMatch(
      /^WARN {2}gpus {2}placement\.gpuNodes: 0 nvidia\.com\/gpu allocatable .*; no GPU is advertised yet, so the lab's device plugin \(10-gpu\) is installed first/,
    );
    await server?.stop();
    const few = await doctor({ nodes: [{ ...SERVER, gpus: 1 }] });
    expect(few.code).toBe(1);
    expect(few.line('gpus')).toMatch(
      /^FAIL {2}gpus {2}placement\.gpuNodes: 1 nvidia\.com\/gpu allocatable on 1 node\(s\) .*request 2\n {6}fix: lower vllm\.replicas, or add GPU nodes/,
    );
    expect(few.stdout).toMatch(
      /\n1 failure\(s\), 0 warning\(s\), \d+ passed: lab install on context fake would stop before applying anything; fix the FAIL lines first\.\n$/,
    );
  });

  it('runtime-class: FAIL naming what the cluster has and the EKS setting', async () => {
    const run = await doctor({ runtimeClasses: ['runc-gvisor'] });
    expect(run.code).toBe(1);
    expect(run.line('runtime-class')).toMatch(
      /^FAIL {2}runtime-class {2}nvidia: RuntimeClass nvidia \(placement\.gpuNodes\.runtimeClassName\) does not exist \(the cluster has: runc-gvisor\).*\n {6}fix: on the EKS accelerated AMI nvidia is the default runtime: set placement\.gpuNodes\.runtimeClassName: null/,
    );
  });

  it('runtime-class: PASS without a RuntimeClass when the configuration names none', async () => {
    const file = configFile('placement:\n  gpuNodes:\n    runtimeClassName: null\n');
    const run = await doctor({ runtimeClasses: [] }, '--config', file);
    expect(run.line('runtime-class')).toMatch(
      /^PASS {2}runtime-class {2}\(none\): GPU pods carry no runtimeClassName/,
    );
  });

  it('nodes: FAIL when no node takes the runner, with the label to set', async () => {
    const run = await doctor({ nodes: [{ ...SERVER, labels: { [GPU]: 'gpu' } }] });
    expect(run.code).toBe(1);
    expect(run.line('nodes', 'placement.runnerNodeSelector')).toMatch(
      /^FAIL {2}nodes {2}placement\.runnerNodeSelector: the study runner and its clients: no Ready node matches .*\n {6}fix: label a node \(kubectl label node <node> llm-gateway-lab\/node-role=gpu node-role\.kubernetes\.io\/control-plane=true\)/,
    );
    expect(run.line('nodes', 'placement.gpuNodes')).toMatch(/^PASS/);
  });

  it('nodes: FAIL when the GPU nodes are tainted and placement does not tolerate it', async () => {
    const run = await doctor({
      nodes: [{ ...SERVER, taints: [{ key: 'team', value: 'ml', effect: 'NoSchedule' }] }],
    });
    expect(run.code).toBe(1);
    expect(run.line('nodes', 'placement.gpuNodes')).toMatch(
      /^FAIL {2}nodes {2}placement\.gpuNodes: vLLM replicas: no Ready node matches placement\.gpuNodes .* and tolerates its taints/,
    );
  });

  it('results-storage: PASS on a claim of the default class, FAIL on a node folder or a class the cluster lacks', async () => {
    const claim = await doctor({});
    expect(claim.line('results-storage')).toBe(
      'PASS  results-storage  runner.results: a PersistentVolumeClaim of 20Gi from the default StorageClass gp3 (ebs.csi.aws.com)',
    );
    await server?.stop();
    const folder = await doctor({}, '--config', configFile('runner:\n  results:\n    volume: node-folder\n'));
    expect(folder.code).toBe(1);
    expect(folder.line('results-storage')).toMatch(
      /^FAIL {2}results-storage {2}runner\.results: runner\.results\.volume is node-folder: .*\n {6}fix: set runner\.results\.volume: claim/,
    );
    await server?.stop();
    const missing = await doctor(
      {},
      '--config',
      configFile('runner:\n  results:\n    volume: claim\n    storageClassName: fast-ssd\n'),
    );
    expect(missing.code).toBe(1);
    expect(missing.line('results-storage')).toMatch(
      /^FAIL {2}results-storage {2}runner\.results: StorageClass fast-ssd \(runner\.results\.storageClassName\) does not exist \(the cluster has: gp3 \(default\)\)/,
    );
  });

  it('rbac: FAIL naming each refused access review, the CRDs of the prerequisites among them', async () => {
    const run = await doctor({
      denied: ['patch customresourcedefinitions.apiextensions.k8s.io', 'patch statefulsets.apps'],
    });
    expect(run.code).toBe(1);
    expect(run.line('rbac')).toMatch(
      /^FAIL {2}rbac {2}kubeconfig user: the kubeconfig user may not: patch customresourcedefinitions\.apiextensions\.k8s\.io; patch statefulsets\.apps in vllm\n {6}fix: use a context with cluster-admin/,
    );
  });

  it('rbac: FAIL on a refused pods/proxy, which lab status and lab results read through', async () => {
    const run = await doctor({ denied: ['get pods/proxy'] });
    expect(run.code).toBe(1);
    expect(run.line('rbac')).toMatch(
      /^FAIL {2}rbac {2}kubeconfig user: the kubeconfig user may not: get pods\/proxy in vllm\n {6}fix: .*pods\/proxy and pods\/log/,
    );
  });

  it('--json: every line with its check and status, ok false on a FAIL', async () => {
    const run = await doctor({ runtimeClasses: [] }, '--json');
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ ok: false, context: 'fake', version: 'v1.36.0+fake', lab: 'llm-gateway' });
    expect(report.lines.map((l: { check: string; status: string }) => `${l.check} ${l.status}`)).toEqual([
      'cluster pass',
      'gpus pass',
      'runtime-class fail',
      'nodes pass',
      'nodes pass',
      'nodes pass',
      'results-storage pass',
      'rbac pass',
      'runner-rbac pass',
    ]);
  });

  it('AWS options with --kubeconfig are refused, naming them', async () => {
    const run = await doctor({}, '--region', 'us-west-2');
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      'lab doctor: --region: for the AWS account check; --kubeconfig/--context check a cluster instead: use one or the other\n',
    );
  });
});

describe("docs/cluster.md's lab doctor --kubeconfig example", () => {
  it('is what the command prints now (npx tsx scripts/doctor-example.ts --write)', async () => {
    const page = readFileSync(new URL('../../docs/cluster.md', import.meta.url), 'utf8');
    const { code, stdout } = await runClusterExample();
    expect(code).toBe(1);
    expect(currentClusterBlock(page)).toBe(clusterExampleBlock(stdout, code));
  });
});
