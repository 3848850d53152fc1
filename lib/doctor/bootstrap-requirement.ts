import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, CfnWaitConditionHandle, Stack } from 'aws-cdk-lib';
import type { BootstrapRequirement } from './bootstrap.ts';

/**
 * What the installed aws-cdk-lib asks of the CDK bootstrap, read from aws-cdk-lib itself rather
 * than written down: a probe stack is synthesized with the synthesizer the lab's app uses
 * (DefaultStackSynthesizer, bin/cdk-app.ts sets none) and the project's cdk.json context, and its
 * cloud-assembly artifact says the bootstrap version deploy needs, the version context lookups
 * need, and the SSM parameter both are read from. In aws-cdk-lib 2.276.0 these come from
 * core/lib/stack-synthesizers/default-synthesizer.js: MIN_BOOTSTRAP_STACK_VERSION = 6 (deploy and
 * assets; the template's CheckBootstrapVersion rule rejects 1-5), MIN_LOOKUP_ROLE_BOOTSTRAP_STACK_VERSION
 * = 8 (the lookup role; the lab's VPC looks up the region's AZs when the environment is known), and
 * DEFAULT_BOOTSTRAP_STACK_VERSION_SSM_PARAMETER = /cdk-bootstrap/${Qualifier}/version.
 */

/** `cdk bootstrap`'s default stack name (the CDK CLI's --toolkit-stack-name). */
export const DEFAULT_TOOLKIT_STACK = 'CDKToolkit';

/** The context key of the bootstrap qualifier (aws-cdk-lib BOOTSTRAP_QUALIFIER_CONTEXT). */
const QUALIFIER_CONTEXT = '@aws-cdk/core:bootstrapQualifier';

/** The project root: cdk.json lives there. */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface RequirementOptions {
  /** `--qualifier`; default: cdk.json's @aws-cdk/core:bootstrapQualifier, else aws-cdk-lib's default. */
  readonly qualifier?: string;
  /** `--toolkit-stack-name`; default CDKToolkit. */
  readonly toolkitStackName?: string;
}

/** The project's cdk.json context (what `cdk deploy` synthesizes with). */
function projectContext(): Record<string, unknown> {
  try {
    const cdkJson = JSON.parse(readFileSync(join(ROOT, 'cdk.json'), 'utf8')) as {
      context?: Record<string, unknown>;
    };
    return cdkJson.context ?? {};
  } catch {
    return {};
  }
}

/**
 * The bootstrap template version of the installed CDK CLI (`aws-cdk`, which exports its template):
 * what `cdk bootstrap` would upgrade to. Undefined when the CLI is not installed here.
 */
export function cliTemplateVersion(): number | undefined {
  try {
    const require = createRequire(join(ROOT, 'package.json'));
    const template = readFileSync(
      require.resolve('aws-cdk/lib/api/bootstrap/bootstrap-template.yaml'),
      'utf8',
    );
    // The Outputs section's BootstrapVersion (the CLI reads this output to learn the version).
    const outputs = template.slice(template.indexOf('\nOutputs:'));
    const match = /\n {2}BootstrapVersion:[\s\S]*?\n {4}Value: '?(\d+)'?/.exec(outputs);
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Synthesizes the probe stack and reads the bootstrap requirement off its artifact. */
export function bootstrapRequirement(options: RequirementOptions = {}): BootstrapRequirement {
  const context = projectContext();
  if (options.qualifier !== undefined) context[QUALIFIER_CONTEXT] = options.qualifier;
  const outdir = mkdtempSync(join(tmpdir(), 'lab-doctor-'));
  try {
    // No template validation: it is the slow part of synthesis and the probe is not deployed.
    const app = new App({ outdir, context, builtinCloudFormationValidation: false });
    // A known environment, as `cdk deploy` gives the lab's app (CDK_DEFAULT_ACCOUNT/REGION).
    const probe = new Stack(app, 'LabDoctorProbe', { env: { account: '111111111111', region: 'us-east-1' } });
    // One resource: synthesis validates that a template has some.
    new CfnWaitConditionHandle(probe, 'Probe');
    const artifact = app.synth().getStackByName(probe.stackName);
    const parameter = artifact.bootstrapStackVersionSsmParameter;
    const qualifier = /^\/cdk-bootstrap\/([^/]+)\/version$/.exec(parameter ?? '')?.[1];
    if (!parameter || !qualifier || artifact.requiresBootstrapStackVersion === undefined) {
      throw new Error(
        `lab doctor: aws-cdk-lib's synthesizer did not name its bootstrap version parameter (got ${parameter}); cannot check the bootstrap`,
      );
    }
    const cli = cliTemplateVersion();
    return {
      toolkitStackName: options.toolkitStackName ?? DEFAULT_TOOLKIT_STACK,
      qualifier,
      versionParameter: parameter,
      deployVersion: artifact.requiresBootstrapStackVersion,
      lookupVersion:
        artifact.lookupRole?.requiresBootstrapStackVersion ?? artifact.requiresBootstrapStackVersion,
      ...(cli === undefined ? {} : { cliTemplateVersion: cli }),
    };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
