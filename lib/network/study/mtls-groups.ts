import type { MtlsCase } from './model.ts';

/**
 * The mTLS matrix (E2) and E8 by client: the cases that share a source (namespace, service account,
 * in or out of the mesh) run their curls one after the other in one client pod, each writing its
 * own outcome, so the matrix pays one pod start per source rather than one per case. Cases of
 * different sources keep their own pods: the source identity is what the matrix varies. Pure:
 * the runner builds a Job per group (lib/runner/network/jobs.ts), the planner counts them.
 */

/** The cases one client pod runs, in plan order. */
export interface MtlsClientGroup {
  /** Names the group's Job: `<namespace>-<service account>-in-mesh|out-of-mesh`. */
  readonly id: string;
  readonly clientNamespace: string;
  readonly serviceAccount: string;
  readonly inMesh: boolean;
  readonly cases: readonly MtlsCase[];
}

/** The groups of a matrix, in the order of their first case (so the Jobs run in plan order). */
export function mtlsClientGroups(cases: readonly MtlsCase[]): MtlsClientGroup[] {
  const groups = new Map<string, MtlsClientGroup & { cases: MtlsCase[] }>();
  for (const c of cases) {
    const id = `${c.clientNamespace}-${c.serviceAccount}-${c.inMesh ? 'in-mesh' : 'out-of-mesh'}`;
    const group = groups.get(id);
    if (group) group.cases.push(c);
    else
      groups.set(id, {
        id,
        clientNamespace: c.clientNamespace,
        serviceAccount: c.serviceAccount,
        inMesh: c.inMesh,
        cases: [c],
      });
  }
  return [...groups.values()];
}
