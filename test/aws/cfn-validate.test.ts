import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { CfnResource } from 'aws-cdk-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LabStack } from '../../lib/aws/lab-stack.ts';
import { defaultLabConfig, loadLabConfig } from '../../lib/config/load.ts';
import { testApp } from './app.ts';

/**
 * aws-cdk-lib's built-in CloudFormation template validation, as `cdk synth` runs it: with
 * cdk.json's context, whose `@aws-cdk/core:validateAgainstDefaultRules` makes its findings errors.
 * The other stack tests synthesize without it (test/aws/app.ts: its engine costs about 12 s of CPU
 * per process), so this file checks every stack shape the lab synthesizes, in one App: one engine
 * start and one validation for all of them.
 */
const cdkContext = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;

const FLAG = '@aws-cdk/core:validateAgainstDefaultRules';

function validatingApp() {
  return testApp({ builtinCloudFormationValidation: true, context: cdkContext });
}

const example = (file: string) => loadLabConfig({ file: `examples/${file}` }).config;

describe("CloudFormation's own template checks (cdk synth, cdk.json's context)", () => {
  // The engine is 9 MB of WebAssembly run for a few seconds: V8 compiles it with its baseline
  // compiler (Liftoff) and then again, hot functions in background threads, with TurboFan, which
  // cost more CPU than it saved here (this file: 34 to 40 s of CPU alone, 26 to 28 s without it).
  // The same code runs either way; the flag only picks V8's compiler (docs/facts.md §7 point 4). Set
  // for this file's tests only (the worker's modules are shared with later files).
  beforeAll(() => setFlagsFromString('--liftoff-only'));
  afterAll(() => setFlagsFromString('--no-liftoff-only'));

  it('are errors under cdk.json', () => {
    expect(cdkContext[FLAG]).toBe(true);
  });

  it('pass for the default lab, the multi-node example and the network example', () => {
    const app = validatingApp();
    for (const config of [defaultLabConfig(), example('multi-node.yaml'), example('network-lab.yaml')]) {
      new LabStack(app, config.stackName, { config });
    }
    expect(app.node.children.map((stack) => stack.node.id).sort()).toEqual([
      'LlmGatewayLab',
      'LlmGatewayLabMultiNode',
      'NetworkLab',
    ]);
    expect(() => app.synth()).not.toThrow();
  });

  it('would fail synth on a new finding', () => {
    const app = validatingApp();
    const config = defaultLabConfig();
    const stack = new LabStack(app, config.stackName, { config });
    new CfnResource(stack, 'Misspelt', {
      type: 'AWS::S3::Bucket',
      properties: { BucketEncryptionn: {} },
    });
    expect(() => app.synth()).toThrow(/BucketEncryptionn/);
  });
});
