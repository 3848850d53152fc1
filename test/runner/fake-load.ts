import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LabConfig } from '../../lib/config/schema.ts';
import type { BenchmarkSpec } from '../../lib/study/plan.ts';
import { CLIENT_RESULT_KEYS } from '../../lib/study/results.ts';
import { lookedUpTokens } from '../../lib/study/workload.ts';
import type { FakeClock, FakeReplica } from './fake-servers.ts';

/**
 * The fake cluster's load physics: each benchmark client's requests reach the fake replicas over
 * time, not the instant it starts, so a client that keeps running (a killed runner's, a Job
 * deleted late) shows up in every later scrape; a client that ends writes its result file where
 * the real Job would.
 */

/**
 * A client's load as it is served: spread evenly from `from` to `until` over the replicas it
 * targets, so a client that keeps running shows up in every scrape until it ends or is deleted.
 */
interface Load {
  readonly job: string;
  readonly spec: BenchmarkSpec;
  readonly replicas: readonly FakeReplica[];
  readonly share: readonly number[];
  readonly perRequest: number;
  readonly rate: number;
  readonly from: number;
  readonly until: number;
  /** Served so far, per replica: requests and hit tokens. */
  readonly served: number[];
  readonly hits: number[];
  /** The result file is written when the load ends (unless the Job was deleted before). */
  readonly completed: number | undefined;
  written: boolean;
  stoppedAt?: number;
}

/** What the loads need of the cluster: its clock, the replicas of a pair, where results go. */
export interface LoadContext {
  readonly config: LabConfig;
  readonly clock: FakeClock;
  readonly resultsDir: string;
  /** Hit rate the replicas serve for a client's requests. */
  readonly hitRate: (spec: BenchmarkSpec) => number;
  /** The fake replicas of a replica pair. */
  pairReplicas(pair: number): readonly FakeReplica[];
  /** Requests served to replica `index`: the llm-d EPP logs a score for each (fake-epp.ts). */
  readonly onServed?: (
    spec: BenchmarkSpec,
    index: number,
    servedBefore: number,
    add: number,
    rate: number,
    now: number,
  ) => void;
}

/** Every client's load, served as the clock moves (`tick`). */
export class ClientLoads {
  private readonly loads: Load[] = [];

  constructor(private readonly o: LoadContext) {}

  /** A deleted Job's pod is being terminated: its client sends nothing more from `at`. */
  stop(job: string, at: number): void {
    for (const load of this.loads) if (load.job === job) load.stoppedAt ??= at;
  }

  /**
   * A client's requests, over time: on its replica, or round-robin over the replicas of a front
   * end. They are served by `tick`, as the clock moves.
   */
  serve(
    job: string,
    spec: BenchmarkSpec,
    requests: number,
    from: number,
    until: number,
    completed: number | undefined,
  ): void {
    const replicas = this.o.pairReplicas(spec.target.pair ?? 0);
    const share =
      spec.target.kind === 'replica'
        ? replicas.map((_, i) => (i === (spec.target as { replica: number }).replica ? requests : 0))
        : replicas.map(
            (_, i) => Math.floor(requests / replicas.length) + (i < requests % replicas.length ? 1 : 0),
          );
    const perRequest = spec.prefix
      ? lookedUpTokens({ ...spec.prefix, chatTemplateTokens: this.o.config.workload.chatTemplateTokens })
      : 300;
    this.loads.push({
      job,
      spec,
      replicas,
      share,
      perRequest,
      rate: this.o.hitRate(spec),
      from,
      until,
      served: share.map(() => 0),
      hits: share.map(() => 0),
      completed,
      written: false,
    });
    this.tick();
  }

  /**
   * Serves every load up to now: each replica's counters grow by the share of the client's
   * requests due by now (all of them at its end); a finished client writes its result file.
   */
  tick(): void {
    const now = this.o.clock.ms;
    for (const load of this.loads) {
      const end = Math.min(now, load.stoppedAt ?? Number.POSITIVE_INFINITY);
      const span = Math.max(1, load.until - load.from);
      const frac = Math.min(1, Math.max(0, (end - load.from) / span));
      load.share.forEach((n, i) => {
        const due = frac >= 1 ? n : Math.floor(n * frac);
        const add = due - load.served[i];
        if (add <= 0) return;
        const hitsDue = Math.round(due * load.perRequest * load.rate);
        const replica = load.replicas[i];
        this.o.onServed?.(load.spec, i, load.served[i], add, load.rate, now);
        replica.requests += add;
        replica.queries += add * load.perRequest;
        replica.hits += hitsDue - load.hits[i];
        load.served[i] = due;
        load.hits[i] = hitsDue;
      });
      if (frac >= 1 && !load.written && (load.stoppedAt === undefined || load.stoppedAt >= load.until)) {
        load.written = true;
        if (load.completed !== undefined) this.writeResult(load.spec, load.completed);
      }
    }
  }

  private writeResult(spec: BenchmarkSpec, completed: number): void {
    const values = Object.fromEntries(CLIENT_RESULT_KEYS.map((key, i) => [key, 10 + i]));
    const inputTokens = completed * 2176;
    const outputTokens = completed * 128;
    const duration = (inputTokens + outputTokens) / 12_929;
    const result = {
      backend: 'openai-chat',
      num_prompts: spec.prompts,
      ...values,
      completed,
      // Consistent with each other: tokens / duration is the client's own throughput.
      duration,
      total_input_tokens: inputTokens,
      total_output_tokens: outputTokens,
      total_token_throughput: 12_929,
      output_throughput: outputTokens / duration,
      mean_ttft_ms: 215.7,
      p99_ttft_ms: 812.5,
      mean_itl_ms: 42.82,
    };
    const dir = join(this.o.resultsDir, spec.id);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, spec.resultFile), JSON.stringify(result));
  }
}
