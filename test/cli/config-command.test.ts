import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { defaultLabConfig } from '../../lib/config/load.ts';
import { tempDir } from '../temp.ts';
import { runLabCli, runLabHere } from './run-lab.ts';

function overrideFile(text: string): string {
  const path = join(tempDir('lab-cli-'), 'lab.yaml');
  writeFileSync(path, text);
  return path;
}

describe('lab config', () => {
  it('prints the effective default configuration as YAML and says it is valid', async () => {
    const run = await runLabHere(['config']);
    expect(run.code).toBe(0);
    // The LLM-gateway lab's settings: the network lab's section is not shown.
    const { network: _other, ...llmGateway } = defaultLabConfig();
    expect(parse(run.stdout)).toEqual(llmGateway);
    expect(run.stderr).toContain('# configuration: defaults; valid');
  });

  it('shows the network lab when the configuration selects it', async () => {
    const run = await runLabHere(['--config', 'examples/network-lab.yaml', 'config']);
    expect(run.code).toBe(0);
    const shown = parse(run.stdout);
    expect(Object.keys(shown)).toEqual(['lab', 'stackName', 'aws', 'k3s', 'runner', 'network']);
    expect(shown.network.cells.map((c: { name: string }) => c.name)).toEqual([
      'mesh',
      'dp-iptables',
      'dp-cilium',
    ]);
  });

  it('merges --config over the defaults and prints JSON on request', async () => {
    const path = overrideFile('vllm:\n  replicas: 3\nworkload:\n  partitionSeeds: [1, 2, 3]\n');
    const run = await runLabHere(['--config', path, 'config', '--json']);
    expect(run.code).toBe(0);
    const config = JSON.parse(run.stdout);
    expect(config.vllm.replicas).toBe(3);
    expect(config.vllm.blockSize).toBe(16);
  });

  it('honours $LAB_CONFIG', async () => {
    const path = overrideFile('namespace: from-env\n');
    const run = await runLabHere(['config', '--json'], { LAB_CONFIG: path });
    expect(JSON.parse(run.stdout).namespace).toBe('from-env');
    expect(run.stderr).toContain(`# configuration: ${path}; valid`);
  });

  it('prints warnings on standard error and still exits 0', async () => {
    const path = overrideFile('workload:\n  prefixes: 8\n  prefixLen: 512\n');
    const run = await runLabHere(['--config', path, 'config']);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^warning: workload: the working set \(8 prefixes x 512 tokens/m);
  });

  it('exits 1 with every problem and no stack trace on a bad configuration', async () => {
    const path = overrideFile('vllm:\n  replicas: 9\n  blockSize: 20\n');
    const run = await runLabHere(['--config', path, 'config']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`Invalid lab configuration (${path}): 2 problem(s)`);
    expect(run.stderr).toContain('  - vllm.blockSize = 20: must be one of 1, 8, 16, 32, 64, 128');
    expect(run.stderr).toContain('  - vllm.replicas = 9: each replica needs its own GPU');
    expect(run.stderr).not.toContain('    at ');
  });

  it('has help, and rejects an unknown command in one line with a suggestion and where the help is (through bin/launch.mjs and in-process, the same)', async () => {
    const help = await runLabHere(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: lab [options] [command]');
    expect(help.stdout).toContain('config [options]');
    // The one spawned bin/launch.mjs of this file: a usage error's exit code and output as a user
    // sees them (bin/lab.ts's runs below go through bin/launch.mjs too).
    const expected = "lab: unknown command 'confg' (did you mean config?); see lab --help\n";
    const typo = runLabCli(['confg']);
    expect(typo.code).toBe(1);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toBe(expected);
    expect(await runLabHere(['confg'])).toEqual({ code: 1, stdout: '', stderr: expected });
  });

  it('rejects an unknown option of a subcommand in one line that names the subcommand', async () => {
    // In-process, runLab returns the code instead of commander ending the process (exitOverride
    // on every subcommand): a caller's clean-up still runs. The test above shows a spawned lab
    // prints the same as runLab for the same usage error.
    const here = await runLabHere(['status', '--stak', 'X']);
    expect(here).toEqual({
      code: 1,
      stdout: '',
      stderr: "lab status: unknown option '--stak' (did you mean --stack?); see lab status --help\n",
    });
  });
});

describe('the bin/lab.ts entry', () => {
  const entry = fileURLToPath(new URL('../../bin/lab.ts', import.meta.url));

  const root = fileURLToPath(new URL('../..', import.meta.url));

  function labFrom(command: string, cwd: string, args: readonly string[], env: NodeJS.ProcessEnv = {}) {
    return spawnSync(command, args, {
      cwd,
      env: { ...process.env, LAB_CONFIG: '', ...env },
      encoding: 'utf8',
    });
  }

  /**
   * One spawned `lab plan` that two tests read: through a symlink to bin/lab.ts, from a folder
   * outside the repository, with a relative --config there, from the cached bundle (its lazily
   * loaded chunk: the study model, the simulator). 40 prompts instead of the workload's: the same
   * code, a third less CPU.
   */
  let planRun: ReturnType<typeof labFrom> | undefined;
  function planThroughSymlink() {
    if (!planRun) {
      const elsewhere = tempDir('lab-elsewhere-');
      const link = join(elsewhere, 'lab');
      symlinkSync(entry, link);
      writeFileSync(join(elsewhere, 'lab.yaml'), 'workload:\n  prefixLen: 1024\n');
      planRun = labFrom(link, elsewhere, [
        '--config',
        'lab.yaml',
        'plan',
        '--prefixes',
        '4',
        '--prompts',
        '40',
        '--json',
      ]);
    }
    return planRun;
  }

  it('runs from outside the repository, directly, through a symlink on PATH, and without the bundle', () => {
    // Through the symlink: the arguments and a relative --config reach the lab from any folder.
    const plan = planThroughSymlink();
    expect(plan.status, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).workingSetTokens).toBe(4 * 1024);
    // Directly, through tsx instead of the bundle: `lab config` (no simulation).
    const elsewhere = tempDir('lab-elsewhere-');
    writeFileSync(join(elsewhere, 'lab.yaml'), 'namespace: elsewhere\n');
    const run = labFrom(entry, elsewhere, ['--config', 'lab.yaml', 'config', '--json'], {
      LAB_CLI_BUNDLE: 'off',
    });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).namespace).toBe('elsewhere');
  });

  it('starts from a bundle cached under node_modules/.cache, built from the sources it lists', () => {
    // `lab plan`: its lazily loaded chunk (the study model, the simulator) runs from the bundle.
    const plan = planThroughSymlink();
    expect(plan.status, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).workingSetTokens).toBe(4 * 1024);
    // One cache folder per checkout: the first 12 hex digits of the SHA-256 of its path (bin/launch.mjs).
    const checkout = createHash('sha256').update(resolve(root)).digest('hex').slice(0, 12);
    const manifest = join(root, 'node_modules', '.cache', 'llm-gateway-lab', checkout, 'manifest.json');
    const { inputs } = JSON.parse(readFileSync(manifest, 'utf8')) as { inputs: [string, number, number][] };
    const files = inputs.map(([file]) => file);
    expect(files).toContain('bin/lab.ts');
    expect(files).toContain('lib/control/logs.ts');
    expect(files.every((file) => !file.includes('node_modules'))).toBe(true);
  });
});
