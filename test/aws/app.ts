import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, type AppProps } from 'aws-cdk-lib';

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
 * test reads. test/aws/cfn-validate.test.ts runs it once, on every stack shape, as `cdk synth` does.
 */
export function testApp(props: AppProps = {}): App {
  outdir ??= mkdtempSync(join(tmpdir(), 'lab-cdk-out-'));
  return new App({ outdir, builtinCloudFormationValidation: false, ...props });
}
