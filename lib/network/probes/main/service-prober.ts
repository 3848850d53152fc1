/**
 * `node /probes/service-prober.mjs --target 10.43.0.12:80[@<start epoch ms>] [--target ...]
 *  [--samples 1] [--attempt-timeout-ms 20] [--give-up-ms 60000]`
 * Measures time-to-connect (experiment E9) and prints its ServiceProberResult as one JSON line.
 */
import { logLine, runProbe } from '../probe-main.ts';
import { parseProberTarget, samplePlan } from '../service-prober.ts';
import { runServiceProber } from '../service-prober-net.ts';

const PROBE = 'service-prober';

runProbe(
  PROBE,
  {
    target: { kind: 'strings', description: 'host:port[@start epoch ms], one sample each' },
    samples: { kind: 'int', min: 1, max: 10_000, default: 1, description: 'repeat a single target' },
    'attempt-timeout-ms': {
      kind: 'int',
      min: 1,
      max: 60_000,
      default: 20,
      description: 'limit of each attempt',
    },
    'give-up-ms': { kind: 'int', min: 1, default: 60_000, description: 'give a sample up after this' },
  },
  (flags) => {
    const targets = samplePlan(flags.target.map(parseProberTarget), flags.samples);
    logLine(PROBE, `probing ${targets.length} samples, attempts of ${flags['attempt-timeout-ms']} ms`);
    return runServiceProber(targets, {
      attemptTimeoutMs: flags['attempt-timeout-ms'],
      giveUpMs: flags['give-up-ms'],
    });
  },
);
