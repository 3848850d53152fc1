import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterApiFor, kubeconfigFiles, loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { FakeApiServer } from './fake-api-server.ts';

const dir = () => mkdtempSync(join(tmpdir(), 'lab-kubeconfig-'));

function kubeconfig(server: string, token = 't', context = 'lab'): string {
  const file = join(dir(), 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `current-context: ${context}`,
      `clusters: [{ name: c, cluster: { server: "${server}", insecure-skip-tls-verify: true } }]`,
      `users: [{ name: u, user: { token: ${token} } }]`,
      `contexts: [{ name: ${context}, context: { cluster: c, user: u } }, { name: other, context: { cluster: c, user: u } }]`,
    ].join('\n'),
  );
  return file;
}

let server: FakeApiServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

describe('the kubeconfig, as kubectl finds it', () => {
  it('takes --kubeconfig first, then every file of KUBECONFIG, then ~/.kube/config, else none', () => {
    expect(kubeconfigFiles({ kubeconfig: '/a' }, { KUBECONFIG: '/b' }, dir())).toEqual(['/a']);
    expect(kubeconfigFiles({}, { KUBECONFIG: '/b:/c' }, dir())).toEqual(['/b', '/c']);
    expect(kubeconfigFiles({}, {}, dir())).toEqual([]);
  });

  it('says how to get one when there is none', () => {
    expect(() => loadKubeConfig({}, {}, dir())).toThrow(
      /no kubeconfig: pass --kubeconfig <file>, set KUBECONFIG/,
    );
  });

  it('names a missing file and an unknown context with the contexts there are', () => {
    expect(() => loadKubeConfig({ kubeconfig: '/nope/config' })).toThrow(
      'kubeconfig /nope/config does not exist',
    );
    expect(() => loadKubeConfig({ kubeconfig: kubeconfig('https://x'), context: 'prod' })).toThrow(
      /--context prod: no such context in .* \(contexts: lab, other\)/,
    );
    expect(
      loadKubeConfig({ kubeconfig: kubeconfig('https://x'), context: 'other' }).getCurrentContext(),
    ).toBe('other');
  });

  it('says the server is unreachable in one line', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const api = clusterApiFor(loadKubeConfig({ kubeconfig: kubeconfig(`http://127.0.0.1:${port}`) }));
    await expect(api.version()).rejects.toMatchObject({ kind: 'unreachable' });
    await expect(api.version()).rejects.toThrow(/did not answer GET \/version: .*Check the cluster is up/);
  });

  it('says the credentials were refused', async () => {
    server = new FakeApiServer({ clock: new FakeClock(), nodes: [] });
    const url = await server.start();
    const api = clusterApiFor(loadKubeConfig({ kubeconfig: kubeconfig(url, 'wrong-token') }));
    await expect(api.list('v1', 'Node')).rejects.toMatchObject({ kind: 'unauthorized' });
  });

  it('reads, lists and removes through the same client, absent objects as undefined', async () => {
    server = new FakeApiServer({ clock: new FakeClock(), nodes: [] });
    const api = clusterApiFor(
      loadKubeConfig({ kubeconfig: kubeconfig(await server.start(), 'lab-test-token') }),
    );
    expect(
      await api.read({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', namespace: 'default' }),
    ).toBeUndefined();
    await api.apply({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'x', namespace: 'default', labels: { a: 'b' } },
    });
    expect(
      (await api.list('v1', 'ConfigMap', { namespace: 'default', labelSelector: 'a=b' })).map(
        (o) => o.metadata.name,
      ),
    ).toEqual(['x']);
    expect(await api.remove({ apiVersion: 'v1', kind: 'ConfigMap', name: 'x', namespace: 'default' })).toBe(
      'deleted',
    );
    expect(await api.remove({ apiVersion: 'v1', kind: 'ConfigMap', name: 'y', namespace: 'default' })).toBe(
      'absent',
    );
  });
});
