import { createHash } from 'node:crypto';
import type { JobObject } from '../../../lib/runner/ports.ts';

/**
 * The fake cell's physics, as pure functions and figures (fake-cell.ts holds its state): how long
 * a deleted pod takes to go, how much other pods on the node slow a fortio call, when a new
 * Service's address starts to answer, and the shapes of fortio's histograms.
 */

/** How long a deleted Job's pod takes to terminate (the Jobs' terminationGracePeriodSeconds 1, plus the kubelet). */
export const POD_TERMINATION_MS = 2_500;

/** From a Job's creation until its container runs (images cached by the bootstrap): once per pod. */
export const POD_START_MS = 2_000;

/** What one command of a Job's container takes when it has no `-t` duration: a curl, a probe, a host command. */
export const COMMAND_MS = 3_000;

/** The cases a grouped mTLS Job's curls cover: `<case id> <url>` pairs after `sh -c <script> <name>`. */
export function mtlsCasesOf(command: readonly string[]): { id: string; url: string }[] {
  const pairs = command.slice(4);
  return Array.from({ length: Math.floor(pairs.length / 2) }, (_, i) => ({
    id: pairs[2 * i],
    url: pairs[2 * i + 1],
  }));
}

/**
 * How long a Job runs from its creation: its pod's start, then its load (fortio's `-t`), or one
 * command, or one curl per case of a grouped mTLS Job, one after the other.
 */
export function jobDurationMs(job: JobObject): number {
  const { args, command } = containerOf(job);
  const seconds = flag(args, '-t');
  if (seconds !== undefined) return POD_START_MS + Number(seconds.replace('s', '')) * 1000;
  if (job.metadata.labels['app.kubernetes.io/component'] === 'mtls-client')
    return POD_START_MS + mtlsCasesOf(command).length * COMMAND_MS;
  return POD_START_MS + COMMAND_MS;
}

/** Components whose pods load the node's CPU while they run (the host commands are a blink). */
export const LOADING_COMPONENTS = [
  'fortio-client',
  'download-client',
  'sse-client',
  'service-prober',
  'conntrack-driver',
];

/**
 * How much slower a fortio call gets per other loading pod on the node: the client, the server
 * and the datapath share the node's vCPUs (an estimate of the fake, not a measured figure).
 */
export const CONTENTION_PER_POD = 0.15;

/** A deterministic number in [0, 1) from a string: the same Job gets the same numbers. */
export function unit(seed: string): number {
  return createHash('sha256').update(seed).digest().readUInt32BE(0) / 2 ** 32;
}

export const PERCENTILES = [50, 90, 99];

/** Addresses of the cell's own Services the runner cannot list: `kubernetes` and K3s' cluster DNS. */
export const SYSTEM_CLUSTER_IPS = ['10.43.0.1', '10.43.0.10'];

/**
 * When a new Service's ClusterIP starts to answer, after its creation (ms), on a cell that already
 * has `services` Services. kube-proxy (iptables, nftables, ipvs) syncs on the Service at once,
 * before the EndpointSlice exists, and writes a REJECT rule; the sync that adds the endpoint waits
 * for minSyncPeriod (1 s) after that one; each sync rewrites rules for every Service, so it takes
 * longer as Services grow (most for iptables-restore). Cilium's agent writes the Service's LB map
 * entries as the EndpointSlice arrives: a few ms, nearly independent of the count.
 */
export function programmingDelays(
  datapath: string,
  services: number,
  jitter: number,
): { rejectMs: number; programMs: number } {
  if (datapath === 'cilium') {
    const ms = 6 + 8 * jitter + 0.000_2 * services;
    return { rejectMs: ms, programMs: ms };
  }
  const perService = datapath === 'iptables' ? 0.12 : datapath === 'ipvs' ? 0.03 : 0.02;
  const sync = 12 + perService * services + 10 * jitter;
  return { rejectMs: sync, programMs: 1_000 + sync };
}

/** A slow fortio Job's latency against its arm's: beyond the +-3% repeat spread, not invalid. */
export const SLOW_FORTIO_FACTOR = 1.08;

/**
 * A fortio duration histogram (seconds) of `count` calls around `baseSeconds`, as fortio writes
 * it: 24 buckets between Min and Max with a right-skewed shape, cumulative percents, and
 * percentiles interpolated inside their bucket. `jitter` (0-1) moves the whole distribution by
 * +-1% (repeats of one arm stay within the spec's +-3%).
 */
export function latencyHistogram(baseSeconds: number, jitter: number, count: number) {
  const scale = baseSeconds * (1 + (jitter - 0.5) * 0.02);
  const min = scale * 0.41;
  const width = (scale * 2.2 - min) / 24;
  const weights = Array.from({ length: 24 }, (_, i) => Math.exp(-(((i - 5) / 3.2) ** 2)) + 0.01 * (24 - i));
  const total = weights.reduce((a, b) => a + b, 0);
  let cumulative = 0;
  let sum = 0;
  const data = weights.map((w, i) => {
    const n = Math.round((w / total) * count);
    cumulative += n;
    const start = min + i * width;
    sum += n * (start + width / 2);
    return { Start: start, End: start + width, Count: n, Percent: 0, cumulative };
  });
  const calls = cumulative;
  const buckets = data.map(({ cumulative: upTo, ...b }) => ({
    ...b,
    Percent: (100 * upTo) / Math.max(1, calls),
  }));
  const percentile = (p: number) => {
    let before = 0;
    for (const b of buckets) {
      if (p <= b.Percent) return b.Start + ((p - before) / (b.Percent - before)) * (b.End - b.Start);
      before = b.Percent;
    }
    return buckets[buckets.length - 1].End;
  };
  const avg = calls > 0 ? sum / calls : scale;
  return {
    avg,
    histogram: {
      Count: calls,
      Min: min,
      Max: min + 24 * width,
      Sum: sum,
      Avg: avg,
      StdDev: scale * 0.38,
      Data: buckets,
      Percentiles: PERCENTILES.map((p) => ({ Percentile: p, Value: percentile(p) })),
    },
  };
}

/** fortio's default `-r 0.001` on sub-millisecond calls: one bucket, percentiles at 0.5/0.9/0.99 of it. */
export function coarseHistogram(count: number) {
  return {
    Count: count,
    Min: 0.000_12,
    Max: 0.000_97,
    Sum: count * 0.000_2,
    Avg: 0.000_2,
    StdDev: 0.000_08,
    Data: [{ Start: 0, End: 0.001, Percent: 100, Count: count }],
    Percentiles: PERCENTILES.map((p, i) => ({ Percentile: p, Value: [0.0005, 0.0009, 0.00099][i] })),
  };
}

/** Container command and args of a Job's first container. */
export function containerOf(job: JobObject): {
  command: string[];
  args: string[];
  env: Record<string, string>;
} {
  const spec = job.spec as { template: { spec: { containers: Record<string, unknown>[] } } };
  const c = spec.template.spec.containers[0] as {
    command?: string[];
    args?: string[];
    env?: { name: string; value: string }[];
  };
  return {
    command: c.command ?? [],
    args: c.args ?? [],
    env: Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value])),
  };
}

export function flag(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i === -1 ? undefined : args[i + 1];
}

export function matches(labels: Record<string, string>, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').every((req) => {
    if (req.startsWith('!')) return !(req.slice(1) in labels);
    const [k, v] = req.split('=');
    return v === undefined ? k in labels : labels[k] === v;
  });
}
