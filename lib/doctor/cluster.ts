import type { LabConfig } from '../config/schema.ts';
import type { ClusterCheck } from '../install/cluster-checks.ts';
import { readClusterChecks } from '../install/cluster-read.ts';
import type { InstallPlan } from '../install/plan.ts';
import { checkRunnerAccess } from '../install/runner-access.ts';
import { type ClusterApi, KubeApiError } from '../kube/cluster-api.ts';
import type { DoctorStatus, Progress } from './model.ts';

/**
 * `lab doctor --kubeconfig`: whether `lab install` can succeed on a cluster the user brings. The
 * checks are lab install's own (lib/install/cluster-checks.ts, read by cluster-read.ts), printed
 * as doctor lines; nothing is applied. A cluster that cannot be reached stops the run (one line),
 * as missing AWS credentials stop the account check.
 */

/** The checks, in the order they print. */
export const CLUSTER_DOCTOR_CHECKS = [
  'cluster',
  'gpus',
  'runtime-class',
  'nodes',
  'results-storage',
  'rbac',
  'runner-rbac',
] as const;
export type ClusterDoctorCheck = (typeof CLUSTER_DOCTOR_CHECKS)[number];

export interface ClusterDoctorLine {
  readonly check: ClusterDoctorCheck;
  readonly status: DoctorStatus;
  readonly subject: string;
  readonly message: string;
  readonly fix?: string;
}

export interface ClusterDoctorReport {
  readonly stackName: string;
  readonly lab: LabConfig['lab'];
  readonly context: string;
  readonly server: string;
  readonly version: string;
  readonly lines: readonly ClusterDoctorLine[];
}

export async function runClusterDoctor(
  api: ClusterApi,
  config: LabConfig,
  plan: InstallPlan,
  progress: Progress = () => {},
): Promise<ClusterDoctorReport> {
  progress(`reaching the API server of context ${api.target.context} (GET /version)`);
  const version = await api.version();
  progress('reading the nodes and RuntimeClasses, asking the access reviews (SelfSubjectAccessReview)');
  const checks = await readClusterChecks(plan, api);
  progress("asking whether the study runner's ServiceAccount may do its work (SubjectAccessReview)");
  const applied = await runnerAccessApplied(api, plan);
  const runner = await checkRunnerAccess(api, plan.runnerAccess, applied);
  const lines: ClusterDoctorLine[] = [
    {
      check: 'cluster',
      status: 'pass',
      subject: api.target.context,
      message: `${api.target.server} answers: Kubernetes ${version}`,
    },
    ...[...checks, runner].map(lineOf),
  ];
  return {
    stackName: config.stackName,
    lab: config.lab,
    context: api.target.context,
    server: api.target.server,
    version,
    lines,
  };
}

function lineOf(check: ClusterCheck): ClusterDoctorLine {
  const name: ClusterDoctorCheck = check.id.startsWith('nodes-') ? 'nodes' : (check.id as ClusterDoctorCheck);
  return {
    check: name,
    status: check.outcome,
    subject: check.subject,
    message: check.message,
    ...(check.fix === undefined ? {} : { fix: check.fix }),
  };
}

/** Whether every binding of the runner's access is in the cluster (a lab installed before). */
async function runnerAccessApplied(api: ClusterApi, plan: InstallPlan): Promise<boolean> {
  for (const object of plan.runnerAccess.objects) {
    if (!object.kind.endsWith('Binding')) continue;
    const ref = {
      apiVersion: object.apiVersion,
      kind: object.kind,
      name: object.metadata.name,
      ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
    };
    try {
      if (!(await api.read(ref))) return false;
    } catch (error) {
      // A user who may not read the bindings cannot install the lab either (the rbac line says so).
      if (error instanceof KubeApiError && error.kind === 'forbidden') return false;
      throw error;
    }
  }
  return true;
}
