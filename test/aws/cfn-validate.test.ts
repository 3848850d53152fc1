import { readFileSync } from 'node:fs';
import { CfnResource, Validations } from 'aws-cdk-lib';
import { afterAll, describe, expect, it } from 'vitest';
import { LabStack } from '../../lib/aws/lab-stack.ts';
import { defaultLabConfig, loadLabConfig } from '../../lib/config/load.ts';
import { testApp } from './app.ts';
import { CloudFormationValidateInChild, stopValidationEngine } from './cfn-validate-engine.ts';

/**
 * aws-cdk-lib's built-in CloudFormation template validation, as `cdk synth` runs it: with
 * cdk.json's context, whose `@aws-cdk/core:validateAgainstDefaultRules` makes its findings errors.
 * The other stack tests synthesize without it (test/aws/app.ts: its engine costs about 12 s of CPU
 * per process), so this file checks every stack shape the lab synthesizes, in one App: one engine
 * start and one validation for all of them. The plugin's engine runs in a node process of its own
 * (`CloudFormationValidateInChild`: the same plugin, a fraction of the CPU), one for the file;
 * CDK's handling of its report (acknowledgements, errors under the flag) runs here, in the synthesis.
 */
const cdkContext = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')).context;

const FLAG = '@aws-cdk/core:validateAgainstDefaultRules';

function validatingApp() {
  const app = testApp({ context: cdkContext });
  Validations.of(app).addPlugins(new CloudFormationValidateInChild());
  return app;
}

const example = (file: string) => loadLabConfig({ file: `examples/${file}` }).config;

describe("CloudFormation's own template checks (cdk synth, cdk.json's context)", () => {
  afterAll(stopValidationEngine);

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
