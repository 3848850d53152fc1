import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { describe, expect, it } from 'vitest';
import { HandlerBundling, handlerName } from '../../lib/aws/handler-code.ts';
import { tempDir } from '../temp.ts';

const options = { runtime: lambda.Runtime.NODEJS_22_X, minify: false, externalModules: ['@aws-sdk/*'] };

describe('HandlerBundling', () => {
  it('bundles in-process for the runtime, leaving the runtime-provided modules out', () => {
    const source = join(tempDir('lab-handler-src-'), 'handler.ts');
    writeFileSync(
      source,
      "import { IAMClient } from '@aws-sdk/client-iam';\nexport const handler = async () => typeof IAMClient;\n",
    );
    const out = tempDir('lab-handler-out-');
    const bundling = new HandlerBundling({ ...options, entry: source, format: 'esm' });
    expect(bundling.tryBundle(out)).toBe(true);
    expect(existsSync(join(out, 'index.mjs'))).toBe(true);
    const bundle = readFileSync(join(out, 'index.mjs'), 'utf8');
    expect(bundle).toContain('from "@aws-sdk/client-iam"');
    expect(bundle).toMatch(/export \{[^}]*handler/);
    expect(handlerName(bundling, 'handler')).toBe('index.handler');
    expect(bundling.target).toBe('node22');
  });

  it('writes index.js for CommonJS', () => {
    const source = join(tempDir('lab-handler-src-'), 'handler.ts');
    writeFileSync(source, 'export const handler = async () => 1;\n');
    const out = tempDir('lab-handler-out-');
    expect(new HandlerBundling({ ...options, entry: source, format: 'cjs' }).tryBundle(out)).toBe(true);
    expect(readFileSync(join(out, 'index.js'), 'utf8')).toContain('module.exports');
  });

  it('throws esbuild`s error for a handler that does not compile, never falling back to Docker', () => {
    const source = join(tempDir('lab-handler-src-'), 'handler.ts');
    writeFileSync(source, "import { nothing } from './missing.ts';\nexport const handler = nothing;\n");
    const bundling = new HandlerBundling({ ...options, entry: source, format: 'esm' });
    expect(() => bundling.tryBundle(tempDir('lab-handler-out-'))).toThrow(/missing\.ts/);
  });

  it('names the runtime when it is not a Node.js one', () => {
    expect(
      () =>
        new HandlerBundling({
          ...options,
          runtime: lambda.Runtime.PYTHON_3_12,
          entry: '/x.ts',
          format: 'esm',
        }),
    ).toThrow('handler /x.ts: runtime python3.12 is not a Node.js runtime (allowed: nodejs<N>.x)');
  });
});
