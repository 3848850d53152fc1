import { describe, expect, it } from 'vitest';
import { LabStack } from '../../lib/aws/lab-stack.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { testApp } from './app.ts';

describe("the lab's own host and runner.results", () => {
  it('refuses a results claim: the host uploads and lab status reads the node folder', () => {
    const config = parseLabConfig({ runner: { results: { volume: 'claim' } } });
    expect(() => new LabStack(testApp(), config.stackName, { config })).toThrow(
      /runner\.results\.volume: claim is for a cluster you bring \(lab install\).*Set runner\.results\.volume: node-folder/,
    );
  });
});
