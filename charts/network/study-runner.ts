import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import type { NetworkCell } from '../../lib/config/network.ts';
import type { LabConfig } from '../../lib/config/schema.ts';
import { PROBE_NAMES, PROBES_MOUNT, type ProbeName, probeCommand } from '../../lib/network/probes/bundle.ts';
import type { NetworkStudyPlan } from '../../lib/network/study/model.ts';
import { networkStudyPlan } from '../../lib/network/study/plan.ts';
import { networkSmokePlan } from '../../lib/network/study/smoke.ts';
import {
  CELL_LABEL,
  ISTIO_SYSTEM_NAMESPACE,
  MESH_DEFAULT_NAMESPACE,
  MESH_NAMESPACE,
  MESH_NAMESPACES,
  NETWORK_RUNNER_NAME,
  PLAIN_NAMESPACE,
} from '../../lib/network/topology.ts';
import { networkRunnerBundle } from '../../lib/runner/network/bundle.ts';
import { type NetworkJobContext, type ProbesInPod, planJobs } from '../../lib/runner/network/jobs.ts';
import { NETWORK_RUNNER_FILES, type NetworkRunnerContext } from '../../lib/runner/network/runner-files.ts';
import type { ServiceObject } from '../../lib/runner/ports.ts';
import { COMPONENT_LABEL } from '../common.ts';
import { clusterScoped } from '../endpoint-picker.ts';
import { checkRunnerConfigMapSize, runnerJob } from '../runner-job.ts';
import { cellNodeSelector } from './common.ts';
import { PROBES_CONFIG_MAP } from './node-probes.ts';
import { scaleServiceTemplate } from './service-scale.ts';

/** Namespace of the Cilium agent, whose log the runner reads for "map full" (Cilium cells). */
const CILIUM_NAMESPACE = 'kube-system';

/** Where the lab's Node probes are in a pod (charts/network/node-probes.ts mounts their ConfigMap). */
export function cellProbes(): ProbesInPod {
  const commands = {} as Record<ProbeName, string[]>;
  for (const name of PROBE_NAMES) commands[name] = probeCommand(name);
  return { configMap: PROBES_CONFIG_MAP, mount: PROBES_MOUNT, commands };
}

/** The E9 Service as the runner copies it (the template of charts/network/service-scale.ts as a manifest). */
export function serviceTemplateManifest(): ServiceObject {
  return k8s.KubeService.manifest(scaleServiceTemplate()) as ServiceObject;
}

/** What the Job builders of the cell's runner need. */
export function networkJobContext(config: LabConfig, cell: NetworkCell): NetworkJobContext {
  return { config, cell, probes: cellProbes() };
}

/**
 * The runner's ConfigMap data: its bundle, the configuration, the cell's plan and smoke plan, both
 * plans' Jobs by name (the same builders the runner uses for the Jobs it makes at run time), where the probes
 * are, and the E9 Service template.
 */
export function networkRunnerConfigMapData(
  config: LabConfig,
  cell: NetworkCell,
  plan: NetworkStudyPlan = networkStudyPlan(config, cell.name),
  smoke: NetworkStudyPlan = networkSmokePlan(config, cell.name),
): Record<string, string> {
  const context: NetworkRunnerContext = { cell: cell.name, probes: cellProbes() };
  return {
    [NETWORK_RUNNER_FILES.bundle]: networkRunnerBundle(),
    [NETWORK_RUNNER_FILES.config]: JSON.stringify(config),
    [NETWORK_RUNNER_FILES.plan]: JSON.stringify(plan),
    [NETWORK_RUNNER_FILES.smoke]: JSON.stringify(smoke),
    [NETWORK_RUNNER_FILES.jobs]: JSON.stringify(
      planJobs(networkJobContext(config, cell), [...plan.runs, ...smoke.runs]),
    ),
    [NETWORK_RUNNER_FILES.context]: JSON.stringify(context),
    [NETWORK_RUNNER_FILES.serviceTemplate]: JSON.stringify(serviceTemplateManifest()),
  };
}

export interface NetworkStudyRunnerChartProps extends ChartProps {
  readonly config: LabConfig;
  readonly cell: NetworkCell;
}

/**
 * The in-cluster runner of a cell's network study (lib/runner/network): a Job on the pinned Node
 * image running the bundled runner, pinned to the cell's node with the results host folder
 * mounted (the Jobs it starts write their outputs there). Least privilege: Jobs, pods and their
 * logs in the namespaces it runs clients in; Services and EndpointSlices in `plain` (E9), and the
 * Services of `mesh` listed (their ClusterIPs are taken); pod deletion in the mesh namespaces
 * (pods created before the label are restarted); the Cilium agent's log on Cilium cells; `get` on
 * the mesh namespaces (their labels). It never execs into a pod.
 */
export class NetworkStudyRunnerChart extends Chart {
  constructor(scope: Construct, id: string, props: NetworkStudyRunnerChartProps) {
    super(scope, id, props);
    const { config, cell } = props;
    const name = NETWORK_RUNNER_NAME;
    const namespace = PLAIN_NAMESPACE;
    const labels = { [COMPONENT_LABEL]: 'network-study-runner' };
    const withMesh = cell.mesh !== 'none';

    const data = networkRunnerConfigMapData(config, cell);
    checkRunnerConfigMapSize(
      data,
      `NetworkStudyRunner: the runner ConfigMap of cell ${cell.name}`,
      'the plan (network.experiments)',
    );
    new k8s.KubeConfigMap(this, 'files', { metadata: { name, namespace, labels }, data });
    new k8s.KubeServiceAccount(this, 'service-account', { metadata: { name, namespace, labels } });

    // `list`: a starting runner clears the Jobs a killed one left (lib/runner/network/job-driver.ts).
    const jobs = { apiGroups: ['batch'], resources: ['jobs'], verbs: ['create', 'get', 'list', 'delete'] };
    const podLogs = { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] };
    const role = (id: string, roleNamespace: string, rules: k8s.PolicyRule[]) => {
      new k8s.KubeRole(this, `${id}-role`, { metadata: { name, namespace: roleNamespace, labels }, rules });
      new k8s.KubeRoleBinding(this, `${id}-binding`, {
        metadata: { name, namespace: roleNamespace, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      });
    };
    // Exactly what the runner calls (test/runner/network/runner-rbac.test.ts derives it from each
    // cell kind's whole study): pods are listed, never read one by one.
    role('plain', PLAIN_NAMESPACE, [
      jobs,
      { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
      podLogs,
      // E9: the Services the runner creates from the template, and their endpoints.
      { apiGroups: [''], resources: ['services'], verbs: ['create', 'list', 'delete'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
    ]);
    if (withMesh) {
      role('mesh', MESH_NAMESPACE, [
        jobs,
        // Pods created before the namespace label have no sidecar: the runner deletes them.
        { apiGroups: [''], resources: ['pods'], verbs: ['list', 'delete'] },
        podLogs,
        // E9's probe Services take free ClusterIPs: the runner reads those in use here too.
        { apiGroups: [''], resources: ['services'], verbs: ['list'] },
      ]);
      // E2's mesh-default server: restarted into the mesh like mesh's; no Job runs there.
      role('mesh-default', MESH_DEFAULT_NAMESPACE, [
        { apiGroups: [''], resources: ['pods'], verbs: ['list', 'delete'] },
      ]);
    }
    if (cell.mesh === 'ambient') {
      // The L4 mTLS evidence of ambient runs: ztunnel's counters, scraped by pod IP.
      role('ztunnel', ISTIO_SYSTEM_NAMESPACE, [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }]);
    }
    if (cell.datapath === 'cilium') {
      role('cilium', CILIUM_NAMESPACE, [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }, podLogs]);
    }
    // The mesh namespaces' labels (the namespace-labelled precondition). Namespaces are
    // cluster-scoped: only a ClusterRole reaches them, limited to those two by name.
    if (withMesh) {
      const namespaceReader = `${name}-namespaces`;
      clusterScoped(
        new k8s.KubeClusterRole(this, 'namespace-reader', {
          metadata: { name: namespaceReader, labels },
          rules: [
            {
              apiGroups: [''],
              resources: ['namespaces'],
              verbs: ['get'],
              resourceNames: [...MESH_NAMESPACES],
            },
          ],
        }),
      );
      clusterScoped(
        new k8s.KubeClusterRoleBinding(this, 'namespace-reader-binding', {
          metadata: { name: namespaceReader, labels },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: namespaceReader },
          subjects: [{ kind: 'ServiceAccount', name, namespace }],
        }),
      );
    }

    runnerJob(this, {
      name,
      namespace,
      labels,
      podLabels: { ...labels, [CELL_LABEL]: cell.name },
      image: config.runner.image,
      imagePullPolicy: 'IfNotPresent',
      bundle: NETWORK_RUNNER_FILES.bundle,
      placement: { nodeSelector: cellNodeSelector(cell.name) },
    });
  }
}
