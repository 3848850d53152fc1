import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type AppProps, type Chart, YamlOutputType } from 'cdk8s';
import { stringify } from 'yaml';
import type { NetworkCell } from '../../lib/config/network.ts';
import { lbEntriesPerService } from '../../lib/config/network-rules.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { ciliumValues } from '../../lib/network/cilium-values.ts';
import { cellDescription } from '../../lib/network/topology.ts';
import { networkPrerequisites } from '../../lib/prereqs/prerequisites.ts';
import { RUNNER_ON_DEMAND_DIR, STUDY_RUNNER_CHART } from '../../lib/study/topology.ts';
import { LabApp } from '../lab-app.ts';
import { cellLabels } from './common.ts';
import { FortioClientJobsChart } from './fortio-clients.ts';
import { FortioServersChart } from './fortio-servers.ts';
import { HostProbeChart } from './host-probe.ts';
import { MeshPoliciesChart } from './mesh-policies.ts';
import { CellNamespacesChart } from './namespaces.ts';
import { NodeProbeJobsChart, NodeProbesChart } from './node-probes.ts';
import { ServiceScaleChart } from './service-scale.ts';
import { NetworkStudyRunnerChart } from './study-runner.ts';

/** Folder (in a cell's folder) of the client Jobs: outside the apply order, they start load on creation. */
export const CELL_JOBS_DIR = 'jobs';

/** LB map entries the largest E9 step needs on a cell (Services x entries per Service). */
export function lbEntriesNeeded(config: LabConfig): number {
  const scale = config.network.experiments.serviceScale;
  return Math.max(...scale.steps) * lbEntriesPerService(scale.backendsPerService);
}

/**
 * The charts of one network-lab cell, in apply order: namespaces (and the cell's description),
 * fortio servers, the Istio policies on cells with a mesh, the E9 backend, the host probe when
 * `network.hostProbe` (off by default: an operator's tool, the runner never uses it), the lab's Node
 * probes (their bundles and the SSE server).
 */
export function buildNetworkCellApp(config: LabConfig, cell: NetworkCell, props: AppProps = {}): LabApp {
  const app = new LabApp({
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
    outputFileExtension: '.yaml',
    ...props,
  });
  const { network } = config;
  const labels = cellLabels(cell.name);
  const withMesh = cell.mesh !== 'none';
  const namespaces = new CellNamespacesChart(app, '00-namespaces', {
    labels,
    cell: cellDescription(config, cell, lbEntriesNeeded(config)),
    ciliumValues: ciliumValues(network, cell),
  });
  const servers = new FortioServersChart(app, '10-fortio', { labels, cell: cell.name, withMesh, network });
  servers.addDependency(namespaces);
  let last: Chart = servers;
  if (withMesh) {
    const policies = new MeshPoliciesChart(app, '20-mesh-policies', { labels });
    policies.addDependency(servers);
    last = policies;
  }
  const scale = new ServiceScaleChart(app, '30-service-scale', { labels, cell: cell.name, network });
  scale.addDependency(last);
  last = scale;
  if (network.hostProbe) {
    const probe = new HostProbeChart(app, '40-host-probe', {
      labels,
      cell: cell.name,
      image: network.probeImage,
    });
    probe.addDependency(last);
    last = probe;
  }
  const nodeProbes = new NodeProbesChart(app, '50-node-probes', {
    labels,
    cell: cell.name,
    withMesh,
    config,
  });
  nodeProbes.addDependency(last);
  return app;
}

/** The chart (file) name of a cell's study runner: applied last, it starts the study on creation. */
/** The runner's file: the first lab's name, so `lab run` finds it on either lab's host. */
export const NETWORK_RUNNER_CHART = STUDY_RUNNER_CHART;

/**
 * The cell's study runner (charts/network/study-runner.ts), in the cell's folder after the other
 * charts when `runner.autoStart`, else in its `runner/` folder for `lab run`, as the first lab's.
 */
export function buildNetworkRunnerApp(config: LabConfig, cell: NetworkCell, outdir: string): LabApp {
  const app = new LabApp({ outdir, outputFileExtension: '.yaml' });
  new NetworkStudyRunnerChart(app, NETWORK_RUNNER_CHART, { labels: cellLabels(cell.name), config, cell });
  return app;
}

/** The client Jobs of a cell (fortio and the Node probes), for `jobs/`. */
export function buildNetworkJobsApp(config: LabConfig, cell: NetworkCell, outdir: string): LabApp {
  const app = new LabApp({
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
    outputFileExtension: '.yaml',
    outdir,
  });
  new FortioClientJobsChart(app, 'fortio-clients', {
    labels: cellLabels(cell.name),
    cell: cell.name,
    withMesh: cell.mesh !== 'none',
    network: config.network,
  });
  new NodeProbeJobsChart(app, 'node-probes', {
    labels: cellLabels(cell.name),
    cell: cell.name,
    withMesh: cell.mesh !== 'none',
    config,
  });
  return app;
}

/**
 * Writes every cell of the network lab into `outdir/<cell>/`: its charts in apply order (the study
 * runner last), its client Jobs in `jobs/`, `prerequisites.json` and the Helm values files the
 * prerequisites name.
 */
export function synthesizeNetworkLab(config: LabConfig, outdir: string): void {
  for (const cell of config.network.cells) synthesizeNetworkCell(config, cell, join(outdir, cell.name));
}

/** Writes one cell's folder (what its host applies): charts, jobs/, prerequisites.json, Helm values. */
export function synthesizeNetworkCell(config: LabConfig, cell: NetworkCell, dir: string): void {
  buildNetworkCellApp(config, cell, { outdir: dir }).synth();
  buildNetworkJobsApp(config, cell, join(dir, CELL_JOBS_DIR)).synth();
  buildNetworkRunnerApp(
    config,
    cell,
    config.runner.autoStart ? dir : join(dir, RUNNER_ON_DEMAND_DIR),
  ).synth();
  const list = networkPrerequisites(config, cell);
  for (const prerequisite of list.prerequisites) {
    if (prerequisite.kind !== 'helm' || !prerequisite.values || !prerequisite.valuesFile) continue;
    const file = join(dir, prerequisite.valuesFile);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, stringify(prerequisite.values));
  }
  writeFileSync(join(dir, 'prerequisites.json'), `${JSON.stringify(list, null, 2)}\n`);
}
