/**
 * E9 (watch mode, the default): `node /probes/service-prober.mjs --target 10.43.0.12:80
 *  [--target ...] [--attempt-timeout-ms 20] [--give-up-ms 60000] [--ready-file /out/probing.json]`
 * probes every address from before its Service exists and prints its WatchProberOutput; the
 * runner, which knows when each Service was accepted, turns it into samples.
 * `--mode sequential` with `--target host:port[@<start epoch ms>]` and `--samples` times each
 * target from its start (a calibration on loopback) and prints a ServiceProberResult.
 * One JSON line on stdout either way.
 */
import { writeFileSync } from 'node:fs';
import { parseHostPort } from '../flags.ts';
import { logLine, runProbe } from '../probe-main.ts';
import { parseProberTarget, samplePlan } from '../service-prober.ts';
import { runServiceProber, watchTargets } from '../service-prober-net.ts';

const PROBE = 'service-prober';

runProbe(
  PROBE,
  {
    mode: { kind: 'string', default: 'watch', description: 'watch (E9) or sequential' },
    target: { kind: 'strings', description: 'host:port (watch) or host:port[@start epoch ms] (sequential)' },
    samples: {
      kind: 'int',
      min: 1,
      max: 10_000,
      default: 1,
      description: 'repeat a single target (sequential)',
    },
    'attempt-timeout-ms': {
      kind: 'int',
      min: 1,
      max: 60_000,
      default: 20,
      description: 'limit of each attempt',
    },
    'give-up-ms': { kind: 'int', min: 1, default: 60_000, description: 'give a sample up after this' },
    'ready-file': {
      kind: 'string',
      default: '',
      description: 'written once every address had its first attempt answered or timed out (watch)',
    },
  },
  (flags) => {
    const options = { attemptTimeoutMs: flags['attempt-timeout-ms'], giveUpMs: flags['give-up-ms'] };
    if (flags.mode === 'watch') {
      const targets = flags.target.map((raw) => parseHostPort('target', raw));
      if (targets.length === 0) throw new Error('--target is required (host:port, may repeat)');
      logLine(PROBE, `watching ${targets.length} addresses, attempts of ${options.attemptTimeoutMs} ms`);
      return watchTargets(targets, {
        ...options,
        onProbing: (since) => {
          if (flags['ready-file'] !== '')
            writeFileSync(flags['ready-file'], `${JSON.stringify({ probingSinceEpochMs: since })}\n`);
        },
      });
    }
    if (flags.mode !== 'sequential')
      throw new Error(`--mode must be watch or sequential, got '${flags.mode}'`);
    const targets = samplePlan(flags.target.map(parseProberTarget), flags.samples);
    logLine(PROBE, `probing ${targets.length} samples, attempts of ${options.attemptTimeoutMs} ms`);
    return runServiceProber(targets, options);
  },
);
