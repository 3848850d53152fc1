import { describe, expect, test } from 'vitest';
import { runLab } from '../../../lib/cli/program.ts';
import { parseLabConfig } from '../../../lib/config/load.ts';
import { installCommand, networkPrerequisites } from '../../../lib/prereqs/prerequisites.ts';
import { captureOutput } from '../../cli/capture.ts';

const config = parseLabConfig({ lab: 'network' });
const cell = (name: string) => {
  const found = config.network.cells.find((c) => c.name === name);
  if (!found) throw new Error(name);
  return found;
};

describe("the network lab's Helm prerequisites", () => {
  test('a kube-proxy cell without a mesh needs none', () => {
    expect(networkPrerequisites(config, cell('dp-iptables')).prerequisites).toEqual([]);
  });

  test("the mesh cell installs Istio base and istiod 1.31.1 from Istio's repository, waiting for each", () => {
    const list = networkPrerequisites(config, cell('mesh')).prerequisites;
    expect(list.map(installCommand)).toEqual([
      'helm upgrade --install istio-base base --repo https://istio-release.storage.googleapis.com/charts --version 1.31.1 --namespace istio-system --create-namespace --wait',
      'helm upgrade --install istiod istiod --repo https://istio-release.storage.googleapis.com/charts --version 1.31.1 --namespace istio-system --create-namespace --wait',
    ]);
  });

  test('the Cilium cell installs Cilium 1.20.2 with its values file', () => {
    const [cilium] = networkPrerequisites(config, cell('dp-cilium')).prerequisites;
    expect(installCommand(cilium)).toBe(
      'helm upgrade --install cilium cilium --repo https://helm.cilium.io --version 1.20.2 --namespace kube-system --create-namespace --values helm-values/cilium.yaml --wait',
    );
  });

  test('lab prereqs prints every cell, the values file and the placeholder to fill', async () => {
    const { value, stdout } = await captureOutput(() =>
      runLab(['--config', 'examples/network-lab.yaml', 'prereqs']),
    );
    expect(value).toBe(0);
    expect(stdout).toContain(
      '# ---- cell dp-iptables: on its own cluster, in dist/dp-iptables/ ----\n# (nothing to install first)',
    );
    expect(stdout).toContain("cat >helm-values/cilium.yaml <<'VALUES'\nkubeProxyReplacement: true\n");
    expect(stdout).toContain('# replace __LAB_NODE_PRIVATE_IP__ in helm-values/cilium.yaml');
  });

  test('lab prereqs --cell names an unknown cell and the cells there are', async () => {
    const { value, stderr } = await captureOutput(() =>
      runLab(['--config', 'examples/network-lab.yaml', 'prereqs', '--cell', 'nope', '--json']),
    );
    expect(value).toBe(1);
    expect(stderr).toContain(
      '--cell nope: no such cell in network.cells (cells: mesh, dp-iptables, dp-cilium)',
    );
  });
});
