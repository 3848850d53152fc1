import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../temp.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs an entry as cdk.json's app command does (`tsx <entry>`). Without aws-cdk-lib's built-in
 * CloudFormation template validation (CDK_VALIDATION=false, the switch aws-cdk-lib documents for
 * it): its WebAssembly engine took about 12 s of CPU to start in each process, more than the rest
 * of the synthesis; test/aws/cfn-validate.test.ts runs it on these stacks, as `cdk synth` does.
 */
function run(entry: string, env: NodeJS.ProcessEnv) {
  return spawnSync(process.execPath, ['--import', 'tsx', entry], {
    cwd: root,
    env: { ...process.env, LAB_CONFIG: '', CDK_VALIDATION: 'false', ...env },
    encoding: 'utf8',
  });
}

function overrideFile(text: string): string {
  const path = join(tempDir('lab-entry-'), 'lab.yaml');
  writeFileSync(path, text);
  return path;
}

// Both synthesizers read the same configuration, the CDK app also through `-c labConfig=`.
describe('synthesizer entry points', () => {
  it('the CDK app takes -c labConfig=<file> and names the stack from it', () => {
    const out = tempDir('lab-entry-');
    const config = overrideFile('stackName: MyLab\n');
    const result = run('bin/cdk-app.ts', {
      CDK_OUTDIR: out,
      CDK_CONTEXT_JSON: JSON.stringify({ labConfig: config }),
    });
    expect(result.status, result.stderr).toBe(0);
    expect(existsSync(join(out, 'MyLab.template.json'))).toBe(true);
  });

  it('the CDK app stops with every problem of a bad configuration', () => {
    const config = overrideFile('vllm:\n  replicas: 0\n');
    const result = run('bin/cdk-app.ts', { CDK_OUTDIR: tempDir('lab-entry-'), LAB_CONFIG: config });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('vllm.replicas = 0: must be greater than 0');
  });

  it('the CDK app synthesizes the network lab of examples/network-lab.yaml: one host per cell', () => {
    const out = tempDir();
    const result = run('bin/cdk-app.ts', { CDK_OUTDIR: out, LAB_CONFIG: 'examples/network-lab.yaml' });
    expect(result.status, result.stderr).toBe(0);
    const template = JSON.parse(readFileSync(join(out, 'NetworkLab.template.json'), 'utf8'));
    const launches = Object.values(template.Resources as Record<string, { Type: string }>).filter(
      (r) => r.Type === 'Custom::CapacityLaunch',
    );
    expect(launches).toHaveLength(3);
    // Bundles three launch functions and synthesizes three cells' manifests: slower than the rest.
  }, 240_000);

  it('the cdk8s app writes one folder per network-lab cell', () => {
    const out = tempDir();
    const config = overrideFile('lab: network\n');
    const result = run('bin/cdk8s-app.ts', { CDK8S_OUTDIR: out, LAB_CONFIG: config });
    expect(result.status, result.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['dp-cilium', 'dp-iptables', 'mesh']);
    expect(existsSync(join(out, 'mesh', '00-namespaces.yaml'))).toBe(true);
  });

  it('the cdk8s app honours $LAB_CONFIG', () => {
    const out = tempDir('lab-entry-');
    const config = overrideFile('namespace: other-lab\n');
    const result = run('bin/cdk8s-app.ts', { CDK8S_OUTDIR: out, LAB_CONFIG: config });
    expect(result.status, result.stderr).toBe(0);
    const manifests = readdirSync(out, { recursive: true, encoding: 'utf8' }).filter((name) =>
      name.endsWith('.yaml'),
    );
    const text = manifests.map((name) => readFileSync(join(out, name), 'utf8')).join('\n');
    expect(text).toMatch(/kind: Namespace\n(.*\n)*? {2}name: other-lab/);
    expect(text).not.toContain('namespace: vllm');
  });
});
