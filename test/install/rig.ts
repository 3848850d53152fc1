import { onTestFinished } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { InstallPlan } from '../../lib/install/plan.ts';
import type { ClusterApi } from '../../lib/kube/cluster-api.ts';
import { type FakeApiOptions, FakeApiServer, type FakeNode } from '../kube/fake-api-server.ts';
import { FakeClock } from '../runner/fake-servers.ts';
import { tempDir } from '../temp.ts';

/**
 * A fake cluster for the install tests: the fake API server with one 4-GPU node, a kubeconfig for
 * it, the real client, and the release assets the prerequisites download (served from memory).
 */

export const GPU_NODE: FakeNode = {
  name: 'gpu-0',
  labels: { 'llm-gateway-lab/node-role': 'gpu', 'node-role.kubernetes.io/control-plane': 'true' },
  gpus: 4,
};

/** A CRD as a release asset carries it. */
export function crd(
  kind: string,
  plural: string,
  version: string,
  group = 'inference.networking.k8s.io',
): string {
  return [
    'apiVersion: apiextensions.k8s.io/v1',
    'kind: CustomResourceDefinition',
    `metadata: { name: ${plural}.${group} }`,
    'spec:',
    `  group: ${group}`,
    '  scope: Namespaced',
    `  names: { kind: ${kind}, plural: ${plural} }`,
    `  versions: [{ name: ${version}, served: true, storage: true }]`,
  ].join('\n');
}

/** GAIE's release asset carries InferencePool and InferenceObjective. */
export const GAIE_ASSET = `${crd('InferencePool', 'inferencepools', 'v1')}\n---\n${crd('InferenceObjective', 'inferenceobjectives', 'v1alpha2')}\n`;

/** Envoy Gateway's install.yaml: the Gateway API CRDs and its own, the kinds the AI Gateway arm applies. */
export const ENVOY_GATEWAY_ASSET = [
  crd('GatewayClass', 'gatewayclasses', 'v1', 'gateway.networking.k8s.io'),
  crd('Gateway', 'gateways', 'v1', 'gateway.networking.k8s.io'),
  crd('HTTPRoute', 'httproutes', 'v1', 'gateway.networking.k8s.io'),
  crd('EnvoyProxy', 'envoyproxies', 'v1alpha1', 'gateway.envoyproxy.io'),
].join('\n---\n');

/** The release asset behind a prerequisite's URL. */
export function assetOf(url: string): string {
  return url.includes('envoyproxy/gateway') ? ENVOY_GATEWAY_ASSET : GAIE_ASSET;
}

/** Helm's record of a deployed release, as `helm upgrade --install` leaves it (storage driver "secret"). */
export function putHelmRelease(server: FakeApiServer, release: string, namespace: string): void {
  if (!server.live('Namespace').some((n) => (n.metadata as { name: string }).name === namespace)) {
    server.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  }
  server.put({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: `sh.helm.release.v1.${release}.v1`,
      namespace,
      labels: { owner: 'helm', name: release, status: 'deployed', version: '1' },
    },
  });
}

/** A cluster you bring keeps the LLM-gateway lab's results on a claim (lab install requires it). */
function onClaim(config: unknown): unknown {
  const c = (config ?? {}) as Record<string, unknown>;
  if (c.lab === 'network') return config;
  const runner = (c.runner ?? {}) as Record<string, unknown>;
  return { ...c, runner: { ...runner, results: { volume: 'claim', ...(runner.results as object) } } };
}

/** Install plans made so far in this worker, by configuration. */
const plans = new Map<string, InstallPlan>();

/**
 * The install plan of a configuration, each caller its own copy. installPlan synthesizes every
 * chart of the lab (cdk8s), about 0.1 s of CPU each time once warm, and gives the same plan for the
 * same configuration (plain data: a structured clone is equal to it). Loaded on use: a network
 * lab's rig, and test/temp.test.ts's fixtures in a fresh vitest, need not load the charts.
 */
async function planOf(config: LabConfig): Promise<InstallPlan> {
  const key = JSON.stringify(config);
  let plan = plans.get(key);
  if (!plan) {
    plan = (await import('../../lib/install/plan.ts')).installPlan(config);
    plans.set(key, plan);
  }
  return structuredClone(plan);
}

/** What rig() makes besides the fake server. */
export interface RigParts {
  /**
   * The real client (`deps.api`, lib/kube/kubeconfig.ts over @kubernetes/client-node); default
   * true. Without it, `deps.api` throws when used and the client's package is not loaded: most of
   * a fresh worker's import time for a caller that only needs the server (test/temp.test.ts's
   * fixtures, in a vitest of their own).
   */
  readonly client?: boolean;
}

/** The real client for the fake server's kubeconfig, loaded on first use. */
async function realClient(kubeconfig: string): Promise<ClusterApi> {
  const { clusterApiFor, loadKubeConfig } = await import('../../lib/kube/kubeconfig.ts');
  return clusterApiFor(loadKubeConfig({ kubeconfig }));
}

/** A stand-in for the client of a rig made without one: any use says so. */
function noClient(): ClusterApi {
  return new Proxy({} as ClusterApi, {
    get(_, name) {
      throw new Error(`rig() was made with { client: false }: no deps.api.${String(name)}`);
    },
  });
}

/**
 * A fake cluster with the real client on it, for one test: call it inside a test (its server stops
 * when that test ends).
 */
export async function rig(
  options: Partial<FakeApiOptions> = {},
  config: unknown = {},
  { client = true }: RigParts = {},
) {
  const clock = new FakeClock();
  const server = new FakeApiServer({
    clock,
    nodes: [GPU_NODE],
    runtimeClasses: ['nvidia'],
    storageClasses: [{ name: 'gp3', default: true, waitForFirstConsumer: true }],
    ...options,
  });
  // Stopped when the calling test ends. Registered per call, not as an afterEach at this module's
  // top: with isolate: false a worker evaluates this module once, for its first file only
  // (docs/testing.md). The kubeconfig's folder goes with the file's other tempDir() folders.
  onTestFinished(() => server.stop());
  const kubeconfig = await server.kubeconfig(tempDir('lab-install-'));
  const api = client ? await realClient(kubeconfig) : noClient();
  const lines: string[] = [];
  const downloads: string[] = [];
  const deps = {
    api,
    clock,
    write: (line: string) => lines.push(line),
    download: async (url: string) => {
      downloads.push(url);
      return assetOf(url);
    },
  };
  const parsed = parseLabConfig(onClaim(config));
  return {
    clock,
    server,
    deps,
    lines,
    downloads,
    kubeconfig,
    config: parsed,
    plan: parsed.lab === 'network' ? undefined : await planOf(parsed),
  };
}
