import { copyFileSync, readdirSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { App, Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { tempDir } from '../temp.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** What a synthesized Lambda function runs: its asset folder's files and its `Handler`. */
export interface StagedHandler {
  /** The file names in the function's asset folder. */
  readonly files: string[];
  /** The function's `Handler` property (`<file>.<export>`). */
  readonly handler: string;
  /** The bundle, loaded as the Lambda runtime would load it (externals from the lab's node_modules). */
  load(): Record<string, unknown>;
}

/**
 * The bundle a function of a synthesized stack runs, read from the assembly folder: its code's S3
 * key is `<asset hash>.zip`, its folder `asset.<asset hash>`. `load` copies the bundle's file next
 * to a link to the repository's node_modules (the runtime provides the AWS SDK, which the bundle
 * leaves out) and loads it with Node's loader, as the runtime does.
 */
export function stagedHandler(stack: Stack, template: Template, fn: lambda.Function): StagedHandler {
  const id = stack.getLogicalId(fn.node.defaultChild as never);
  const properties = template.toJSON().Resources[id].Properties as {
    Code: { S3Key: string };
    Handler: string;
  };
  const hash = properties.Code.S3Key.replace(/\.zip$/, '');
  const folder = join((stack.node.root as App).outdir, `asset.${hash}`);
  const files = readdirSync(folder).sort();
  return {
    files,
    handler: properties.Handler,
    load() {
      const [file] = files;
      const dir = tempDir('lab-handler-');
      symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'));
      copyFileSync(join(folder, file), join(dir, file));
      // Node's own loader, not vitest's: require() loads an ES module too (Node 20.19 and later).
      return createRequire(import.meta.url)(join(dir, file)) as Record<string, unknown>;
    },
  };
}
