import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadLabConfig } from '../../lib/config/load.ts';
import { InstallStopped } from '../../lib/install/install.ts';
import { installPrerequisites } from '../../lib/install/prerequisites.ts';
import { networkPrerequisites, prerequisites } from '../../lib/prereqs/prerequisites.ts';
import { putHelmRelease, rig } from './rig.ts';

const NETWORK_LAB = fileURLToPath(new URL('../../examples/network-lab.yaml', import.meta.url));

describe('lab prereqs --apply: only the prerequisites, through lab install steps', () => {
  it("applies GAIE's CRDs and waits until they are established, and nothing of the lab", async () => {
    const { server, deps, lines, config, clock, downloads } = await rig({ crdEstablishMs: 40_000 });
    const start = clock.ms;
    await installPrerequisites(prerequisites(config), deps);
    expect(downloads).toEqual([expect.stringMatching(/gateway-api-inference-extension\/releases\/download/)]);
    expect(new Set(server.applies.map((a) => a.kind))).toEqual(new Set(['CustomResourceDefinition']));
    expect(server.applies.every((a) => a.fieldManager === 'llm-gateway-lab')).toBe(true);
    // The fake serves the kinds only after 40 s: a step that did not wait would end sooner.
    expect(clock.ms - start).toBeGreaterThanOrEqual(40_000);
    expect(lines.join('\n')).toMatch(
      /^cluster: context fake at http:\/\/127\.0\.0\.1:\d+, Kubernetes v1\.36\.0\+fake\ngaie-crds: downloading https:\/\/github\.com\/.*\ngaie-crds: applied 2 object\(s\)\n {2}waiting up to 2m00s for CustomResourceDefinition inferencepools\.inference\.networking\.k8s\.io: /,
    );
    expect(lines.at(-1)).toMatch(/^1 prerequisite\(s\) in place in 0m4\ds$/);
    expect(server.live('Namespace').map((n) => (n.metadata as { name: string }).name)).not.toContain('vllm');
  });

  it('stops naming the CRD that does not become established', async () => {
    const { deps, config } = await rig({ crdEstablishMs: 10 * 60_000 });
    await expect(installPrerequisites(prerequisites(config), deps)).rejects.toThrow(
      /^CustomResourceDefinition inferencepools\.inference\.networking\.k8s\.io did not become ready within 2m00s: .*kubectl describe customresourcedefinition\/inferencepools/,
    );
  });

  it('the AI Gateway arm: Envoy Gateway applied, its Helm charts checked, the restart left to lab install', async () => {
    const arms = { study: { optionalArms: ['ai-gateway'] } };
    const missing = await rig({}, arms);
    const stop = installPrerequisites(prerequisites(missing.config), missing.deps);
    await expect(stop).rejects.toThrow(InstallStopped);
    await expect(stop).rejects.toThrow(
      /helm upgrade --install aieg-crd oci:\/\/docker\.io\/envoyproxy\/ai-gateway-crds-helm/,
    );
    // What came before the stop is applied and stays: the GAIE and Envoy Gateway CRDs.
    expect(missing.server.live('CustomResourceDefinition')).toHaveLength(6);

    const present = await rig({}, arms);
    for (const release of ['aieg-crd', 'aieg'])
      putHelmRelease(present.server, release, 'envoy-ai-gateway-system');
    await installPrerequisites(prerequisites(present.config), present.deps);
    const text = present.lines.join('\n');
    expect(text).toContain('ai-gateway: Helm release aieg is deployed in envoy-ai-gateway-system');
    expect(text).toContain(
      "restart-envoy-gateway: not run here: it belongs right after the lab's 70-ai-gateway-config.yaml (lab install runs it)",
    );
    expect(present.server.applies.some((a) => a.kind === 'Deployment')).toBe(false);
  });

  it('a network cell: its Helm releases checked in order, the first missing one stops with its command', async () => {
    const { config } = loadLabConfig({ file: NETWORK_LAB });
    const cell = config.network.cells.find((c) => c.name === 'mesh');
    if (!cell) throw new Error('examples/network-lab.yaml has no cell mesh');
    const list = networkPrerequisites(config, cell);
    const { server, deps, lines } = await rig();
    putHelmRelease(server, 'istio-base', 'istio-system');
    await expect(installPrerequisites(list, deps)).rejects.toThrow(
      /^Istio .* istiod is not installed: the lab does not run Helm.*\n {2}helm upgrade --install istiod istiod --repo https:\/\/istio-release\.storage\.googleapis\.com\/charts/,
    );
    expect(lines).toContain('istio-base: Helm release istio-base is deployed in istio-system');
    putHelmRelease(server, 'istiod', 'istio-system');
    await installPrerequisites(list, deps);
    expect(server.applies).toEqual([]);
  });
});
