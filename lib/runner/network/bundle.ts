import { nodeProgramBundle } from '../../node-bundle.ts';

/**
 * The network runner as one ES module for Node, bundled from lib/runner/network/entry.ts. Its own
 * bundle: each lab's runner pod carries only its lab's code (the first lab's stays under its
 * size budget, test/runner/study-runner-chart.test.ts).
 */
export function networkRunnerBundle(): string {
  return nodeProgramBundle('lib/runner/network/entry.ts', 'Lab network study runner');
}
