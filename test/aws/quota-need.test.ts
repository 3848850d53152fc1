import { describe, expect, it } from 'vitest';
import { parseLaunchRequest } from '../../lib/aws/capacity-launch/handler.ts';
import { stopMessage } from '../../lib/aws/capacity-launch/launch.ts';
import { stackQuotaNeeds } from '../../lib/aws/lab-stack.ts';
import { loadLabConfig } from '../../lib/config/load.ts';
import { CILIUM_CELL, networkLab, nftablesCell } from './network-configs.ts';

/** The stack's total need per quota bucket, as the launch's quota stop names it (no synthesis). */

const STANDARD = 'Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances';
const G_AND_VT = 'Running On-Demand G and VT instances';

describe('the stack needs per quota', () => {
  it("network lab: each cell at its own type, in its own type family's bucket", () => {
    const config = networkLab(CILIUM_CELL, nftablesCell('c7i.4xlarge'), {
      name: 'dp-gpu',
      datapath: 'iptables',
      instanceType: 'g6.xlarge',
    });
    const needs = stackQuotaNeeds(config);
    expect(needs.get(STANDARD)).toEqual({
      vcpus: 8 + 16,
      hosts: 'cell dp-cilium 8 + cell dp-nftables 16',
    });
    expect(needs.get(G_AND_VT)).toEqual({ vcpus: 4, hosts: 'cell dp-gpu 4' });
  });

  it('LLM-gateway lab with agents: the server and every agent of the bucket together', () => {
    const { config } = loadLabConfig({ file: 'examples/multi-node.yaml' });
    const gpu = stackQuotaNeeds(config).get(G_AND_VT);
    expect(gpu?.hosts).toMatch(/^server 48 \+ /);
    expect(gpu?.vcpus).toBeGreaterThan(48);
  });
});

describe('the quota stop of a launch', () => {
  const attempt = {
    az: 'us-west-2a',
    instanceType: 'g6.12xlarge',
    code: 'VcpuLimitExceeded',
    message: 'You have requested more vCPU capacity than your current vCPU limit of 64 allows',
  };

  it("names the stack's total need of the bucket, read from the resource properties", () => {
    const request = parseLaunchRequest(
      {
        LaunchTemplateId: 'lt-0123456789abcdef0',
        LaunchTemplateVersion: '1',
        Generation: 'abcd1234',
        SecurityGroupId: 'sg-0123456789abcdef0',
        StackTagKey: 'llm-gateway-lab:stack',
        StackTagValue: 'LlmGatewayLab',
        InstanceTypes: ['g6.12xlarge'],
        Subnets: [],
        VcpusNeeded: '48',
        StackVcpusNeeded: '112',
        StackVcpusHosts: 'server 48 + gpu-1 48 + gpu-2 16',
      },
      'request-1',
    );
    expect(request.stackNeed).toEqual({ vcpus: 112, hosts: 'server 48 + gpu-1 48 + gpu-2 16' });
    const message = stopMessage(attempt, 48, request.quota, request.stackNeed);
    expect(message).toContain('does not leave 48 vCPUs free for g6.12xlarge');
    expect(message).toContain(
      "Request an increase to at least the stack's 112 vCPUs of it at once (server 48 + gpu-1 48 + gpu-2 16) plus what other instances use",
    );
  });

  it('without the stack need, names this host only', () => {
    expect(stopMessage(attempt, 48)).toContain('Request an increase to at least 48 vCPUs');
  });
});
