import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { App, type AppProps, type Chart, Yaml, YamlOutputType } from 'cdk8s';
import { labPlacement } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { AI_GATEWAY_CONFIG_CHART } from '../lib/prereqs/prerequisites.ts';
import { AiGatewayChart, AiGatewayConfigChart, aiGatewayEnabled } from './ai-gateway.ts';
import { KubeProxyBaselineChart } from './baseline.ts';
import { labLabels } from './common.ts';
import { EndpointPickersChart } from './endpoint-picker.ts';
import { GpuPlumbingChart } from './gpu.ts';
import { ModelServersChart } from './model-servers.ts';
import { LabNamespace } from './namespace.ts';
import { ResultsStoreChart, resultsOnClaim } from './results-store.ts';
import { RoutersChart } from './routers.ts';
import { StandaloneEnvoysChart } from './standalone-envoy.ts';

export { labLabels } from './common.ts';

/** The results claim and its server (`runner.results.volume: claim` only). */
export const RESULTS_CHART = '05-results';

/**
 * The lab's cdk8s app. Each chart is written to `<chart id>.yaml`; the ids carry their apply
 * order (`00-namespace`, `10-gpu`, ...), which synth checks against the chart dependencies.
 * (cdk8s's own file-per-chart output would prefix them with a second index.)
 */
export class LabApp extends App {
  public override synth(): void {
    // Runs cdk8s's validation and dependency resolution; the YAML itself is written per chart.
    this.synthYaml();
    const charts: Chart[] = this.charts;
    const ids = charts.map((chart) => chart.node.id);
    const sorted = [...ids].sort();
    if (ids.join() !== sorted.join()) {
      throw new Error(`chart ids must sort in apply order; dependency order is ${ids.join(', ')}`);
    }
    mkdirSync(this.outdir, { recursive: true });
    for (const chart of charts) {
      Yaml.save(
        join(this.outdir, `${chart.node.id}${this.outputFileExtension}`),
        Object.values(chart.toJson()),
      );
    }
  }
}

/**
 * Builds the cluster side of the lab from one configuration: one chart per deployable unit,
 * each depending on what must exist before it.
 */
export function buildLabApp(config: LabConfig, props: AppProps = {}): LabApp {
  const app = new LabApp({
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
    outputFileExtension: '.yaml',
    ...props,
  });
  const labels = labLabels();
  const inLab = { namespace: config.namespace, labels };

  const namespace = new LabNamespace(app, '00-namespace', { name: config.namespace, labels });
  if (resultsOnClaim(config)) {
    // Before anything that writes results: the claim binds and its server holds it.
    const results = new ResultsStoreChart(app, RESULTS_CHART, { ...inLab, config });
    results.addDependency(namespace);
  }
  const placement = labPlacement(config);
  const gpu = new GpuPlumbingChart(app, '10-gpu', {
    labels,
    devicePluginImage: config.devicePlugin.image,
    runtimeClassName: placement.gpuRuntimeClass ?? null,
    gpuNodes: placement.replicas,
  });
  const servers = new ModelServersChart(app, '20-model-servers', { ...inLab, config });
  servers.addDependency(namespace, gpu);
  const baseline = new KubeProxyBaselineChart(app, '30-baseline', { ...inLab, config });
  baseline.addDependency(servers);
  const routers = new RoutersChart(app, '40-routers', { ...inLab, config });
  routers.addDependency(baseline);
  const epps = new EndpointPickersChart(app, '50-epp', { ...inLab, config });
  epps.addDependency(routers);
  const envoys = new StandaloneEnvoysChart(app, '60-envoy', { ...inLab, config });
  envoys.addDependency(epps);
  if (aiGatewayEnabled(config)) {
    // Envoy Gateway's configuration first: it needs the restart that prerequisites.json lists after it.
    const gatewayConfig = new AiGatewayConfigChart(app, AI_GATEWAY_CONFIG_CHART, { labels, config });
    gatewayConfig.addDependency(envoys);
    const aiGateway = new AiGatewayChart(app, '71-ai-gateway', { ...inLab, config });
    aiGateway.addDependency(gatewayConfig);
  }
  return app;
}

/** One chart's objects, for an installer that applies them through the API instead of files. */
export interface LabManifest {
  /** The chart id, as the file name in dist/: `20-model-servers`. */
  readonly chart: string;
  readonly objects: readonly Record<string, unknown>[];
}

/**
 * The lab's charts in apply order, as objects: what `cdk8s synth` writes to dist/<chart>.yaml, from
 * the same app (validated and dependency-ordered as synth does), without writing files.
 */
export function labManifests(config: LabConfig): LabManifest[] {
  const app = buildLabApp(config);
  app.synthYaml();
  return app.charts.map((chart) => ({
    chart: chart.node.id,
    objects: chart.toJson() as Record<string, unknown>[],
  }));
}
