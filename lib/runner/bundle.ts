import { nodeProgramBundle } from '../node-bundle.ts';

/** The runner as one ES module for Node, bundled from lib/runner/main.ts (lib/node-bundle.ts). */
export function runnerBundle(): string {
  return nodeProgramBundle('lib/runner/main.ts', 'Lab study runner');
}

/** The results server (charts/results-store.ts), bundled from lib/runner/results-server-main.ts. */
export function resultsServerBundle(): string {
  return nodeProgramBundle('lib/runner/results-server-main.ts', 'Lab results server');
}
