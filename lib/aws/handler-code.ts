import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, type BundlingOptions, DockerImage, type ILocalBundling } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';

/** The repository root (this file is lib/aws/handler-code.ts): esbuild's working folder. */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** How one Lambda handler is bundled: the choices NodejsFunction's `bundling` made before. */
export interface HandlerBundleProps {
  /** The handler's source file (absolute, or a `file:` URL). */
  readonly entry: string | URL;
  /** The Lambda runtime; esbuild targets its Node version (`nodejs22.x` -> `node22`). */
  readonly runtime: lambda.Runtime;
  /** `esm` writes index.mjs, `cjs` writes index.js (as NodejsFunction names them). */
  readonly format: 'esm' | 'cjs';
  /** Minify the bundle. */
  readonly minify: boolean;
  /** Modules the runtime provides, left out of the bundle (e.g. `@aws-sdk/*`). */
  readonly externalModules: readonly string[];
}

/**
 * The esbuild options of a handler: what NodejsFunction passed on esbuild's command line, run in
 * the project root through `npx --no-install esbuild` (docs/facts.md §7 point 5). Public fields:
 * aws-cdk-lib's asset cache key is the JSON of the bundling options, so two handlers differ in it
 * by these fields; a function field would be dropped from it.
 */
export class HandlerBundling implements ILocalBundling {
  /** The entry, relative to the repository root when inside it, else absolute. */
  readonly entry: string;
  readonly target: string;
  readonly format: 'esm' | 'cjs';
  readonly minify: boolean;
  readonly external: string[];

  constructor(props: HandlerBundleProps) {
    const entry = resolve(typeof props.entry === 'string' ? props.entry : fileURLToPath(props.entry));
    // Relative inside the repository: the cache key, like the bundle, is the same in any clone.
    this.entry = entry.startsWith(`${ROOT}/`) ? relative(ROOT, entry) : entry;
    const node = /^nodejs(\d+)/.exec(props.runtime.name);
    if (!node) {
      throw new Error(
        `handler ${this.entry}: runtime ${props.runtime.name} is not a Node.js runtime (allowed: nodejs<N>.x)`,
      );
    }
    this.target = `node${node[1]}`;
    this.format = props.format;
    this.minify = props.minify;
    this.external = [...props.externalModules];
  }

  /** The bundle's file name, and so the first half of the Lambda `Handler` (`index.<export>`). */
  get outputFile(): string {
    return this.format === 'esm' ? 'index.mjs' : 'index.js';
  }

  /**
   * Bundles in this process through esbuild's JavaScript API (no `npx` and shell per handler, no
   * Docker). Never returns false, which would make aws-cdk-lib fall back to Docker: a failure
   * throws, and aws-cdk-lib reports it as the asset's bundling error.
   */
  tryBundle(outputDir: string): boolean {
    let esbuild: typeof import('esbuild');
    try {
      esbuild = createRequire(import.meta.url)('esbuild');
    } catch (error) {
      throw new Error(
        `bundling the Lambda handler ${this.entry} needs esbuild, a dependency of the lab (package.json); run npm ci: ${(error as Error).message}`,
      );
    }
    esbuild.buildSync({
      absWorkingDir: ROOT,
      entryPoints: [resolve(ROOT, this.entry)],
      bundle: true,
      target: this.target,
      platform: 'node',
      format: this.format,
      outfile: join(outputDir, this.outputFile),
      minify: this.minify,
      external: this.external,
      logLevel: 'warning',
    });
    return true;
  }
}

/**
 * A Lambda handler's code, bundled by esbuild in the synthesizing process. The asset is hashed by
 * its output, as NodejsFunction's is (`AssetHashType.OUTPUT` in bundling.js, `Bundling.bundle`),
 * so the same bundle gives the same asset and template. Use with `handler: handlerName(...)`.
 */
export function handlerCode(bundling: HandlerBundling): lambda.Code {
  const options: BundlingOptions = {
    // Required by the type, never run: tryBundle bundles or throws (NodejsFunction names the same
    // placeholder when it bundles locally, bundling.js: `DockerImage.fromRegistry("dummy")`).
    image: DockerImage.fromRegistry('dummy'),
    local: bundling,
  };
  return lambda.Code.fromAsset(ROOT, { assetHashType: AssetHashType.OUTPUT, bundling: options });
}

/** The Lambda `Handler` of an export of the bundle: `index.<export>`. */
export function handlerName(bundling: HandlerBundling, exportName: string): string {
  return `${bundling.outputFile.replace(/\.m?js$/, '')}.${exportName}`;
}
