import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

/** The repository root (this file is lib/runner/bundle.ts). */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let cached: string | undefined;

/**
 * The runner as one ES module for Node, bundled in-process by esbuild from lib/runner/main.ts.
 * Built once per process; the output is the same wherever synth runs (paths relative to the
 * repository root).
 */
export function runnerBundle(): string {
  if (cached === undefined) {
    const result = buildSync({
      absWorkingDir: ROOT,
      entryPoints: ['lib/runner/main.ts'],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      legalComments: 'none',
      banner: { js: '// Lab study runner, bundled from lib/runner/main.ts by charts/study-runner.ts.' },
    });
    cached = result.outputFiles[0].text;
  }
  return cached;
}
