import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import type { KubeObject } from '../../lib/check/index.ts';
import { runLab } from '../../lib/cli/program.ts';
import { captureOutput } from '../cli/capture.ts';
import { tempDir } from '../temp.ts';
import { container, goodTestbed } from './fixtures.ts';

async function manifestFolder(objects: KubeObject[]): Promise<string> {
  const dir = tempDir('lab-check-cli-');
  await writeFile(join(dir, 'testbed.yaml'), objects.map((o) => stringify(o)).join('---\n'));
  return dir;
}

function brokenTestbed(): KubeObject[] {
  const objects = goodTestbed();
  (container(objects, 'StatefulSet', 'qwen3').args as string[]).push('--disable-log-stats');
  return objects;
}

/** Runs `lab ...` in-process, capturing what it writes. */
async function lab(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const { value: code, stdout: out, stderr: err } = await captureOutput(() => runLab(argv));
  return { code, out, err };
}

afterEach(() => vi.restoreAllMocks());

describe('lab check', () => {
  it('exits 0 on a correct folder and prints the summary', async () => {
    const dir = await manifestFolder(goodTestbed());
    const { code, err } = await lab('check', dir);
    expect(code).toBe(0);
    expect(err).toContain('lab check: 18 objects in 1 file, no violations; 1 note');
  });

  it('exits 1 and prints one line per violation with lesson, object, field, why and file', async () => {
    const dir = await manifestFolder(brokenTestbed());
    const { code, out, err } = await lab('check', dir);
    expect(code).toBe(1);
    expect(out).toContain(
      `lesson 3  StatefulSet vllm/qwen3  spec.template.spec.containers[0].args: --disable-log-stats removes all vllm:* metrics; the study cannot measure hit rates  (${join(dir, 'testbed.yaml')})`,
    );
    expect(err).toContain('lab check: 1 violation (lesson 3: 1) in 18 objects in 1 file');
  });

  it('prints JSON with --json', async () => {
    const dir = await manifestFolder(brokenTestbed());
    const { code, out } = await lab('check', dir, '--json');
    expect(code).toBe(1);
    const result = JSON.parse(out);
    expect(result.violations).toEqual([
      expect.objectContaining({
        lesson: 3,
        object: 'StatefulSet vllm/qwen3',
        file: join(dir, 'testbed.yaml'),
      }),
    ]);
  });

  it('takes the KV cache size from --kv-cache-tokens', async () => {
    const dir = await manifestFolder(goodTestbed());
    const { code, out } = await lab('check', dir, '--kv-cache-tokens', '100000');
    expect(code).toBe(1);
    expect(out).toContain('lesson 8  Job vllm/bench-epp');
  });

  it('sizes the node for the resource budget from --node-cpu and --node-memory-gib', async () => {
    const dir = await manifestFolder(goodTestbed());
    const small = await lab('check', dir, '--node-cpu', '1', '--node-memory-gib', '1');
    expect(small.code).toBe(1);
    expect(small.out).toMatch(
      /^budget {4}\(everything that runs at once\) {2}resources\.requests\.memory: memory requests add up to [\d.]+ GiB, more than the node's 1 GiB \(--node-memory-gib\)/m,
    );
    // The default node (the configuration's instance: 48 vCPU, 192 GiB) holds the fixture.
    expect((await lab('check', dir)).code).toBe(0);
  });

  it('exits 2 when the folder does not exist or holds no manifests', async () => {
    expect(await lab('check', '/no/such/folder')).toEqual(
      expect.objectContaining({ code: 2, err: 'lab check: /no/such/folder: no such folder\n' }),
    );
    const empty = tempDir('lab-check-empty-');
    const { code, err } = await lab('check', empty);
    expect(code).toBe(2);
    expect(err).toContain(`no Kubernetes objects found in ${empty}`);
  });

  it('exits 2 on a file that does not parse, naming it', async () => {
    const dir = tempDir('lab-check-bad-');
    await writeFile(join(dir, 'bad.yaml'), 'kind: [\n');
    const { code, err } = await lab('check', dir);
    expect(code).toBe(2);
    expect(err).toContain(`${join(dir, 'bad.yaml')}: not valid YAML`);
  });

  it('sets the process exit code when run as a command', async () => {
    const dir = await manifestFolder(brokenTestbed());
    const run = promisify(execFile);
    const error = await run('bin/lab.ts', ['check', dir]).catch((e: unknown) => e);
    expect((error as { code: number }).code).toBe(1);
    expect((error as { stdout: string }).stdout).toContain('lesson 3  StatefulSet vllm/qwen3');
  });
});

describe('lab check with a multi-node configuration (issue 17)', () => {
  it('passes the synthesized examples/multi-node.yaml cluster and judges placement against it', async () => {
    const { loadLabConfig } = await import('../../lib/config/load.ts');
    const { synthesizeCluster } = await import('../../charts/synthesize.ts');
    const example = 'examples/multi-node.yaml';
    const dir = tempDir('lab-check-multi-node-');
    synthesizeCluster(loadLabConfig({ file: example, env: {} }).config, dir);
    const passed = await lab('--config', example, 'check', dir);
    expect(passed.err).toMatch(/no violations/);
    expect(passed.code).toBe(0);
    // The same manifests judged as the one-host lab: front ends on a CPU node it does not have.
    const { code, out } = await lab('check', dir);
    expect(code).toBe(1);
    expect(out).toMatch(
      /^placement Deployment vllm\/vllm-router-round-robin {2}spec\.template\.spec\.nodeSelector\["llm-gateway-lab\/node-role"\]: is "cpu" but the cluster has no CPU node \(it has GPU\): the pod would stay Pending/m,
    );
  });
});
