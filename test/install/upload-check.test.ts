import { describe, expect, it } from 'vitest';
import { parseLabConfig } from '../../lib/config/load.ts';
import { labPlacement } from '../../lib/config/placement.ts';
import { clusterChecks } from '../../lib/install/cluster-checks.ts';
import { kubeletMinor } from '../../lib/install/upload-check.ts';
import type { KubeObject } from '../../lib/kube/cluster-api.ts';

const UPLOAD = { bucket: 'lab-results-123', prefix: 'studies/eks-1', region: 'eu-west-1' };

/** The runner pool of the configuration below: the clients' GPU nodes narrowed by runnerNodeSelector. */
const RUNNER_LABELS = { 'llm-gateway-lab/node-role': 'gpu', 'pool/runner': 'yes' };

function node(
  name: string,
  kubeletVersion: string,
  labels: Record<string, string> = RUNNER_LABELS,
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels },
    status: { nodeInfo: { kubeletVersion }, conditions: [{ type: 'Ready', status: 'True' }] },
  } as unknown as KubeObject;
}

/** The results-upload check of `lab install` against these nodes. */
function check(upload: unknown, nodes: KubeObject[]) {
  const config = parseLabConfig({
    placement: { runnerNodeSelector: { 'pool/runner': 'yes' } },
    runner: { results: { volume: 'claim', upload } },
  });
  const checks = clusterChecks(
    { placement: labPlacement(config), gpus: 0, pools: [], results: config.runner.results },
    { nodes, runtimeClasses: [], refused: [], storageClasses: [{ name: 'gp3', isDefault: true }] },
  );
  return checks.find((c) => c.id === 'results-upload');
}

describe('lab install: the uploader needs native sidecars on the runner node', () => {
  it('reads the kubelet version of a node', () => {
    expect(kubeletMinor(node('a', 'v1.30.4-eks-a737599'))).toEqual([1, 30]);
    expect(kubeletMinor(node('a', ''))).toBeUndefined();
  });

  it('passes on 1.29 or later, naming the target', () => {
    expect(check(UPLOAD, [node('a', 'v1.29.0'), node('b', 'v1.33.1-eks-1')])).toMatchObject({
      outcome: 'pass',
      message: expect.stringContaining('s3://lab-results-123/studies/eks-1/'),
    });
  });

  it('fails when the runner may land on an older node, naming it', () => {
    const result = check(UPLOAD, [node('new', 'v1.30.1'), node('old', 'v1.28.9-eks-1')]);
    expect(result).toMatchObject({ outcome: 'fail', subject: 'runner.results.upload' });
    expect(result?.message).toContain('old (v1.28)');
    expect(result?.message).not.toContain('new');
    // Only the runner's nodes count.
    expect(
      check(UPLOAD, [
        node('new', 'v1.30.1'),
        node('gpu', 'v1.27.1', { ...RUNNER_LABELS, 'pool/runner': 'no' }),
      ])?.outcome,
    ).toBe('pass');
  });

  it('is not made without an upload', () => {
    expect(check(null, [node('old', 'v1.27.0')])).toBeUndefined();
  });
});
