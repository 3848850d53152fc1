import { endpointPickerArgs, endpointPickerProps } from '../../charts/endpoint-picker.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { PodState } from '../../lib/runner/ports.ts';
import { type Arm, studyArms } from '../../lib/study/arms.ts';
import type { BenchmarkSpec } from '../../lib/study/plan.ts';
import { SCORES_LINE, SCORES_LINE_VERBOSITY } from '../../lib/study/precise-evidence.ts';
import { armById, EPP_CONTAINER, eppName } from '../../lib/study/topology.ts';

/**
 * The llm-d EPP's pods and container log in the fake cluster. Each restart of its Deployment is a
 * new pod with a new log. While a client's load goes through the llm-d arm, its scorer logs one
 * "Got pod scores" line per request, as llm-d-inference-scheduler v0.3.2 does with
 * `--zap-encoder json` (docs/facts.md §3.7), only when its `--v` is 4 or more: the verbosity comes
 * from the chart's own arguments unless a test sets it. When the hashes match, a request that hits
 * the cache (the load's hit rate) finds blocks on the replica it is served by; when they do not,
 * every map is empty.
 */
export interface FakeEppScorer {
  /** The scorer's block hashes equal the replicas'. @default true */
  readonly hashesMatch?: boolean;
  /** The EPP's `--v`. @default the chart's */
  readonly verbosity?: number;
}

interface EppPod {
  readonly name: string;
  readonly log: { at: number; line: string }[];
}

export class FakeEpps {
  private readonly pods = new Map<string, EppPod>();
  private readonly verbosity = new Map<string, number>();
  private readonly generations = new Map<string, number>();
  /** The study's arms by id: a load is scored at every tick of the fake clock. */
  private readonly arms: ReadonlyMap<string, Arm>;

  constructor(
    private readonly config: LabConfig,
    private readonly scorer: FakeEppScorer = {},
  ) {
    this.arms = new Map(studyArms(config).map((arm) => [arm.id, arm]));
    for (let pair = 0; pair < config.study.parallelism; pair++) {
      for (const arm of studyArms(config).filter((a) => a.frontEnd === 'llmd')) {
        const name = eppName(config, arm.frontEndId, pair);
        if (this.pods.has(name)) continue;
        const args = endpointPickerArgs(endpointPickerProps(config, arm, pair));
        this.verbosity.set(name, scorer.verbosity ?? Number(args[args.indexOf('--v') + 1]));
        this.start(name, 0);
      }
    }
  }

  /** A rollout restart: a new pod, whose log starts at `at`. */
  restart(deployment: string, at: number): void {
    if (this.pods.has(deployment)) this.start(deployment, at);
  }

  /** The EPP's pods for `app=<name>`, or undefined when `name` is no llm-d EPP. */
  podsOf(name: string): PodState[] | undefined {
    const pod = this.pods.get(name);
    return pod ? [{ name: pod.name, uid: pod.name, ready: true }] : undefined;
  }

  /** A pod's log lines written at or after `since` (ms), or undefined when it is no llm-d EPP pod. */
  logOf(podName: string, container: string | undefined, since: number | undefined): string | undefined {
    const pod = [...this.pods.values()].find((p) => p.name === podName);
    if (!pod) return undefined;
    if (container !== EPP_CONTAINER)
      throw new Error(`fake cluster: ${podName} has no container ${container}`);
    return pod.log
      .filter((l) => since === undefined || l.at >= since)
      .map((l) => l.line)
      .join('\n');
  }

  /** Requests `from`..`from + count` of a load served by `replica`, scored at `at`. */
  scored(
    spec: BenchmarkSpec,
    replica: number,
    from: number,
    count: number,
    hitRate: number,
    at: number,
  ): void {
    if (spec.target.kind !== 'arm') return;
    const arm = this.arms.get(spec.target.arm) ?? armById(this.config, spec.target.arm);
    if (arm.frontEnd !== 'llmd') return;
    const name = eppName(this.config, arm.frontEndId, spec.target.pair ?? 0);
    const pod = this.pods.get(name);
    if (!pod || (this.verbosity.get(name) ?? 0) < SCORES_LINE_VERBOSITY) return;
    const hashesMatch = this.scorer.hashesMatch ?? true;
    for (let k = from; k < from + count; k++) {
      const hit = Math.floor((k + 1) * hitRate) > Math.floor(k * hitRate);
      const scores = hashesMatch && hit ? { [`10.42.0.${20 + replica}`]: 32 } : {};
      pod.log.push({
        at,
        line: JSON.stringify({
          level: 'LEVEL(-4)',
          ts: new Date(at).toISOString(),
          caller: 'scorer/precise_prefix_cache.go:129',
          logger: 'precise-prefix-cache-scorer/precise-prefix-cache-scorer',
          msg: SCORES_LINE,
          scores,
        }),
      });
    }
  }

  private start(name: string, at: number): void {
    const generation = (this.generations.get(name) ?? 0) + 1;
    this.generations.set(name, generation);
    this.pods.set(name, {
      name: `${name}-g${generation}`,
      log: [{ at, line: '{"level":"info","msg":"GIE build","commit-sha":"abc","build-ref":"v1.0.0"}' }],
    });
  }
}
