import type { Arm, ServerSet } from '../study/arms.ts';
import {
  REQUESTS_RUNNING,
  REQUESTS_WAITING,
  RESET_SUCCEEDED_MESSAGE,
  type ResetLogCounts,
  replicaIdle,
  resetLogCounts,
  vllmSnapshot,
} from '../study/metrics.ts';
import { frontEnd, replicaSetName } from '../study/topology.ts';
import type { ReplicaReset } from '../study/validity.ts';
import { rethrowOutage } from './call-policy.ts';
import { pollUntil } from './poll.ts';
import type { DeploymentState } from './ports.ts';
import { type RunnerContext, waitOptions } from './runner-context.ts';
import { formatElapsed } from './status.ts';
import { StudyStopError } from './study-stop.ts';

/**
 * Resets and their verification (docs/facts.md §4.4), and the readiness of what a run needs: replicas
 * that serve, front ends that are available, a restarted front end's rollout.
 */

/** Container of the vLLM replicas (charts/model-servers.ts), whose log names the KV cache size. */
export const VLLM_CONTAINER = 'vllm';
/**
 * The log read that confirms a reset starts this long before the call: `sinceTime` has whole
 * seconds and node and runner clocks may differ. Lines before the call are counted in the
 * baseline read of the same window, so they never pass for a confirmation.
 */
const LOG_WINDOW_MARGIN_MS = 60_000;

/** A reset that needs a pod restart instead, and why. */
interface RestartNeeded {
  readonly replica: number;
  readonly why: string;
  readonly status?: number;
}

/** Whether a Deployment's rollout is complete, by the rules of `kubectl rollout status`. */
export function rolloutComplete(d: DeploymentState): boolean {
  return (
    d.observedGeneration >= d.generation &&
    d.updated === d.desired &&
    d.total === d.updated &&
    d.available === d.desired
  );
}

export class Resets {
  constructor(private readonly ctx: RunnerContext) {}

  /**
   * Resets every replica of a set and proves it (docs/facts.md §4.4): wait until the replica is idle,
   * POST /reset_prefix_cache, then find vLLM's own confirmation in the pod log written after the
   * call. A replica that stays busy, answers 404 (no dev mode) or anything but 200, whose log
   * says the reset was refused, or whose log confirms nothing, is restarted instead: a fresh
   * process has an empty cache. Only a restart that fails leaves the reset unverified.
   */
  async resetCaches(
    servers: ServerSet,
    pair: number,
    urls: readonly string[],
    pods: string[],
  ): Promise<ReplicaReset[]> {
    const resets: ReplicaReset[] = [];
    const restart: RestartNeeded[] = [];
    for (const [i, url] of urls.entries()) {
      const outcome = await this.resetReplica(i, url, pods[i]);
      if ('verifiedBy' in outcome) resets.push(outcome);
      else restart.push(outcome);
    }
    if (restart.length === 0) return resets;
    for (const r of restart)
      await this.ctx.say(`${pods[r.replica]}: ${r.why}; deleting the pod to reset its cache`);
    const problem = await this.restartReplicas(
      servers,
      pair,
      urls,
      pods,
      restart.map((r) => r.replica),
    );
    for (const r of restart) {
      resets.push({
        replica: r.replica,
        pod: pods[r.replica],
        method: 'pod-restart',
        ...(r.status !== undefined ? { status: r.status } : {}),
        ...(problem
          ? { verifiedBy: 'unverified' as const, detail: `${r.why}; restarting the pod failed: ${problem}` }
          : {
              verifiedBy: 'pod-restart' as const,
              detail: `${r.why}; the pod was replaced (new uid), Ready and serving /v1/models`,
            }),
      });
    }
    return resets.sort((a, b) => a.replica - b.replica);
  }

  /** One replica's reset confirmed by its log, or why it needs a restart instead. */
  private async resetReplica(
    replica: number,
    url: string,
    pod: string,
  ): Promise<ReplicaReset | RestartNeeded> {
    const { clock } = this.ctx.deps;
    const { cluster, options } = this.ctx;
    const busy = await this.waitUntilIdle(url);
    if (busy) return { replica, why: busy };

    const since = new Date(clock.now().getTime() - LOG_WINDOW_MARGIN_MS);
    const readCounts = async (): Promise<ResetLogCounts | string> => {
      try {
        return resetLogCounts(await cluster.podLog(pod, VLLM_CONTAINER, since));
      } catch (error) {
        rethrowOutage(error);
        return (error as Error).message;
      }
    };
    const baseline = await readCounts();

    let status: number;
    try {
      status = await this.ctx.replicas.resetPrefixCache(url);
    } catch (error) {
      return { replica, why: `POST /reset_prefix_cache failed: ${(error as Error).message}` };
    }
    if (status === 404) {
      return { replica, status, why: '/reset_prefix_cache answered 404 (VLLM_SERVER_DEV_MODE not set?)' };
    }
    if (status !== 200) return { replica, status, why: `POST /reset_prefix_cache answered HTTP ${status}` };
    if (typeof baseline === 'string') {
      return {
        replica,
        status,
        why: `POST /reset_prefix_cache answered 200, but its log could not be read to confirm the reset (${baseline})`,
      };
    }

    let lastError = '';
    const outcome = await pollUntil<ReplicaReset | RestartNeeded>(
      async () => {
        const counts = await readCounts();
        if (typeof counts === 'string') {
          lastError = counts;
          return { waiting: 'the reset in the log' };
        }
        if (counts.refused > baseline.refused) {
          return { done: { replica, status, why: `vLLM refused the reset: "${counts.lastRefusal}"` } };
        }
        if (counts.succeeded > baseline.succeeded) {
          return {
            done: {
              replica,
              pod,
              method: 'endpoint',
              status,
              verifiedBy: 'log-confirmed',
              detail: `POST /reset_prefix_cache answered 200 and the log logged "${RESET_SUCCEEDED_MESSAGE}" after it`,
            },
          };
        }
        return { waiting: 'the reset in the log' };
      },
      { clock, timeoutMs: options.confirmTimeoutMs, intervalMs: Math.min(options.pollIntervalMs, 1_000) },
    );
    if ('done' in outcome) return outcome.done;
    return {
      replica,
      status,
      why: `POST /reset_prefix_cache answered 200, but within ${formatElapsed(options.confirmTimeoutMs)} the log showed neither "${RESET_SUCCEEDED_MESSAGE}" nor a refusal${lastError ? ` (last read: ${lastError})` : ''}`,
    };
  }

  /**
   * Waits until a replica runs and queues no request (vLLM refuses a reset while blocks are in
   * use); undefined when idle, else why it is not.
   */
  private async waitUntilIdle(url: string): Promise<string | undefined> {
    const { options } = this.ctx;
    const outcome = await pollUntil<true>(
      async () => {
        try {
          const snapshot = vllmSnapshot(await this.ctx.replicas.metrics(url));
          const idle = replicaIdle(snapshot);
          if (idle) return { done: true };
          return {
            waiting:
              idle === undefined
                ? `/metrics lacks ${REQUESTS_RUNNING} or ${REQUESTS_WAITING}`
                : `${snapshot.requestsRunning} running, ${snapshot.requestsWaiting} waiting`,
          };
        } catch (error) {
          return { waiting: `/metrics not read: ${(error as Error).message}` };
        }
      },
      waitOptions(this.ctx, options.idleTimeoutMs),
    );
    return 'timedOut' in outcome
      ? `still busy after ${formatElapsed(options.idleTimeoutMs)} (${outcome.timedOut})`
      : undefined;
  }

  /** Deletes replica pods and waits until new ones are ready and serve /v1/models; a problem or undefined. */
  private async restartReplicas(
    servers: ServerSet,
    pair: number,
    urls: readonly string[],
    pods: string[],
    indices: number[],
  ): Promise<string | undefined> {
    const { cluster, options } = this.ctx;
    const selector = `app=${replicaSetName(this.ctx.config, servers, pair)}`;
    const oldUids = new Map((await cluster.listPods(selector)).map((p) => [p.name, p.uid]));
    // The uid precondition: a retried delete never takes the replacement too.
    for (const i of indices) await cluster.deletePod(pods[i], oldUids.get(pods[i]));
    const waiting = new Set(indices);
    const outcome = await pollUntil<true>(
      async () => {
        const current = new Map((await cluster.listPods(selector)).map((p) => [p.name, p]));
        for (const i of [...waiting]) {
          const pod = current.get(pods[i]);
          if (!pod || pod.uid === oldUids.get(pods[i]) || !pod.ready) continue;
          if ((await this.modelsStatus(urls[i])) === 200) waiting.delete(i);
        }
        return waiting.size === 0 ? { done: true } : { waiting: [...waiting].map((i) => pods[i]).join(', ') };
      },
      waitOptions(this.ctx, options.podRestartTimeoutMs),
    );
    if ('done' in outcome) return undefined;
    return `pod restart did not bring ${outcome.timedOut} back to serving /v1/models within ${formatElapsed(options.podRestartTimeoutMs)}`;
  }

  private async modelsStatus(url: string): Promise<number | undefined> {
    try {
      return await this.ctx.replicas.models(url);
    } catch {
      return undefined;
    }
  }

  /**
   * Every replica of a set serves /v1/models (/health can pass before the engine serves), within
   * `timeoutMs`. A model server that never becomes ready makes every run of the study invalid,
   * so the study stops.
   */
  async waitForReplicas(servers: ServerSet, pair: number, timeoutMs: number): Promise<void> {
    const set = replicaSetName(this.ctx.config, servers, pair);
    const urls = this.ctx.options.replicaUrls(servers, pair);
    const pods = urls.map((_, i) => `${set}-${i}`);
    const waiting = new Set(urls.keys());
    let said = false;
    const outcome = await pollUntil<true>(
      async () => {
        for (const i of [...waiting]) if ((await this.modelsStatus(urls[i])) === 200) waiting.delete(i);
        return waiting.size === 0 ? { done: true } : { waiting: [...waiting].map((i) => pods[i]).join(', ') };
      },
      waitOptions(this.ctx, timeoutMs, {
        announce: async (late) => {
          said = true;
          await this.ctx.say(`waiting up to ${formatElapsed(timeoutMs)} for ${late} to serve /v1/models`);
        },
      }),
    );
    if ('done' in outcome) {
      if (said)
        await this.ctx.say(`replicas of ${set} serve /v1/models after ${formatElapsed(outcome.afterMs)}`);
      return;
    }
    const late = [...waiting].map((i) => pods[i]);
    throw new StudyStopError({
      reason: `the model server never became ready: ${late.join(', ')} did not serve /v1/models within ${formatElapsed(timeoutMs)} (${urls.filter((_, i) => waiting.has(i)).join(', ')})`,
      change: `find why in kubectl -n ${this.ctx.config.namespace} describe pod ${late[0]} and its vllm log (model download, GPU, vllm.* settings), then run the study again: it resumes where it stopped`,
    });
  }

  /**
   * The arm's front-end Deployments are available (a crashed router or EPP comes back), within
   * `readyTimeoutMs`; a problem, or undefined when ready.
   */
  async waitForFrontEnd(arm: Arm, pair: number): Promise<string | undefined> {
    const { options } = this.ctx;
    const deployments = frontEnd(this.ctx.config, arm, pair).restartDeployments;
    const outcome = await pollUntil<true>(
      async () => {
        const down: string[] = [];
        for (const name of deployments) {
          const state = await this.ctx.cluster.getDeployment(name);
          if (!state) down.push(`deployment/${name} does not exist`);
          else if (state.available < state.desired)
            down.push(`deployment/${name} has ${state.available}/${state.desired} available`);
        }
        return down.length === 0 ? { done: true } : { waiting: down.join('; ') };
      },
      waitOptions(this.ctx, options.readyTimeoutMs, {
        announce: (down) =>
          this.ctx.say(
            `waiting up to ${formatElapsed(options.readyTimeoutMs)} for the front end of ${arm.id}: ${down}`,
          ),
      }),
    );
    return 'timedOut' in outcome
      ? `front end of ${arm.id} not ready within ${formatElapsed(options.readyTimeoutMs)}: ${outcome.timedOut}`
      : undefined;
  }

  /** Waits for a restarted Deployment's rollout; a problem or undefined. */
  async waitForRollout(name: string): Promise<string | undefined> {
    const { options } = this.ctx;
    let missing = false;
    const outcome = await pollUntil<true>(
      async () => {
        const state = await this.ctx.cluster.getDeployment(name);
        if (!state) {
          missing = true;
          return { done: true };
        }
        if (rolloutComplete(state)) return { done: true };
        return {
          waiting: `${state.available}/${state.desired} available, ${state.updated} updated`,
        };
      },
      waitOptions(this.ctx, options.rolloutTimeoutMs),
    );
    if (missing) return `front end deployment/${name} does not exist`;
    if ('done' in outcome) return undefined;
    return `front end deployment/${name} was not ready within ${formatElapsed(options.rolloutTimeoutMs)} of its restart (${outcome.timedOut})`;
  }

  /**
   * Pod name to uid of a server set's replicas, to tell a restart during a run; undefined when
   * the pods could not be listed (the API refused): a restart is then told by the counters alone,
   * never assumed.
   */
  async podUids(servers: ServerSet, pair: number): Promise<Map<string, string> | undefined> {
    try {
      const pods = await this.ctx.cluster.listPods(`app=${replicaSetName(this.ctx.config, servers, pair)}`);
      return new Map(pods.map((p) => [p.name, p.uid]));
    } catch (error) {
      rethrowOutage(error);
      await this.ctx.say(
        `replica pods not listed (a restart during the run is told by the counters alone): ${(error as Error).message}`,
      );
      return undefined;
    }
  }
}
