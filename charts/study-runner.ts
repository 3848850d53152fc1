import { App, Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { labPlacement } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { runnerBundle } from '../lib/runner/bundle.ts';
import { RUNNER_NODE_ENV } from '../lib/runner/layout.ts';
import type { StatusCheck, StatusChecks } from '../lib/runner/preflight.ts';
import { RUNNER_FILES } from '../lib/runner/runner-files.ts';
import { studyArms } from '../lib/study/arms.ts';
import { type StudyPlan, studyPlan } from '../lib/study/plan.ts';
import { smokePlan } from '../lib/study/smoke.ts';
import { STUDY_RUNNER_CHART, STUDY_RUNNER_NAME } from '../lib/study/topology.ts';
import { GATEWAY_API_GROUP } from './ai-gateway/gateway-api.ts';
import { aiGatewayNames } from './ai-gateway.ts';
import { benchmarkJob } from './benchmark-job.ts';
import { COMPONENT_LABEL, labLabels, podPlacement } from './common.ts';
import { clusterScoped } from './endpoint-picker.ts';
import { resultsAffinity, resultsVolume } from './results-store.ts';
import {
  resultsUpload,
  resultsUploader,
  runnerAccountAnnotations,
  UPLOAD_GRACE_SECONDS,
} from './results-upload.ts';
import { checkRunnerConfigMapSize, runnerJob } from './runner-job.ts';

// Kept here for the modules that import them from this chart.
export { CONFIGMAP_LIMIT_BYTES, configMapDataBytes } from './runner-job.ts';

export interface StudyRunnerChartProps extends ChartProps {
  readonly config: LabConfig;
  /**
   * The runs to execute.
   * @default studyPlan(config)
   */
  readonly plan?: StudyPlan;
}

/**
 * The status conditions each arm's preflight requires, by arm id: for an AI Gateway arm, its
 * HTTPRoute must be Accepted with ResolvedRefs on its Gateway, and the Gateway Programmed
 * (docs/facts.md §3.6: Accepted alone proves nothing).
 */
export function preflightStatusChecks(config: LabConfig): StatusChecks {
  const names = aiGatewayNames(config);
  const gatewayApi = { group: GATEWAY_API_GROUP, version: 'v1', namespace: config.namespace };
  const checks: StatusCheck[] = [
    {
      ...gatewayApi,
      kind: 'HTTPRoute',
      plural: 'httproutes',
      name: names.httpRoute,
      conditions: ['Accepted', 'ResolvedRefs'],
      at: 'parents',
    },
    {
      ...gatewayApi,
      kind: 'Gateway',
      plural: 'gateways',
      name: names.gateway,
      conditions: ['Programmed'],
      at: 'status',
    },
  ];
  return Object.fromEntries(
    studyArms(config)
      .filter((arm) => arm.frontEnd === 'ai-gateway')
      .map((arm) => [arm.id, checks]),
  );
}

/**
 * The ConfigMap data of the runner: its bundle, the configuration, the plan, the smoke study's
 * plan (lib/study/smoke.ts), and every client Job of both.
 */
export function runnerConfigMapData(config: LabConfig, plan: StudyPlan): Record<string, string> {
  const smoke = smokePlan(config);
  const jobs = Object.fromEntries(
    [...plan.runs, ...smoke.runs]
      .flatMap((run) => run.benchmarks)
      .map((spec) => [spec.id, benchmarkJob(config, spec)]),
  );
  return {
    [RUNNER_FILES.bundle]: runnerBundle(),
    [RUNNER_FILES.config]: JSON.stringify(config),
    [RUNNER_FILES.plan]: JSON.stringify(plan),
    [RUNNER_FILES.smoke]: JSON.stringify(smoke),
    [RUNNER_FILES.jobs]: JSON.stringify(jobs),
    [RUNNER_FILES.preflight]: JSON.stringify(preflightStatusChecks(config)),
  };
}

/**
 * The in-cluster study runner (lib/runner): a Job on a pinned public Node image that runs the
 * bundled runner from a ConfigMap, with a ServiceAccount whose Role reaches only the lab
 * namespace, and the results host folder mounted. Applied last: it starts the study as soon as
 * it exists, and waits for the replicas itself. The client Jobs travel in the ConfigMap, built
 * by the same `benchmarkJob` as `dist/jobs/`, so the manifests stay self-contained.
 */
export class StudyRunnerChart extends Chart {
  constructor(scope: Construct, id: string, props: StudyRunnerChartProps) {
    super(scope, id, props);
    const { config } = props;
    const plan = props.plan ?? studyPlan(config);
    const labels = { [COMPONENT_LABEL]: 'study-runner' };
    const name = STUDY_RUNNER_NAME;

    const data = runnerConfigMapData(config, plan);
    checkRunnerConfigMapSize(data, 'StudyRunner: the runner ConfigMap', 'the plan');
    new k8s.KubeConfigMap(this, 'files', { metadata: { name, labels }, data });

    // IRSA: EKS's webhook gives the pods of an annotated ServiceAccount the role's credentials.
    const annotations = runnerAccountAnnotations(config);
    new k8s.KubeServiceAccount(this, 'service-account', {
      metadata: { name, labels, ...(annotations ? { annotations } : {}) },
    });
    const hasStatusChecks = Object.keys(preflightStatusChecks(config)).length > 0;
    new k8s.KubeRole(this, 'role', {
      metadata: { name, labels },
      rules: [
        // Exactly what the runner calls (test/runner/runner-rbac.test.ts derives it from a
        // rehearsal): Jobs are polled, never watched; `get pods` is a retried delete's check.
        { apiGroups: ['batch'], resources: ['jobs'], verbs: ['create', 'get', 'list', 'delete'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'delete'] },
        { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
        // Restarting a front end patches its pod template (kubectl.kubernetes.io/restartedAt).
        { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'] },
        // Staging the next run (lib/study/staging.ts): a gate copies its front end's Service (get),
        // is created closed, opened by a patch of its selector and deleted; a killed runner's
        // gates are found by label (list).
        { apiGroups: [''], resources: ['services'], verbs: ['get', 'list', 'create', 'patch', 'delete'] },
        // The AI Gateway preflight reads its route's and Gateway's status conditions.
        ...(hasStatusChecks
          ? [{ apiGroups: [GATEWAY_API_GROUP], resources: ['httproutes', 'gateways'], verbs: ['get'] }]
          : []),
      ],
    });
    new k8s.KubeRoleBinding(this, 'role-binding', {
      metadata: { name, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: config.namespace }],
    });

    // The EPPs' metrics endpoint authorizes each scrape with a SubjectAccessReview for the
    // non-resource URL /metrics (controller-runtime's WithAuthenticationAndAuthorization, as GAIE
    // v1.0.1 wires it): only a ClusterRole can grant that. Cluster-wide name, so prefixed.
    const metricsReader = `${config.namespace}-${name}-metrics`;
    clusterScoped(
      new k8s.KubeClusterRole(this, 'metrics-reader', {
        metadata: { name: metricsReader, labels },
        rules: [{ nonResourceUrLs: ['/metrics'], verbs: ['get'] }],
      }),
    );
    clusterScoped(
      new k8s.KubeClusterRoleBinding(this, 'metrics-reader-binding', {
        metadata: { name: metricsReader, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: metricsReader },
        subjects: [{ kind: 'ServiceAccount', name, namespace: config.namespace }],
      }),
    );

    const upload = resultsUpload(config);
    const uploader = upload ? resultsUploader(upload) : undefined;
    runnerJob(this, {
      name,
      labels,
      podLabels: labels,
      image: config.runner.image,
      bundle: RUNNER_FILES.bundle,
      env: [{ name: RUNNER_NODE_ENV, valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
      // The node whose results folder is kept (the K3s server's bootstrap uploads it); the
      // clients are pinned to this node at run time (lib/runner/layout.ts onRunnerNode).
      placement: { ...podPlacement(labPlacement(config).runner), ...resultsAffinity(config) },
      results: resultsVolume(config),
      ...(uploader
        ? {
            sidecars: { containers: [uploader.container], volumes: [uploader.volume] },
            terminationGracePeriodSeconds: UPLOAD_GRACE_SECONDS,
          }
        : {}),
    });
  }
}

/**
 * The runner's objects as `lab run` applies them on a cluster the user brings: what
 * `cdk8s synth` writes for it (dist/ or dist/runner/), from the same chart.
 */
export function studyRunnerObjects(config: LabConfig): Record<string, unknown>[] {
  const app = new App();
  const chart = new StudyRunnerChart(app, STUDY_RUNNER_CHART, {
    namespace: config.namespace,
    labels: labLabels(),
    config,
  });
  app.synthYaml();
  return chart.toJson() as Record<string, unknown>[];
}
