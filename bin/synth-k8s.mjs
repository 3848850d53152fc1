#!/usr/bin/env node
// `npm run synth:k8s`: the cdk8s synthesis, all or nothing. A bad configuration leaves the output
// folder as it was and prints only the app's list of errors.
//
// Why not `cdk8s synth` itself: cdk8s-cli 2.207.60 deletes the output folder before it runs the
// app (lib/cli/cmds/synth.js, `handler`: `fs.rmSync(outdir, ...)`), and when the app exits non-zero
// it ends in its own stack trace (lib/util.js, `shell` rejects with "returned a non-zero exit
// code"). This runs the `app` command of cdk8s.yaml the way cdk8s-cli's plain synthesis does
// (lib/util.js, `synthApp`: the command in a shell, CDK8S_OUTDIR set to the folder), but into a
// staging folder beside the output, which replaces the output only once the app succeeded.
//
//   node bin/synth-k8s.mjs [--output <dir>]     (default: `output` of cdk8s.yaml, else dist)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { parse } from 'yaml';

/**
 * What this script takes from cdk8s.yaml, read from the working folder as cdk8s-cli does; what it
 * cannot do as cdk8s-cli would, it refuses.
 */
function readCdk8sConfig() {
  const config = parse(readFileSync('cdk8s.yaml', 'utf8')) ?? {};
  if (typeof config.app !== 'string' || config.app === '') {
    fail('cdk8s.yaml: app must be the command that runs the cdk8s app');
  }
  if (config.validations !== undefined || (config.synthConfig?.format ?? 'plain') !== 'plain') {
    fail(
      'cdk8s.yaml: validations and synthConfig.format other than plain need cdk8s-cli itself: run npx cdk8s synth',
    );
  }
  return config;
}

function fail(message) {
  process.stderr.write(`synth:k8s: ${message}\n`);
  process.exit(2);
}

function outputArg(args) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--output' || args[i] === '-o') {
      if (!args[i + 1]) fail(`${args[i]} needs a folder`);
      return args[i + 1];
    }
    fail(`unknown argument ${args[i]} (allowed: --output <dir>)`);
  }
  return undefined;
}

function yamlFiles(dir) {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.yaml'))
    .sort();
}

const config = readCdk8sConfig();
const outdir = resolve(outputArg(process.argv.slice(2)) ?? config.output ?? 'dist');
// Beside the output, so that the swap is a rename on one file system.
const staging = mkdtempSync(join(dirname(outdir), `.${basename(outdir)}.synth-`));
const app = spawnSync(config.app, {
  shell: true,
  stdio: 'inherit',
  env: { ...process.env, CDK8S_OUTDIR: staging },
});
if (app.status !== 0 || !existsSync(staging) || yamlFiles(staging).length === 0) {
  rmSync(staging, { recursive: true, force: true });
  // The app has said why (a bad configuration: its list of errors); only a silent failure needs a word.
  if (app.status === 0)
    process.stderr.write(`synth:k8s: the app wrote no manifests; ${outdir} is unchanged\n`);
  process.exit(app.status || 1);
}
const previous = `${staging}.previous`;
if (existsSync(outdir)) renameSync(outdir, previous);
renameSync(staging, outdir);
rmSync(previous, { recursive: true, force: true });
for (const file of yamlFiles(outdir))
  process.stdout.write(`  - ${relative(process.cwd(), join(outdir, file))}\n`);
