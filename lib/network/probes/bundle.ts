import { nodeProgramBundle } from '../../node-bundle.ts';

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

/**
 * One probe as a self-contained ES module for Node (only node: built-ins stay imports), bundled
 * like the study runner (lib/node-bundle.ts).
 */
export function probeBundle(name: ProbeName): string {
  return nodeProgramBundle(`lib/network/probes/main/${name}.ts`, `Network lab probe ${name}`);
}

/** Every probe's bundle keyed by its file name: the data of the probes' ConfigMap. */
export function probeBundles(): Record<string, string> {
  return Object.fromEntries(PROBE_NAMES.map((name) => [probeFileName(name), probeBundle(name)]));
}
