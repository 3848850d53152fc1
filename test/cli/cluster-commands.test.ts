import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
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
