import type { LatencyArm } from '../../network/study/model.ts';
import type {
  Attribution,
  AttributionComponent,
  AttributionInterval,
  AttributionPart,
  LatencyGroup,
  LatencyRow,
} from './table-rows.ts';

/**
 * The attribution of the mesh's added latency (docs/facts.md §N3, N6) to proxy hops, HTTP parsing
 * and encryption, with an uncertainty from the repeats' spread. Pure.
 */

type Input = 'plain' | 'mesh-mtls-off' | 'mesh-mtls' | 'mesh-l4' | 'mesh-l7';

/** Each part as a signed sum of arms' fixed-rate means. */
const TERMS: Readonly<Record<AttributionComponent | 'total', Readonly<Partial<Record<Input, 1 | -1>>>>> = {
  'proxy-hops': { 'mesh-mtls-off': 1, plain: -1, 'mesh-l7': -1, 'mesh-l4': 1 },
  'http-parsing': { 'mesh-l7': 1, 'mesh-l4': -1 },
  encryption: { 'mesh-mtls': 1, 'mesh-mtls-off': -1 },
  total: { 'mesh-mtls': 1, plain: -1 },
};

/**
 * The interval a difference of arm means can take given each arm's repeats: every arm's mean is
 * somewhere between its lowest and highest repeat, so the difference lies between the sums of the
 * extremes (interval arithmetic). Conservative on purpose: no distribution is assumed. A part
 * whose interval holds zero cannot be told from no cost at all; an arm with one repeat has no
 * spread to judge by.
 */
export function intervalOf(
  terms: Readonly<Partial<Record<Input, 1 | -1>>>,
  repeats: Readonly<Record<Input, readonly number[]>>,
): AttributionInterval {
  let lowMs = 0;
  let highMs = 0;
  let fewest = Number.POSITIVE_INFINITY;
  for (const [arm, sign] of Object.entries(terms) as [Input, 1 | -1][]) {
    const values = repeats[arm];
    fewest = Math.min(fewest, values.length);
    const min = Math.min(...values);
    const max = Math.max(...values);
    lowMs += sign > 0 ? min : -max;
    highMs += sign > 0 ? max : -min;
  }
  const distinguishable = fewest < 2 ? 'unknown' : lowMs > 0 || highMs < 0 ? 'yes' : 'no';
  return { lowMs, highMs, distinguishable };
}

/**
 * The added latency of the mesh, split from E3's and E4's fixed-rate means (docs/facts.md §N3):
 * - encryption = mesh-mtls - mesh-mtls-off (E3: the same sidecars and port, mTLS on against off);
 * - HTTP parsing = mesh-l7 - mesh-l4 (E4: the same sidecars, the `http-` port parsed, the `tcp-`
 *   port relayed);
 * - proxy hops = (mesh-mtls-off - plain) - HTTP parsing. mesh-mtls-off already goes through both
 *   sidecars on the `http-` port, so its difference to plain holds the hops AND the parsing;
 *   subtracting E4's parsing leaves the relay through two proxies, and the three parts add up to
 *   the total mesh-mtls - plain without counting the parsing twice.
 * E3 and E4 run at the same rate (E4 for 20 s instead of 25 s); the shares are of the total.
 * Each part carries its interval over the repeats (`intervalOf`).
 */
export function attributionOf(cell: string, latency: readonly LatencyRow[]): Attribution {
  const fixed = (group: LatencyGroup, arm: LatencyArm) =>
    latency.find((r) => r.cell === cell && r.group === group && r.arm === arm)?.fixed;
  const summaries = {
    plain: fixed('E3', 'plain'),
    'mesh-mtls-off': fixed('E3', 'mesh-mtls-off'),
    'mesh-mtls': fixed('E3', 'mesh-mtls'),
    'mesh-l4': fixed('E4', 'mesh-l4'),
    'mesh-l7': fixed('E4', 'mesh-l7'),
  };
  const missing = Object.entries(summaries)
    .filter(([, v]) => v === undefined)
    .map(([arm]) => `${arm.startsWith('mesh-l') ? 'E4' : 'E3'} ${arm}`);
  if (missing.length > 0) {
    return { cell, available: false, reason: `no valid fixed-rate run of ${missing.join(', ')}` };
  }
  const arms = Object.keys(summaries) as Input[];
  const present = summaries as Record<Input, NonNullable<(typeof summaries)[Input]>>;
  const v = Object.fromEntries(arms.map((a) => [a, present[a].meanMs])) as Record<Input, number>;
  const repeats = Object.fromEntries(arms.map((a) => [a, present[a].repeatMeansMs])) as Record<
    Input,
    readonly number[]
  >;
  const sum = (terms: Readonly<Partial<Record<Input, 1 | -1>>>) =>
    (Object.entries(terms) as [Input, number][]).reduce((total, [arm, sign]) => total + sign * v[arm], 0);
  const totalMs = sum(TERMS.total);
  const part = (component: AttributionComponent, label: string, formula: string): AttributionPart => {
    const ms = sum(TERMS[component]);
    return {
      component,
      label,
      formula,
      ms,
      share: totalMs === 0 ? Number.NaN : ms / totalMs,
      interval: intervalOf(TERMS[component], repeats),
    };
  };
  const parts = [
    part(
      'proxy-hops',
      'Proxy hops (two sidecars relaying)',
      '(E3 mesh-mtls-off - E3 plain) - (E4 mesh-l7 - E4 mesh-l4)',
    ),
    part('http-parsing', 'HTTP parsing', 'E4 mesh-l7 - E4 mesh-l4'),
    part('encryption', 'Encryption (mTLS)', 'E3 mesh-mtls - E3 mesh-mtls-off'),
  ];
  return {
    cell,
    available: true,
    parts,
    totalMs,
    totalInterval: intervalOf(TERMS.total, repeats),
    inputs: v,
    repeats: Object.fromEntries(arms.map((a) => [a, present[a].repeats])) as Record<Input, number>,
  };
}
