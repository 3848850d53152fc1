import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { synthesizeLabApp } from '../../charts/cdk8s-app.ts';
import { addLabStack } from '../../lib/aws/cdk-app.ts';
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

/** Thrown by the stubbed `process.exit`: the code an entry point ended with. */
class Exited extends Error {
  constructor(readonly code: number | string | null | undefined) {
    super(`process.exit(${code})`);
  }
}

/**
 * Runs an entry point's function in this process (what bin/cdk-app.ts or bin/cdk8s-app.ts calls),
 * with what it writes to standard error captured and `process.exit` turned into a throw: its exit
 * code (undefined when it returned) and standard error.
 */
async function inProcess(action: () => Promise<unknown>): Promise<{ code: unknown; stderr: string }> {
  let stderr = '';
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
  vi.spyOn(process, 'exit').mockImplementation((code) => {
    throw new Exited(code);
  });
  try {
    await action();
    return { code: undefined, stderr };
  } catch (error) {
    if (error instanceof Exited) return { code: error.code, stderr };
    throw error;
  } finally {
    vi.restoreAllMocks();
  }
}

afterEach(() => vi.restoreAllMocks());

/**
 * The one spawned run of the CDK app, read by two tests: examples/network-lab.yaml through
 * `-c labConfig=`, with $LAB_CONFIG naming a bad configuration that `-c` must win over. A
 * spawned CDK app costs about 8 s of CPU (tsx, aws-cdk-lib, a first synthesis, two esbuild
 * bundlings). It proves the entry point's wiring: cdk.json's command, the context and environment
 * it reads, the exit code, the assembly it writes. The other cases run addLabStack, the function
 * bin/cdk-app.ts calls, in this process.
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

  it('the CDK app stops with every problem of a bad configuration from $LAB_CONFIG, before it builds a stack (in-process)', async () => {
    const config = overrideFile('vllm:\n  replicas: 0\n  blockSize: 20\n');
    const app = new App({ outdir: tempDir('lab-entry-') });
    const run = await inProcess(() => addLabStack(app, { LAB_CONFIG: config }));
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`Invalid lab configuration (${config}): 2 problem(s)`);
    expect(run.stderr).toContain('  - vllm.replicas = 0: must be greater than 0\n');
    expect(run.stderr).toContain('  - vllm.blockSize = 20: must be one of');
    expect(run.stderr).not.toMatch(/^\s+at /m);
    expect(app.node.children).toEqual([]);
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

  // In-process: synth-k8s.test.ts runs bin/cdk8s-app.ts for real (npm run synth:k8s), twice.
  it('the cdk8s app writes one folder per network-lab cell into $CDK8S_OUTDIR (in-process)', async () => {
    const out = tempDir();
    const config = overrideFile('lab: network\n');
    const run = await inProcess(() => synthesizeLabApp({ CDK8S_OUTDIR: out, LAB_CONFIG: config }));
    expect(run).toEqual({ code: undefined, stderr: '' });
    expect(readdirSync(out).sort()).toEqual(['dp-cilium', 'dp-iptables', 'mesh']);
    expect(existsSync(join(out, 'mesh', '00-namespaces.yaml'))).toBe(true);
  });

  // "the cdk8s app honours $LAB_CONFIG" is in synth-k8s.test.ts: it reads the run of `npm run
  // synth:k8s` there, which runs this app with the same configuration.
});
