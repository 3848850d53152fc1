import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runLab } from '../../lib/cli/program.ts';
import { assetOf, putHelmRelease } from '../install/rig.ts';
import { FakeApiServer } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { captureOutput } from './capture.ts';

const NETWORK_LAB = fileURLToPath(new URL('../../examples/network-lab.yaml', import.meta.url));

let server: FakeApiServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
  vi.unstubAllEnvs();
  vi.unstubAllGlobals();
});

/** A cluster whose CRDs are established at once: the command runs on the real clock. */
async function cluster(): Promise<string> {
  server = new FakeApiServer({ clock: new FakeClock(), nodes: [], crdEstablishMs: 0 });
  return server.kubeconfig(mkdtempSync(join(tmpdir(), 'lab-cli-prereqs-')));
}

describe('lab prereqs --apply on the command line', () => {
  it("applies the default lab's prerequisites to the kubeconfig's cluster and exits 0", async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const urls: string[] = [];
    // Release downloads go through fetch; the API client does not (client-node uses node-fetch).
    vi.stubGlobal('fetch', async (url: string) => {
      urls.push(url);
      return new Response(assetOf(url));
    });
    const kubeconfig = await cluster();
    const run = await captureOutput(() => runLab(['prereqs', '--apply', '--kubeconfig', kubeconfig]));
    expect(run.stderr).toBe('');
    expect(run.value).toBe(0);
    expect(urls).toHaveLength(1);
    expect(run.stdout).toContain('gaie-crds: applied 2 object(s)');
    expect(server?.live('CustomResourceDefinition')).toHaveLength(2);
    expect(server?.applies.map((a) => a.kind)).toEqual([
      'CustomResourceDefinition',
      'CustomResourceDefinition',
    ]);
  });

  it('--kubeconfig without --apply is refused with what to do', async () => {
    vi.stubEnv('LAB_CONFIG', undefined);
    const run = await captureOutput(() => runLab(['prereqs', '--kubeconfig', '/any']));
    expect(run.value).toBe(1);
    expect(run.stderr).toBe(
      'lab prereqs: --kubeconfig and --context choose the cluster for --apply: add --apply, or leave them out to print the commands\n',
    );
  });

  it('the network lab needs --cell: one kubeconfig context is one cell', async () => {
    vi.stubEnv('LAB_CONFIG', NETWORK_LAB);
    const kubeconfig = await cluster();
    const run = await captureOutput(() => runLab(['prereqs', '--apply', '--kubeconfig', kubeconfig]));
    expect(run.value).toBe(1);
    expect(run.stderr).toBe(
      "lab prereqs: --apply installs one cell's prerequisites on that cell's cluster: add --cell <name> (cells: mesh, dp-iptables, dp-cilium)\n",
    );
    expect(server?.requests).toEqual([]);
  });

  it("a network cell's missing Helm release stops with its command and exit 1; present, exit 0", async () => {
    vi.stubEnv('LAB_CONFIG', NETWORK_LAB);
    const kubeconfig = await cluster();
    const args = ['prereqs', '--apply', '--cell', 'dp-cilium', '--kubeconfig', kubeconfig];
    const missing = await captureOutput(() => runLab(args));
    expect(missing.value).toBe(1);
    expect(missing.stderr).toMatch(
      /^lab prereqs: Cilium .* is not installed: the lab does not run Helm\. .*\n {2}helm upgrade --install cilium cilium --repo https:\/\/helm\.cilium\.io .*--values helm-values\/cilium\.yaml --wait\n$/,
    );
    putHelmRelease(server as FakeApiServer, 'cilium', 'kube-system');
    const present = await captureOutput(() => runLab(args));
    expect(present.value).toBe(0);
    expect(present.stdout).toContain('cilium: Helm release cilium is deployed in kube-system');
  });
});
