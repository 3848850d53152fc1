import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { assetOf, GPU_NODE } from '../install/rig.ts';
import { FakeApiServer } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { captureOutput } from './capture.ts';

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('lab install and lab uninstall on the command line', () => {
  it('a missing kubeconfig is one line on stderr and exit 1', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const run = await captureOutput(() => runLab(['install', '--kubeconfig', '/nope/kubeconfig']));
    expect(run.value).toBe(1);
    expect(run.stderr.trim()).toBe('lab install: kubeconfig /nope/kubeconfig does not exist');
    expect(run.stdout).toBe('');
  });

  it('a cluster without GPU nodes is named with the fix, nothing applied, exit 1', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const server = new FakeApiServer({
      clock: new FakeClock(),
      nodes: [{ name: 'cpu-0', labels: {}, gpus: 0 }],
      runtimeClasses: ['nvidia'],
    });
    try {
      const kubeconfig = await server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-install-')));
      const run = await captureOutput(() =>
        runLab(['install', '--kubeconfig', kubeconfig, '--context', 'fake']),
      );
      expect(run.value).toBe(1);
      expect(run.stdout).toMatch(
        /^cluster: context fake at http:\/\/127\.0\.0\.1:\d+, Kubernetes v1\.36\.0\+fake/,
      );
      expect(run.stderr).toMatch(
        /^lab install: the cluster cannot run this configuration .*nothing was applied/,
      );
      expect(run.stderr).toMatch(/fix: label the GPU nodes/);
      expect(server.applies).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it('an unknown context names the contexts there are', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const server = new FakeApiServer({ clock: new FakeClock(), nodes: [] });
    try {
      const kubeconfig = await server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-install-')));
      const run = await captureOutput(() =>
        runLab(['uninstall', '--kubeconfig', kubeconfig, '--context', 'prod']),
      );
      expect(run.value).toBe(1);
      expect(run.stderr.trim()).toMatch(
        /^lab uninstall: --context prod: no such context in .* \(contexts: fake\)$/,
      );
    } finally {
      await server.stop();
    }
  });
});

/** stderr without doctor's progress lines (`lab doctor: reading ... ...`). */
function withoutProgress(stderr: string): string {
  return stderr
    .split(/(?<=\n)/)
    .filter((line) => !line.endsWith(' ...\n'))
    .join('');
}

/** A kubeconfig whose server nobody listens on: a port that was just free. */
async function unreachableKubeconfig(dir: string): Promise<string> {
  const { createServer } = await import('node:net');
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'current-context: gone',
      `clusters: [{ name: gone, cluster: { server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true } }]`,
      'users: [{ name: tester, user: { token: t } }]',
      'contexts: [{ name: gone, context: { cluster: gone, user: tester } }]',
    ].join('\n'),
  );
  return file;
}

describe('every command that talks to a cluster: one clear line and exit 1', () => {
  const commands = [['install'], ['uninstall'], ['prereqs', '--apply'], ['doctor']];

  for (const command of commands) {
    const name = command[0];
    it(`lab ${command.join(' ')}: a kubeconfig that is not YAML`, async () => {
      vi.stubEnv('LAB_CONFIG', undefined);
      const file = join(mkdtempSync(join(tmpdir(), 'lab-cli-bad-')), 'kubeconfig');
      writeFileSync(file, 'clusters: [unclosed\n');
      const run = await captureOutput(() => runLab([...command, '--kubeconfig', file]));
      expect(run.value).toBe(1);
      expect(withoutProgress(run.stderr)).toMatch(
        new RegExp(`^lab ${name}: kubeconfig ${file} cannot be read: [^\\n]+\\n$`),
      );
    });

    it(`lab ${command.join(' ')}: a server that does not answer`, async () => {
      vi.stubEnv('LAB_CONFIG', undefined);
      const file = await unreachableKubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-gone-')));
      const run = await captureOutput(() => runLab([...command, '--kubeconfig', file]));
      expect(run.value).toBe(1);
      expect(withoutProgress(run.stderr)).toMatch(
        new RegExp(
          `^lab ${name}: context gone \\(http://127\\.0\\.0\\.1:\\d+\\) did not answer [^\\n]*ECONNREFUSED[^\\n]*Check the cluster is up and reachable from here[^\\n]*\\n$`,
        ),
      );
    });
  }

  it('lab prereqs --apply: RBAC that refuses the CRDs names the object and the refusal', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    vi.stubGlobal('fetch', async (url: string) => new Response(assetOf(url)));
    const server = new FakeApiServer({
      clock: new FakeClock(),
      nodes: [],
      crdEstablishMs: 0,
      denied: ['patch customresourcedefinitions.apiextensions.k8s.io'],
    });
    try {
      const kubeconfig = await server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-rbac-')));
      const run = await captureOutput(() => runLab(['prereqs', '--apply', '--kubeconfig', kubeconfig]));
      expect(run.value).toBe(1);
      expect(run.stderr).toMatch(
        /^lab prereqs: gaie-crds: applying CustomResourceDefinition inferencepools\.inference\.networking\.k8s\.io failed: apply CustomResourceDefinition inferencepools\.inference\.networking\.k8s\.io is forbidden on context fake \(http:\/\/127\.0\.0\.1:\d+\): customresourcedefinitions\.apiextensions\.k8s\.io "inferencepools\.inference\.networking\.k8s\.io" is forbidden: User "tester" cannot patch resource "customresourcedefinitions" in API group "apiextensions\.k8s\.io" at the cluster scope\n$/,
      );
      expect(server.live('CustomResourceDefinition')).toEqual([]);
    } finally {
      await server.stop();
      vi.unstubAllGlobals();
    }
  });

  it('lab install: RBAC that refuses a kind stops before applying, naming it', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const server = new FakeApiServer({
      clock: new FakeClock(),
      nodes: [{ ...GPU_NODE, pluginRunning: true }],
      runtimeClasses: ['nvidia'],
      storageClasses: [{ name: 'gp3', default: true, waitForFirstConsumer: true }],
      denied: ['patch clusterroles.rbac.authorization.k8s.io'],
    });
    try {
      const kubeconfig = await server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-rbac-')));
      // A cluster you bring keeps the results on a claim: only RBAC fails here.
      const config = join(mkdtempSync(join(tmpdir(), 'lab-cli-rbac-config-')), 'lab.yaml');
      writeFileSync(config, 'runner:\n  results:\n    volume: claim\n');
      const run = await captureOutput(() =>
        runLab(['install', '--kubeconfig', kubeconfig, '--config', config]),
      );
      expect(run.value).toBe(1);
      expect(run.stderr.split('\n')[0]).toBe(
        'lab install: the cluster cannot run this configuration (1 check(s) failed, nothing was applied):',
      );
      expect(run.stderr).toContain(
        'the kubeconfig user may not: patch clusterroles.rbac.authorization.k8s.io',
      );
      expect(server.applies).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});
