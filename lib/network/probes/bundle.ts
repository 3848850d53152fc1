import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

/** The repository root (this file is lib/network/probes/bundle.ts). */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The network lab's own probes; each is `lib/network/probes/main/<name>.ts`. */
export const PROBE_NAMES = ['sse-server', 'sse-client', 'service-prober', 'conntrack-driver'] as const;
export type ProbeName = (typeof PROBE_NAMES)[number];

/** Where a chart mounts the probes' ConfigMap in the probe containers (image `runner.image`). */
export const PROBES_MOUNT = '/probes';

/** The ConfigMap key of a probe's bundle. */
export function probeFileName(name: ProbeName): string {
  return `${name}.mjs`;
}

/** The container command that runs a probe from the mounted ConfigMap (flags follow). */
export function probeCommand(name: ProbeName): string[] {
  return ['node', `${PROBES_MOUNT}/${probeFileName(name)}`];
}

const cache = new Map<ProbeName, string>();

/**
 * One probe as a self-contained ES module for Node (only node: built-ins stay imports), bundled
 * in-process by esbuild like the study runner (lib/runner/bundle.ts). Built once per process.
 */
export function probeBundle(name: ProbeName): string {
  let text = cache.get(name);
  if (text === undefined) {
    const entry = `lib/network/probes/main/${name}.ts`;
    const result = buildSync({
      absWorkingDir: ROOT,
      entryPoints: [entry],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      write: false,
      legalComments: 'none',
      banner: { js: `// Network lab probe ${name}, bundled from ${entry}.` },
    });
    text = result.outputFiles[0].text;
    cache.set(name, text);
  }
  return text;
}

/** Every probe's bundle keyed by its file name: the data of the probes' ConfigMap. */
export function probeBundles(): Record<string, string> {
  return Object.fromEntries(PROBE_NAMES.map((name) => [probeFileName(name), probeBundle(name)]));
}
