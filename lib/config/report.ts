import type { LoadedLabConfig } from './load.ts';
import { LabConfigError } from './problems.ts';
import { assertLlmGatewayLab, LabNotAvailableError } from './sections.ts';

/**
 * For the synthesizers' entry points: print warnings, and on a bad configuration print every
 * problem and exit 1 instead of a stack trace. `networkLab`: this synthesizer builds the network
 * lab too (the manifests do; the CDK stack does not yet).
 */
export function reportConfigAndExitOnError(
  load: () => LoadedLabConfig,
  synthesizes: string,
  options: { readonly networkLab?: boolean } = {},
): LoadedLabConfig {
  try {
    const loaded = load();
    for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`);
    if (!options.networkLab) assertLlmGatewayLab(loaded.config, synthesizes);
    return loaded;
  } catch (error) {
    if (!(error instanceof LabConfigError) && !(error instanceof LabNotAvailableError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
