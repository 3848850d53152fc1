import { labManifests } from '../../charts/lab-app.ts';
import { studyRunnerObjects } from '../../charts/study-runner.ts';
import { labPlacement } from '../config/placement.ts';
import type { LabConfig } from '../config/schema.ts';
import type { AccessQuestion, KubeObject } from '../kube/cluster-api.ts';
import { prerequisites } from '../prereqs/prerequisites.ts';
import { resourceBudget } from '../study/resources.ts';
import { STUDY_RUNNER_CHART, STUDY_RUNNER_NAME } from '../study/topology.ts';
import type { ClusterNeeds } from './cluster-checks.ts';
import { type RunnerAccess, runnerAccess } from './runner-access.ts';
import type { InstallStep } from './steps.ts';

export interface InstallPlan {
  readonly needs: ClusterNeeds;
  readonly steps: readonly InstallStep[];
  /** The chart holding the NVIDIA device plugin: skipped when the cluster already advertises GPUs. */
  readonly devicePluginChart: string;
  /** The chart holding the replicas: the GPUs must be advertised before it. */
  readonly replicasChart: string;
  /**
   * What the study commands read after the install, reviewed with what it creates: `lab status`
   * and `lab results` list the results server's pod and read through its pods/proxy, `lab logs`
   * reads pods/log (lib/control/cluster-study.ts, cluster-logs.ts). Without them the install
   * passes and the next command stops on a 403.
   */
  readonly studyAccess: readonly AccessQuestion[];
  /**
   * The study runner's ServiceAccount, Roles and bindings (applied last, as chart
   * RUNNER_ACCESS_CHART) and every permission the runner needs, reviewed for it once applied.
   */
  readonly runnerAccess: RunnerAccess;
}

/**
 * The runner chart's access objects, applied by `lab install` so that the API server can be asked
 * whether the runner may do its work before any study starts; `lab run` applies them again with
 * the Job, and `lab uninstall` removes them with the charts (its metrics ClusterRole included).
 */
export const RUNNER_ACCESS_CHART = `${STUDY_RUNNER_CHART}-access`;

/** The device plugin's and the replicas' charts (charts/lab-app.ts). */
const DEVICE_PLUGIN_CHART = '10-gpu';
const REPLICAS_CHART = '20-model-servers';

/**
 * What `lab install` applies for this configuration: the prerequisites in order, then every chart
 * of the lab with the after-apply steps behind the chart they follow, then the runner's access
 * (its ServiceAccount, Roles and bindings). The study runner itself is not installed: `lab run`
 * starts it.
 */
export function installPlan(config: LabConfig): InstallPlan {
  if (config.lab === 'network') {
    throw new Error(
      'lab install installs the LLM-gateway lab; the network lab runs on its own cells (npx cdk deploy), one cluster per cell',
    );
  }
  const list = prerequisites(config);
  const steps: InstallStep[] = list.prerequisites.map((prerequisite) =>
    prerequisite.kind === 'manifest'
      ? { kind: 'manifest' as const, prerequisite }
      : { kind: 'helm' as const, prerequisite },
  );
  for (const manifest of labManifests(config)) {
    steps.push({
      kind: 'chart',
      chart: manifest.chart,
      objects: manifest.objects as unknown as KubeObject[],
    });
    for (const step of list.afterApply.filter((s) => s.after === manifest.chart)) {
      steps.push({ kind: 'after-apply', step });
    }
  }
  const access = runnerAccess(studyRunnerObjects(config) as unknown as KubeObject[], {
    namespace: config.namespace,
    name: STUDY_RUNNER_NAME,
  });
  steps.push({ kind: 'chart', chart: RUNNER_ACCESS_CHART, objects: access.objects });
  const placement = labPlacement(config);
  const gpus = resourceBudget(config).placed.reduce((sum, line) => sum + line.count * line.gpus, 0);
  const usesModelCacheReaders = config.study.optionalArms.includes('llmd-precise');
  return {
    needs: {
      placement,
      gpus,
      results: config.runner.results,
      pools: [
        { what: 'vLLM replicas', setting: 'placement.gpuNodes', pool: placement.replicas },
        {
          what: 'routers, Endpoint Pickers and Envoys',
          setting: 'placement.frontEnds',
          pool: placement.frontEnds,
        },
        {
          what: 'the study runner and its clients',
          setting: 'placement.runnerNodeSelector',
          pool: placement.runner,
        },
        ...(usesModelCacheReaders
          ? [
              {
                what: 'the llm-d Endpoint Picker',
                setting: 'placement.gpuNodes',
                pool: placement.modelCacheReaders,
              },
            ]
          : []),
      ],
    },
    steps,
    devicePluginChart: DEVICE_PLUGIN_CHART,
    replicasChart: REPLICAS_CHART,
    studyAccess: [
      { verb: 'list', group: '', resource: 'pods', namespace: config.namespace },
      { verb: 'get', group: '', resource: 'pods', subresource: 'proxy', namespace: config.namespace },
      { verb: 'get', group: '', resource: 'pods', subresource: 'log', namespace: config.namespace },
    ],
    runnerAccess: access,
  };
}
