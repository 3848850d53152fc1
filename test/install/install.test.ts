import { describe, expect, it } from 'vitest';
import type { InstallPlan } from '../../lib/install/install.ts';
import { InstallStopped, installLab } from '../../lib/install/install.ts';
import { rig as anyRig, GPU_NODE, putHelmRelease } from './rig.ts';

async function rig(...args: Parameters<typeof anyRig>) {
  const made = await anyRig(...args);
  return { ...made, plan: made.plan as InstallPlan };
}

/**
 * One whole install on a cluster, made by the first test that reads it and read by the others (a
 * whole install is most of this file's CPU): the fake cluster's state and the install's lines stay
 * readable after the first test has stopped its server.
 */
function sharedInstall(make: () => ReturnType<typeof rig>) {
  let installed: Promise<Awaited<ReturnType<typeof rig>> & { tookMs: number }> | undefined;
  return () => {
    installed ??= (async () => {
      const made = await make();
      const start = made.clock.ms;
      await installLab(made.plan, made.deps);
      return { ...made, tookMs: made.clock.ms - start };
    })();
    return installed;
  };
}

/** The default lab on the default cluster. */
const defaultInstall = sharedInstall(() => rig());
/** The default lab on a cluster whose GPU node already advertises its GPUs. */
const pluginRunningInstall = sharedInstall(() => rig({ nodes: [{ ...GPU_NODE, pluginRunning: true }] }));

describe('lab install against a cluster that takes time', () => {
  it('installs the default lab in order, waiting for CRDs, the device plugin, the GPUs and the replicas', async () => {
    const { server, lines, tookMs } = await defaultInstall();
    expect(server.live('StatefulSet')).toHaveLength(1);
    expect(tookMs).toBeGreaterThanOrEqual(6 * 60_000);
    const at = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line));
    // Each step after what it needs: CRDs established, the plugin up, the GPUs counted, the replicas loaded.
    expect(at(/inferencepools.* ready after/)).toBeLessThan(at(/^00-namespace: applied/));
    expect(at(/^10-gpu: applied/)).toBeLessThan(at(/4 nvidia\.com\/gpu allocatable/));
    expect(at(/4 nvidia\.com\/gpu allocatable/)).toBeLessThan(at(/^20-model-servers: applied/));
    expect(at(/StatefulSet vllm\/qwen3 ready after 6m00s/)).toBeLessThan(at(/^30-baseline: applied/));
    expect(lines.at(-1)).toMatch(/^installed in \d+m\d\ds$/);
  });
});

describe('lab install stops before applying anything when the cluster cannot run the lab', () => {
  it('names each refused permission and applies nothing', async () => {
    const { server, deps, plan } = await rig({
      denied: ['patch clusterroles.rbac.authorization.k8s.io', 'patch statefulsets.apps'],
    });
    const stop = installLab(plan, deps);
    await expect(stop).rejects.toThrow(InstallStopped);
    await expect(stop).rejects.toThrow(
      /may not: patch statefulsets\.apps in vllm; patch clusterroles\.rbac\.authorization\.k8s\.io/,
    );
    expect(server.applies).toEqual([]);
  });

  it("names the pods' subresources lab status, results and logs read, with their namespace", async () => {
    // Without these the install would pass and the next lab status stop on a 403.
    const { server, deps, plan } = await rig({ denied: ['get pods/proxy', 'get pods/log'] });
    const stop = installLab(plan, deps);
    await expect(stop).rejects.toThrow(/may not: get pods\/proxy in vllm; get pods\/log in vllm\n/);
    expect(server.applies).toEqual([]);
    expect(server.live('Deployment')).toEqual([]);
  });

  it('fails on GPU nodes that match no selector, with the label to set', async () => {
    const { server, deps, plan } = await rig({
      nodes: [{ ...GPU_NODE, labels: { 'eks.amazonaws.com/nodegroup': 'gpu-l4' } }],
    });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /0 nvidia\.com\/gpu allocatable on 0 node\(s\)[\s\S]*kubectl label node <node> llm-gateway-lab\/node-role=gpu/,
    );
    expect(server.applies).toEqual([]);
  });

  it('fails on too few advertised GPUs for the replicas', async () => {
    const { deps, plan } = await rig({ nodes: [{ ...GPU_NODE, gpus: 1, pluginRunning: true }] });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /1 nvidia\.com\/gpu allocatable on 1 node\(s\).*request 2/,
    );
  });

  it('fails on a RuntimeClass the cluster does not have, naming the EKS setting', async () => {
    const { deps, plan } = await rig({ runtimeClasses: [] });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /RuntimeClass nvidia .* does not exist[\s\S]*runtimeClassName: null/,
    );
  });
});

describe('lab install and the results claim', () => {
  it('refuses the node folder: results must not depend on a labelled node', async () => {
    const { server, deps, plan } = await rig({}, { runner: { results: { volume: 'node-folder' } } });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /runner\.results\.volume is node-folder[\s\S]*fix: set runner\.results\.volume: claim/,
    );
    expect(server.applies).toEqual([]);
  });

  it('names the StorageClass that does not exist, and the ones that do', async () => {
    const { deps, plan } = await rig({}, { runner: { results: { storageClassName: 'fast-nvme' } } });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /StorageClass fast-nvme \(runner\.results\.storageClassName\) does not exist \(the cluster has: gp3 \(default\)\)/,
    );
  });

  it('fails without a default StorageClass when the setting names none, with the annotation to set', async () => {
    const { deps, plan } = await rig({ storageClasses: [{ name: 'standard' }] });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /no default StorageClass \(it has: standard\)[\s\S]*storageclass\.kubernetes\.io\/is-default-class=true/,
    );
  });

  it('binds the claim once its server is scheduled, before the GPU charts', async () => {
    const { server, lines } = await defaultInstall();
    const at = (pattern: RegExp) => lines.findIndex((line) => pattern.test(line));
    expect(lines.join('\n')).toMatch(
      /pass {2}a PersistentVolumeClaim of 20Gi from the default StorageClass gp3/,
    );
    expect(at(/PersistentVolumeClaim vllm\/lab-results ready after/)).toBeLessThan(at(/^10-gpu: applied/));
    expect(at(/Deployment vllm\/lab-results ready after/)).toBeLessThan(at(/^10-gpu: applied/));
    const claim = server.live('PersistentVolumeClaim')[0] as { spec: { storageClassName: string } };
    expect(claim.spec.storageClassName).toBe('gp3');
  });

  it('stops on a claim that stays Pending, naming its StorageClass and the fix', async () => {
    const { deps, plan } = await rig({ storageClasses: [{ name: 'gp3', default: true, provisions: false }] });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /PersistentVolumeClaim vllm\/lab-results did not become ready within 5m00s: Pending, no volume bound yet \(StorageClass gp3\)\. No volume was provisioned .*EBS CSI driver/,
    );
  });
});

describe('lab install on a cluster that is partly there', () => {
  it('skips the device plugin when the GPUs are already advertised', async () => {
    const { server, lines } = await pluginRunningInstall();
    expect(server.live('DaemonSet')).toEqual([]);
    expect(lines.join('\n')).toMatch(/10-gpu: skipped: the GPU nodes already advertise nvidia\.com\/gpu/);
  });

  it('applies every object server-side with the lab field manager', async () => {
    const { server } = await pluginRunningInstall();
    expect(server.applies.length).toBeGreaterThan(20);
    expect(new Set(server.applies.map((a) => `${a.fieldManager} force=${a.force}`))).toEqual(
      new Set(['llm-gateway-lab force=true']),
    );
  });

  it('stops naming the replicas when they do not become ready within 30 minutes', async () => {
    const { deps, plan } = await rig({
      nodes: [{ ...GPU_NODE, pluginRunning: true }],
      modelLoadMs: 45 * 60_000,
    });
    await expect(installLab(plan, deps)).rejects.toThrow(
      /StatefulSet vllm\/qwen3 did not become ready within 30m00s: 0 of 2 pods ready\. See why with: kubectl -n vllm describe statefulset\/qwen3/,
    );
  });

  it('stops with the Helm command when a Helm prerequisite is missing, and goes on once it is there', async () => {
    const config = { study: { optionalArms: ['ai-gateway'] } };
    const missing = await rig({}, config);
    await expect(installLab(missing.plan, missing.deps)).rejects.toThrow(
      /Envoy AI Gateway .* CRDs is not installed: the lab does not run Helm[\s\S]*helm upgrade --install aieg-crd oci:\/\/docker\.io\/envoyproxy\/ai-gateway-crds-helm/,
    );
    const present = await rig({}, config);
    for (const release of ['aieg-crd', 'aieg']) {
      putHelmRelease(present.server, release, 'envoy-ai-gateway-system');
    }
    // Envoy Gateway's controller, which the after-apply step restarts.
    present.server.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'envoy-gateway-system' } });
    present.server.put({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'envoy-gateway', namespace: 'envoy-gateway-system' },
      spec: { replicas: 1, template: { spec: { containers: [{ name: 'envoy-gateway' }] } } },
    });
    await installLab(present.plan, present.deps);
    expect(present.lines.join('\n')).toMatch(
      /Restart Envoy Gateway: restarting Deployment envoy-gateway-system\/envoy-gateway/,
    );
  });
});

describe('the fake API server has the physics lab install relies on', () => {
  it("serves a CRD's kind only once the CRD is established", async () => {
    const { deps, clock } = await rig();
    const [pools] = (await deps.download('x')).split('---');
    const { objectsOfYaml } = await import('../../lib/install/steps.ts');
    await deps.api.apply(objectsOfYaml(pools, 'x')[0]);
    await deps.api.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'vllm' } });
    const pool = {
      apiVersion: 'inference.networking.k8s.io/v1',
      kind: 'InferencePool',
      metadata: { name: 'p', namespace: 'vllm' },
      spec: {},
    };
    await expect(deps.api.apply(pool)).rejects.toMatchObject({ kind: 'unknown-kind' });
    await clock.sleep(2_000);
    await expect(deps.api.apply(pool)).resolves.toMatchObject({ kind: 'InferencePool' });
  });
});
