import { type ClusterApi, describeRef, KubeApiError, type KubeObject, refOf } from '../kube/cluster-api.ts';
import type { HelmPrerequisite, ManifestPrerequisite, Prerequisite } from '../prereqs/prerequisites.ts';
import { installCommand } from '../prereqs/prerequisites.ts';
import { pollUntil } from '../runner/poll.ts';
import type { Clock } from '../runner/ports.ts';
import { readinessOf, stopHint } from './readiness.ts';
import { HELM_RELEASE_SELECTOR, objectsOfYaml, WAIT_LIMITS_MS } from './steps.ts';

/**
 * The steps `lab install` and `lab prereqs --apply` share: a prerequisite applied (a release asset
 * downloaded, applied server-side, its CRDs waited for) or checked (a Helm release by its Secret),
 * a file's objects applied and each waited for as `kubectl rollout status` waits, a rollout
 * restart. Each wait prints progress and ends in a stop that names the object.
 */

export interface InstallDeps {
  readonly api: ClusterApi;
  readonly clock: Clock;
  readonly write: (line: string) => void;
  /** Fetches a release asset (the prerequisites' URLs). */
  readonly download: (url: string) => Promise<string>;
}

/** Why `lab install` stopped; the CLI prints the message alone and exits 1. */
export class InstallStopped extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InstallStopped';
  }
}

/** How often a wait looks again, and how often it says it is still waiting. */
export const POLL_MS = 5_000;
const PROGRESS_EVERY_MS = 60_000;

/** A prerequisite: a release asset applied with its CRDs waited for, or a Helm release checked. */
export async function applyPrerequisite(prerequisite: Prerequisite, deps: InstallDeps): Promise<void> {
  if (prerequisite.kind === 'manifest') await applyRelease(prerequisite, deps);
  else await requireHelmRelease(prerequisite, deps);
}

async function applyRelease(prerequisite: ManifestPrerequisite, deps: InstallDeps): Promise<void> {
  deps.write(`${prerequisite.id}: downloading ${prerequisite.url}`);
  let text: string;
  try {
    text = await deps.download(prerequisite.url);
  } catch (error) {
    throw new InstallStopped(
      `${prerequisite.title}: ${prerequisite.url} could not be downloaded: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const objects = objectsOfYaml(text, prerequisite.url);
  await applyObjects(prerequisite.id, objects, deps);
}

async function requireHelmRelease(prerequisite: HelmPrerequisite, deps: InstallDeps): Promise<void> {
  const secrets = await deps.api.list('v1', 'Secret', {
    namespace: prerequisite.namespace,
    labelSelector: `${HELM_RELEASE_SELECTOR(prerequisite.release)},status=deployed`,
  });
  if (secrets.length > 0) {
    deps.write(
      `${prerequisite.id}: Helm release ${prerequisite.release} is deployed in ${prerequisite.namespace}`,
    );
    return;
  }
  throw new InstallStopped(helmMissing(prerequisite));
}

function helmMissing(prerequisite: Prerequisite & { kind: 'helm' }): string {
  return `${prerequisite.title} is not installed: the lab does not run Helm. Install it, then run the lab command again (what is applied stays applied):\n  ${installCommand(prerequisite)}`;
}

/** Applies a file's objects in order, then waits for each that has a readiness. */
export async function applyObjects(
  step: string,
  objects: readonly KubeObject[],
  deps: InstallDeps,
): Promise<void> {
  const applied: KubeObject[] = [];
  for (const object of objects) {
    try {
      applied.push(await deps.api.apply(object));
    } catch (error) {
      if (error instanceof KubeApiError) {
        throw new InstallStopped(`${step}: applying ${describeRef(refOf(object))} failed: ${error.message}`);
      }
      throw error;
    }
  }
  deps.write(`${step}: applied ${objects.length} object(s)`);
  for (const object of applied) {
    const limit = WAIT_LIMITS_MS[object.kind];
    if (limit === undefined) continue;
    await waitReady(object, limit, deps);
  }
}

async function waitReady(object: KubeObject, limitMs: number, deps: InstallDeps): Promise<void> {
  const ref = refOf(object);
  const name = describeRef(ref);
  let lastProgress = deps.clock.now().getTime();
  const outcome = await pollUntil(
    async () => {
      const current = await deps.api.read(ref);
      if (!current) return { waiting: 'it is gone (deleted by someone else?)' };
      const readiness = readinessOf(current);
      return readiness.ready ? { done: true } : { waiting: readiness.waiting };
    },
    {
      clock: deps.clock,
      timeoutMs: limitMs,
      // A wait of minutes needs no look every 5 s: one every 1/60 of the limit, at least every 5 s.
      intervalMs: Math.max(POLL_MS, Math.round(limitMs / 60)),
      announce: async (waiting) => deps.write(`  waiting up to ${minutes(limitMs)} for ${name}: ${waiting}`),
      onWait: async () => {
        const now = deps.clock.now().getTime();
        if (now - lastProgress >= PROGRESS_EVERY_MS) {
          lastProgress = now;
          const current = await deps.api.read(ref);
          const readiness = current ? readinessOf(current) : undefined;
          deps.write(
            `  still waiting for ${name}: ${readiness && !readiness.ready ? readiness.waiting : 'gone'}`,
          );
        }
      },
    },
  );
  if ('timedOut' in outcome) {
    const last = await deps.api.read(ref);
    const hint = last ? stopHint(last) : undefined;
    throw new InstallStopped(
      `${name} did not become ready within ${minutes(limitMs)}: ${outcome.timedOut}. ${hint ? `${hint}. ` : ''}See why with: kubectl${ref.namespace ? ` -n ${ref.namespace}` : ''} describe ${ref.kind.toLowerCase()}/${ref.name} (and its pods' events); run lab install again once it is fixed.`,
    );
  }
  if (outcome.afterMs > 0) deps.write(`  ${name} ready after ${minutes(outcome.afterMs)}`);
}

/** `kubectl rollout restart`: a new pod-template annotation, then the rollout waited for. */
export async function rolloutRestart(
  namespace: string,
  deployment: string,
  title: string,
  deps: InstallDeps,
): Promise<void> {
  const ref = { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment, namespace };
  const current = await deps.api.read(ref);
  if (!current) {
    throw new InstallStopped(`${title}: ${describeRef(ref)} does not exist: is its prerequisite installed?`);
  }
  deps.write(`${title}: restarting ${describeRef(ref)}`);
  // The annotation kubectl rollout restart sets (kubectl pkg/polymorphichelpers/objectrestarter.go).
  const restarted = await deps.api.apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: deployment, namespace },
    spec: {
      template: {
        metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': deps.clock.now().toISOString() } },
      },
    },
  });
  await waitReady(restarted, WAIT_LIMITS_MS.Deployment, deps);
}

export function minutes(ms: number): string {
  const seconds = Math.round(ms / 1000);
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`;
}
