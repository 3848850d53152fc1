import { App, type AppProps, YamlOutputType } from 'cdk8s';
import type { LabConfig } from '../lib/config/schema.ts';
import { LabNamespace } from './namespace.ts';

/** Labels on every object of the lab, so `kubectl delete -l` can find them all. */
export function labLabels(): Record<string, string> {
  return { 'app.kubernetes.io/part-of': 'llm-gateway-lab' };
}

/**
 * Builds the cluster side of the lab from one configuration. Chart ids are the manifest file
 * names; dependencies between charts give the apply order.
 */
export function buildLabApp(config: LabConfig, props: AppProps = {}): App {
  const app = new App({
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
    outputFileExtension: '.yaml',
    ...props,
  });
  new LabNamespace(app, '00-namespace', { name: config.namespace, labels: labLabels() });
  return app;
}
