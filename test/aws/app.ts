import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type AppProps, type IPolicyValidationPlugin, Validations } from 'aws-cdk-lib';
import { VALIDATION_REPORT_FILE } from 'aws-cdk-lib/cx-api';

let outdir: string | undefined;

/**
 * A CDK App for a test, synthesizing into one folder per test worker (under the run's TMPDIR,
 * removed at the end of the run by test/global-temp.ts).
 *
 * aws-cdk-lib keeps staged assets in a process-wide cache keyed by the output folder and the
 * bundling options (core/lib/asset-staging.ts, AssetStaging.assetCache): Apps that share a folder
 * bundle each Lambda handler with esbuild once per worker, for real, instead of once per App.
 * Files of a worker run one after the other (vitest.config.ts), so they never write it at once.
 *
 * Without aws-cdk-lib's built-in CloudFormation template validation (`builtinCloudFormationValidation`),
 * unless a test asks for it: its WebAssembly engine costs about 12 s of CPU to start in each
 * process and a few seconds per template after, more than the rest of a synthesis, and without
 * cdk.json's `@aws-cdk/core:validateAgainstDefaultRules` its findings are only warnings that no
 * test reads. test/aws/cfn-validate.test.ts runs it on every stack shape, as `cdk synth` does
 * (`CloudFormationValidateInChild`, test/aws/cfn-validate-engine.ts).
 */
export function testApp(props: AppProps = {}): App {
  outdir ??= mkdtempSync(join(tmpdir(), 'lab-cdk-out-'));
  return new App({ outdir, builtinCloudFormationValidation: false, ...props });
}

/** What one synthesis with policy validation plugins found, for several tests to read. */
export interface Validated {
  /** The message `app.synth()` threw (CDK's validation report), or undefined when it passed. */
  readonly error: string | undefined;
  /**
   * The plugin's conclusion in CDK's validation report, after acknowledgements: `failed` when an
   * unacknowledged finding (or the plugin's own failure) is left; `not run` when the synthesis
   * failed before validation.
   */
  verdict(plugin: Pick<IPolicyValidationPlugin, 'name'>): 'passed' | 'failed' | 'not run';
}

/**
 * Synthesizes the app once with all these plugins (cdk-nag and the Control Tower checks), as
 * `cdk synth` runs them: one synthesis instead of one per set of checks, each test then reading its
 * own plugin's conclusion. The conclusions come from the report CDK writes into the assembly
 * folder before it throws (aws-cdk-lib 2.276.0 core/lib/private/synthesis-validation.js,
 * `validateTemplates`: `validation-report.json`, `pluginReports` lists each plugin that found
 * something, with `conclusion`); the folder is shared, so it is read at once.
 */
export function synthValidated(app: App, ...plugins: IPolicyValidationPlugin[]): Validated {
  const ran = new Set<string>();
  Validations.of(app).addPlugins(
    ...plugins.map(
      (plugin): IPolicyValidationPlugin => ({
        name: plugin.name,
        version: plugin.version,
        ruleIds: plugin.ruleIds,
        validate: (context) => {
          ran.add(plugin.name);
          return plugin.validate(context);
        },
      }),
    ),
  );
  let error: string | undefined;
  try {
    app.synth();
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  // Written by this synthesis whenever a plugin ran (before any throw), so never a stale copy.
  const reports: { pluginName: string; conclusion: string }[] =
    ran.size > 0
      ? JSON.parse(readFileSync(join(app.outdir, VALIDATION_REPORT_FILE), 'utf8')).pluginReports
      : [];
  const failed = new Set(reports.filter((r) => r.conclusion !== 'success').map((r) => r.pluginName));
  return {
    error,
    verdict: (plugin) => (!ran.has(plugin.name) ? 'not run' : failed.has(plugin.name) ? 'failed' : 'passed'),
  };
}
