import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultLabConfig, LAB_CONFIG_ENV, loadLabConfig } from '../../lib/config/load.ts';
import { LabConfigError } from '../../lib/config/problems.ts';
import { tempDir } from '../temp.ts';

function file(name: string, text: string): string {
  const dir = tempDir('lab-config-');
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('loadLabConfig', () => {
  it('uses the defaults when neither a file nor $LAB_CONFIG is given', () => {
    const loaded = loadLabConfig({ env: {} });
    expect(loaded.source).toBe('defaults');
    expect(loaded.config.vllm.replicas).toBe(2);
    expect(loaded.warnings).toEqual([]);
  });

  it('merges the file named by $LAB_CONFIG over the defaults', () => {
    const path = file('lab.yaml', 'vllm:\n  replicas: 3\nworkload:\n  partitionSeeds: [1, 2, 3]\n');
    const loaded = loadLabConfig({ env: { [LAB_CONFIG_ENV]: path } });
    expect(loaded.source).toBe(path);
    expect(loaded.config.vllm.replicas).toBe(3);
    expect(loaded.config.vllm.blockSize).toBe(16);
    expect(loaded.config.workload.partitionSeeds).toEqual([1, 2, 3]);
  });

  it('lets an explicit file (CLI --config, CDK -c labConfig=) win over $LAB_CONFIG', () => {
    const fromEnv = file('env.yaml', 'namespace: from-env\n');
    const explicit = file('explicit.yaml', 'namespace: explicit\n');
    expect(loadLabConfig({ file: explicit, env: { [LAB_CONFIG_ENV]: fromEnv } }).config.namespace).toBe(
      'explicit',
    );
  });

  it('resolves a relative path against the working directory', () => {
    const path = file('relative.yaml', 'namespace: rel\n');
    const dir = path.slice(0, path.lastIndexOf('/'));
    expect(loadLabConfig({ file: 'relative.yaml', cwd: dir, env: {} }).config.namespace).toBe('rel');
  });

  it('replaces a list as a whole instead of merging it item by item', () => {
    const path = file('lists.yaml', 'study:\n  boundSweepPrefixes: [128, 8]\n');
    expect(loadLabConfig({ file: path, env: {} }).config.study.boundSweepPrefixes).toEqual([128, 8]);
  });

  it('treats an empty file as no overrides, and says that the defaults are used', () => {
    for (const [name, text] of [
      ['empty.yaml', ''],
      ['comments.yaml', '# vllm:\n#   replicas: 2\n'],
    ]) {
      const path = file(name, text);
      const loaded = loadLabConfig({ file: path, env: {} });
      expect(loaded.config).toEqual(defaultLabConfig());
      expect(loaded.warnings).toContain(
        `${path} is empty: every setting has its default (the published lab)`,
      );
    }
    const path = file('set.yaml', 'namespace: lab2\n');
    expect(loadLabConfig({ file: path, env: {} }).warnings.join('\n')).not.toContain('is empty');
  });

  it('names the file when it is missing, not YAML, or not a mapping', () => {
    expect(() => loadLabConfig({ file: '/nonexistent/lab.yaml', env: {} })).toThrow(
      /\(file\): cannot read \/nonexistent\/lab\.yaml: file not found/,
    );
    const broken = file('broken.yaml', 'vllm: [replicas: 2\n');
    expect(() => loadLabConfig({ file: broken, env: {} })).toThrow(/broken\.yaml.*\n.*not valid YAML/);
    const list = file('list.yaml', '- vllm\n');
    expect(() => loadLabConfig({ file: list, env: {} })).toThrow(/must be a YAML mapping of settings/);
  });

  it('reports every problem of a file together, with the file as the source', () => {
    const path = file(
      'bad.yaml',
      'vllm:\n  replicas: 9\n  blockSize: 20\nenvoy:\n  image: envoyproxy/envoy:latest\n',
    );
    let error: unknown;
    try {
      loadLabConfig({ file: path, env: {} });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LabConfigError);
    const { problems, message } = error as LabConfigError;
    expect(problems.map((p) => p.setting)).toEqual([
      'vllm.blockSize = 20',
      'envoy.image = "envoyproxy/envoy:latest"',
      'vllm.replicas = 9',
    ]);
    expect(message).toContain(`Invalid lab configuration (${path}): 3 problem(s)`);
  });

  it('returns the warnings with the configuration', () => {
    const path = file('first-try.yaml', 'workload:\n  prefixes: 8\n  prefixLen: 512\n');
    const { warnings } = loadLabConfig({ file: path, env: {} });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('8 prefixes x 512 tokens = 4,096 tokens');
  });
});
