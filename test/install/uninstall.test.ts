import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { installLab } from '../../lib/install/install.ts';
import { installPlan } from '../../lib/install/plan.ts';
import { uninstallLab } from '../../lib/install/uninstall.ts';
import { rig } from './rig.ts';

describe('lab uninstall', () => {
  it("removes what lab install and the runner created, waits until it is gone, and leaves what is not the lab's", async () => {
    // An Immediate default class: the results claim binds during the install.
    const { server, deps, lines, plan } = await rig({ storageClasses: [{ name: 'gp3', default: true }] });
    if (!plan) throw new Error('the LLM-gateway lab has an install plan');
    await installLab(plan, deps);
    // The runner's Job (labelled) and a user's own Service in another namespace under a lab name.
    server.put({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: 'bench-1',
        namespace: 'vllm',
        labels: { 'app.kubernetes.io/part-of': 'llm-gateway-lab' },
      },
    });
    server.put({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'vllm-qwen3-epp-auth-other' },
    });
    const before = server.live().length;

    lines.length = 0;
    await uninstallLab(plan, 'vllm', deps);
    // The study's results stay, and with them the namespace, until asked for.
    expect(server.live('PersistentVolumeClaim')).toHaveLength(1);
    expect(lines.join('\n')).toMatch(
      /left PersistentVolumeClaim vllm\/lab-results and namespace vllm: the study's results/,
    );
    await uninstallLab(plan, 'vllm', { ...deps, deleteResults: true });

    const left = server.live().map((o) => `${o.kind}/${(o.metadata as { name: string }).name}`);
    expect(
      left.filter((name) =>
        /qwen3|vllm-router|envoy-epp|nvidia-device-plugin|bench-1|^Namespace\/vllm$/.test(name),
      ),
    ).toEqual(['ClusterRole/vllm-qwen3-epp-auth-other']);
    expect(left).toContain('CustomResourceDefinition/inferencepools.inference.networking.k8s.io');
    expect(left).toContain('Namespace/kube-system');
    expect(before - left.length).toBeGreaterThan(20);
    const text = lines.join('\n');
    expect(text).toMatch(/removed \d+ object\(s\)/);
    expect(text).toMatch(
      /left Gateway API Inference Extension v1\.0\.1 CRDs .*kubectl delete -f https:\/\/github\.com\//,
    );
  });

  it('deletes nothing it did not label: a same-named object the user made is named and kept', async () => {
    const { server, deps } = await rig({ nodes: [] });
    server.put({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'vllm' } });
    server.put({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'qwen3-epp', namespace: 'vllm' },
      spec: {},
    });
    const lines: string[] = [];
    await uninstallLab(installPlan(parseLabConfig({})), 'vllm', { ...deps, write: (l) => lines.push(l) });
    expect(server.live('Deployment')).toHaveLength(1);
    expect(server.live('Namespace').map((n) => (n.metadata as { name: string }).name)).toContain('vllm');
    expect(lines.join('\n')).toMatch(
      /left Deployment vllm\/qwen3-epp: it exists but does not carry app\.kubernetes\.io\/part-of=llm-gateway-lab/,
    );
  });
});
