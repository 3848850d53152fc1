import { Testing } from 'cdk8s';
import { buildLabApp } from '../../charts/lab-app.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { tempDir } from '../temp.ts';
import type { Manifest } from './validate.ts';

export interface SynthesizedLab {
  readonly config: LabConfig;
  /** Objects per chart id, in apply order. */
  readonly charts: Record<string, Manifest[]>;
  readonly objects: Manifest[];
}

/** Synthesizes the lab for a configuration override, in memory. */
export function synthLab(overrides: unknown = {}): SynthesizedLab {
  const config = parseLabConfig(overrides);
  const app = buildLabApp(config, { outdir: tempDir('lab-synth-') });
  const charts: Record<string, Manifest[]> = {};
  for (const chart of app.charts) charts[chart.node.id] = Testing.synth(chart) as Manifest[];
  return { config, charts, objects: Object.values(charts).flat() };
}

/** The one object of a kind and name; fails when absent or ambiguous. */
export function find(objects: readonly Manifest[], kind: string, name: string): Manifest {
  const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0];
}

export function container(workload: Manifest, name?: string) {
  const containers = workload.spec.template.spec.containers as { name: string }[];
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary container fields
  return (name ? containers.find((c) => c.name === name) : containers[0]) as any;
}

export function envOf(c: { env?: { name: string; value?: string }[] }): Record<string, string | undefined> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
}
