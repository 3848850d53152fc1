import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

/** The repository root (this file is lib/node-bundle.ts). */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const cache = new Map<string, string>();

/**
 * One of the lab's in-cluster Node programs (the study runner, the network probes) as a single ES
 * module for Node, bundled in-process by esbuild from `entry` (relative to the repository root).
 * Built once per process; the output is the same wherever synth runs.
 */
export function nodeProgramBundle(entry: string, what: string): string {
  let text = cache.get(entry);
  if (text === undefined) {
    const result = buildSync({
      absWorkingDir: ROOT,
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      legalComments: 'none',
      banner: { js: `// ${what}, bundled from ${entry}.` },
    });
    text = result.outputFiles[0].text;
    cache.set(entry, text);
  }
  return text;
}
