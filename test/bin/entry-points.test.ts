import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../temp.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs an entry as cdk.json's and cdk8s.yaml's app commands do (`node --import tsx <entry>`).
 * Without aws-cdk-lib's built-in CloudFormation template validation (CDK_VALIDATION=false, the
 * switch aws-cdk-lib documents for it): its WebAssembly engine took about 12 s of CPU to start in
 * each process, more than the rest of the synthesis; test/aws/cfn-validate.test.ts runs it on
 * these stacks, as `cdk synth` does.
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

/**
 * One synthesis of the CDK app that two tests read: examples/network-lab.yaml through
 * `-c labConfig=`, with $LAB_CONFIG naming a bad configuration that `-c` must win over. A
 * spawned CDK app costs about 9 s of CPU (tsx, aws-cdk-lib, a first synthesis, two esbuild
 * bundlings); the entry point runs for real, once per outcome (this one, and the bad
 * configuration below).
 */
let networkLabRun: { out: string; result: ReturnType<typeof run> } | undefined;
function networkLabThroughContext() {
  if (!networkLabRun) {
    const out = tempDir('lab-entry-');
    const result = run('bin/cdk-app.ts', {
      CDK_OUTDIR: out,
      CDK_CONTEXT_JSON: JSON.stringify({ labConfig: 'examples/network-lab.yaml' }),
      LAB_CONFIG: overrideFile('vllm:\n  replicas: 0\n'),
    });
    networkLabRun = { out, result };
  }
  return networkLabRun;
}

// Both synthesizers read the same configuration, the CDK app also through `-c labConfig=`.
describe('synthesizer entry points', () => {
  it('the CDK app takes -c labConfig=<file>, over $LAB_CONFIG, and names the stack from it', () => {
    const { out, result } = networkLabThroughContext();
    expect(result.status, result.stderr).toBe(0);
    // The file's stackName, not the default LlmGatewayLab; $LAB_CONFIG's bad file was not read.
    expect(readdirSync(out).filter((name) => name.endsWith('.template.json'))).toEqual([
      'NetworkLab.template.json',
    ]);
    expect(result.stderr).not.toContain('vllm.replicas');
  });

  it('the CDK app stops with every problem of a bad configuration', () => {
    const config = overrideFile('vllm:\n  replicas: 0\n');
    const result = run('bin/cdk-app.ts', { CDK_OUTDIR: tempDir('lab-entry-'), LAB_CONFIG: config });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('vllm.replicas = 0: must be greater than 0');
  });

  it('the CDK app synthesizes the network lab of examples/network-lab.yaml: one host per cell', () => {
    const { out, result } = networkLabThroughContext();
    expect(result.status, result.stderr).toBe(0);
    const template = JSON.parse(readFileSync(join(out, 'NetworkLab.template.json'), 'utf8'));
    const launches = Object.values(template.Resources as Record<string, { Type: string }>).filter(
      (r) => r.Type === 'Custom::CapacityLaunch',
    );
    expect(launches).toHaveLength(3);
  });

  it('the cdk8s app writes one folder per network-lab cell', () => {
    const out = tempDir();
    const config = overrideFile('lab: network\n');
    const result = run('bin/cdk8s-app.ts', { CDK8S_OUTDIR: out, LAB_CONFIG: config });
    expect(result.status, result.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['dp-cilium', 'dp-iptables', 'mesh']);
    expect(existsSync(join(out, 'mesh', '00-namespaces.yaml'))).toBe(true);
  });

  // "the cdk8s app honours $LAB_CONFIG" is in synth-k8s.test.ts: it reads the run of `npm run
  // synth:k8s` there, which runs this app with the same configuration.
});
