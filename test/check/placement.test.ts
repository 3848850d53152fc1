import { describe, expect, it } from 'vitest';
import { PLACEMENT } from '../../lib/check/violation.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { labPlacement } from '../../lib/config/placement.ts';
import { podSpec } from './fixtures.ts';
import { expectOnly, STS, violationsAfter } from './helpers.ts';

const ROLE = 'llm-gateway-lab/node-role';
/** The placement of a cluster with a CPU agent: front ends on the CPU node. */
const withCpuNode = {
  placement: labPlacement(
    parseLabConfig({
      instance: { readyTimeoutMinutes: 60 },
      cluster: { agents: [{ name: 'cpu', role: 'cpu', instanceType: 'c7i.4xlarge' }] },
    }),
  ),
  clusterRoles: ['gpu', 'cpu'] as const,
};

describe('placement rules (issue 17)', () => {
  it('flags a replica that does not select the GPU nodes', () => {
    const violations = violationsAfter((objects) => {
      delete podSpec(objects, 'StatefulSet', 'qwen3').nodeSelector;
    });
    expectOnly(
      violations,
      STS,
      'spec.template.spec.nodeSelector',
      PLACEMENT,
      'is not set; a vLLM replica must select {"llm-gateway-lab/node-role":"gpu"} (placement.gpuNodes.nodeSelector)',
    );
  });

  it('flags a benchmark client sent to a CPU node, citing vLLM issue 23967', () => {
    const violations = violationsAfter((objects) => {
      podSpec(objects, 'Job', 'bench-epp').nodeSelector = { [ROLE]: 'cpu' };
    });
    // Once as a client off its GPU node, once as a role the one-host cluster has no node for.
    expect(violations.map((v) => [v.object, v.lesson, v.field])).toEqual([
      ['Job vllm/bench-epp', PLACEMENT, 'spec.template.spec.nodeSelector'],
      ['Job vllm/bench-epp', PLACEMENT, `spec.template.spec.nodeSelector["${ROLE}"]`],
    ]);
    expect(violations[0].message).toBe(
      'selects llm-gateway-lab/node-role: cpu; the benchmark client must run on a GPU node: `vllm bench serve` exits with "Failed to infer device type" where no GPU is visible (https://github.com/vllm-project/vllm/issues/23967)',
    );
    expect(violations[1].message).toBe(
      'is "cpu" but the cluster has no CPU node (it has GPU): the pod would stay Pending',
    );
  });

  it('flags front ends left on the GPU node when the configuration puts them on the CPU node', () => {
    const violations = violationsAfter(() => {}, withCpuNode);
    expect(violations.map((v) => v.object)).toEqual([
      'Deployment vllm/router',
      'Deployment vllm/picker',
      'Deployment vllm/envoy',
    ]);
    expect(violations[0]).toMatchObject({
      lesson: PLACEMENT,
      field: 'spec.template.spec.nodeSelector',
      message:
        'is {"llm-gateway-lab/node-role":"gpu"}; a front end must select {"llm-gateway-lab/node-role":"cpu"} (placement.cpuNodes.nodeSelector): placement.frontEnds puts it on CPU nodes, off the CPUs of the model servers',
    });
    const moved = violationsAfter((objects) => {
      for (const name of ['router', 'picker', 'envoy']) {
        podSpec(objects, 'Deployment', name).nodeSelector = { [ROLE]: 'cpu' };
      }
    }, withCpuNode);
    expect(moved).toEqual([]);
  });

  it('keeps an EPP that reads the model cache on a GPU node', () => {
    const violations = violationsAfter((objects) => {
      const picker = podSpec(objects, 'Deployment', 'picker');
      picker.nodeSelector = { [ROLE]: 'cpu' };
      (picker.volumes as unknown[]).push({ name: 'model-cache', hostPath: { path: '/var/lib/lab/models' } });
      for (const name of ['router', 'envoy'])
        podSpec(objects, 'Deployment', name).nodeSelector = { [ROLE]: 'cpu' };
    }, withCpuNode);
    expectOnly(
      violations,
      'Deployment vllm/picker',
      'spec.template.spec.nodeSelector',
      PLACEMENT,
      'a front end that reads the model cache must select {"llm-gateway-lab/node-role":"gpu"} (placement.gpuNodes.nodeSelector): only the GPU nodes have the model cache',
    );
  });

  it('flags a node role the lab does not know', () => {
    const violations = violationsAfter((objects) => {
      podSpec(objects, 'DaemonSet', 'nvidia-device-plugin').nodeSelector = { [ROLE]: 'tpu' };
    });
    expectOnly(
      violations,
      'DaemonSet kube-system/nvidia-device-plugin',
      `spec.template.spec.nodeSelector["${ROLE}"]`,
      PLACEMENT,
      'is "tpu"; allowed: gpu, cpu',
    );
  });

  it('judges the runtime class against the configured one', () => {
    // EKS GPU AMIs run every pod with the NVIDIA runtime: no RuntimeClass configured, none required.
    const eks = labPlacement(parseLabConfig({ placement: { gpuNodes: { runtimeClassName: null } } }));
    const options = { placement: eks, clusterRoles: ['gpu'] as const };
    expect(
      violationsAfter((objects) => {
        delete podSpec(objects, 'StatefulSet', 'qwen3').runtimeClassName;
      }, options),
    ).toEqual([]);
    const custom = labPlacement(
      parseLabConfig({ placement: { gpuNodes: { runtimeClassName: 'nvidia-cdi' } } }),
    );
    const violations = violationsAfter(() => {}, { placement: custom, clusterRoles: ['gpu'] as const });
    expect(violations.map((v) => [v.object, v.lesson])).toEqual([
      ['StatefulSet vllm/qwen3', 1],
      ['DaemonSet kube-system/nvidia-device-plugin', 1],
      ['Job vllm/bench-epp', 1],
      ['Job vllm/bench-bound-p8', 1],
    ]);
    expect(violations[0].message).toMatch(/^is "nvidia"; a vLLM replica needs "nvidia-cdi": /);
  });
});
