import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { InstallStopped, installLab } from '../../lib/install/install.ts';
import { installPlan } from '../../lib/install/plan.ts';
import { clusterApiFor, loadKubeConfig } from '../../lib/kube/kubeconfig.ts';
import { FakeApiServer, type FakeApiOptions, type FakeNode } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';

const GPU_NODE: FakeNode = { name: 'gpu-0', labels: { 'llm-gateway-lab/node-role': 'gpu', 'node-role.kubernetes.io/control-plane': 'true' }, gpus: 4 };

/** GAIE's release asset carries InferencePool and InferenceObjective. */
function crd(kind: string, plural: string, version: string): string {
  return [
    'apiVersion: apiextensions.k8s.io/v1',
    'kind: CustomResourceDefinition',
    `metadata: { name: ${plural}.inference.networking.k8s.io }`,
    'spec:',
    '  group: inference.networking.k8s.io',
    '  scope: Namespaced',
    `  names: { kind: ${kind}, plural: ${plural} }`,
    `  versions: [{ name: ${version}, served: true, storage: true }]`,
  ].join('\n');
}

const servers: FakeApiServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

async function rig(options: Partial<FakeApiOptions> = {}, config: unknown = {}) {
  const clock = new FakeClock();
  const server = new FakeApiServer({ clock, nodes: [GPU_NODE], runtimeClasses: ['nvidia'], ...options });
  servers.push(server);
  const dir = mkdtempSync(join(tmpdir(), 'lab-install-'));
  const kubeconfig = await server.kubeconfig(dir);
  const api = clusterApiFor(loadKubeConfig({ kubeconfig }));
  const lines: string[] = [];
  const downloads: string[] = [];
  const deps = {
    api,
    clock,
    write: (line: string) => lines.push(line),
    download: async (url: string) => {
      downloads.push(url);
      return `${crd('InferencePool', 'inferencepools', 'v1')}\n---\n${crd('InferenceObjective', 'inferenceobjectives', 'v1alpha2')}\n`;
    },
  };
  return { clock, server, deps, lines, downloads, plan: installPlan(parseLabConfig(config)) };
}

describe('lab install against a cluster that takes time', () => {
  it('installs the default lab in order, waiting for CRDs, the device plugin, the GPUs and the replicas', async () => {
    const { server, deps, lines, plan, clock } = await rig();
    const start = clock.ms;
    await installLab(plan, deps);
    expect(server.live('StatefulSet')).toHaveLength(1);
    expect(clock.ms - start).toBeGreaterThanOrEqual(6 * 60_000);
  });
});
