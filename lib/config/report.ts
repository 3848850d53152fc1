import type { LoadedLabConfig } from './load.ts';
import { LabConfigError } from './problems.ts';

/**
 * For the synthesizers' entry points: print warnings, and on a bad configuration print every
 * problem and exit 1 instead of a stack trace. Both synthesizers build both labs.
 */
export function reportConfigAndExitOnError(load: () => LoadedLabConfig): LoadedLabConfig {
  try {
    const loaded = load();
    for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`);
    return loaded;
  } catch (error) {
    if (!(error instanceof LabConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
