import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import type { Construct } from 'constructs';
import { labPlacement } from '../lib/config/placement.ts';
import { RESULTS_CLAIM_NAME } from '../lib/config/results-volume.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import { resultsServerBundle } from '../lib/runner/bundle.ts';
import {
  RESULTS_SERVER_BUNDLE,
  RESULTS_SERVER_DIR,
  RESULTS_SERVER_NAME,
  RESULTS_SERVER_PORT,
} from '../lib/runner/results-server.ts';
import { RUNNER_RESULTS_MOUNT } from '../lib/runner/runner-files.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import {
  COMPONENT_LABEL,
  containerResources,
  envVars,
  podPlacement,
  port,
  RESULTS_HOST_PATH,
  RESULTS_READER_SECURITY,
} from './common.ts';

/**
 * The results folder on a cluster the user brings (`runner.results.volume: claim`): a
 * PersistentVolumeClaim, and a small read-only file server over it that `lab status` and
 * `lab results` reach through the API server's pods/proxy subresource (lib/control/cluster-study.ts).
 * On the lab's own K3s host the folder stays the runner node's host folder, which its bootstrap
 * uploads; nothing here is made then.
 */

/** The results server pods' component label: the runner Job's pod affinity names it. */
export const RESULTS_SERVER_COMPONENT = 'results-server';

/** Whether the results folder is a claim (else the runner node's host folder). */
export function resultsOnClaim(config: LabConfig): boolean {
  return config.runner.results.volume === 'claim';
}

/**
 * The `results` volume of a pod that writes or reads the results folder: the claim, or the host
 * folder `RESULTS_HOST_PATH/<sub>` (a client's own folder) of its node.
 */
export function resultsVolume(config: LabConfig, hostSub?: string): k8s.Volume {
  if (resultsOnClaim(config)) {
    return { name: 'results', persistentVolumeClaim: { claimName: RESULTS_CLAIM_NAME } };
  }
  const path = hostSub === undefined ? RESULTS_HOST_PATH : `${RESULTS_HOST_PATH}/${hostSub}`;
  return { name: 'results', hostPath: { path, type: 'DirectoryOrCreate' } };
}

/** The mount of `resultsVolume`: on a claim, a client's folder is its subPath (kubelet creates it). */
export function resultsMount(config: LabConfig, mountPath: string, claimSub?: string): k8s.VolumeMount {
  return {
    name: 'results',
    mountPath,
    ...(resultsOnClaim(config) && claimSub !== undefined ? { subPath: claimSub } : {}),
  };
}

/**
 * A claim that is ReadWriteOnce is attached to one node: the runner must run where the results
 * server already holds it (its clients follow the runner: lib/runner/layout.ts onRunnerNode).
 */
export function resultsAffinity(config: LabConfig): Pick<k8s.PodSpec, 'affinity'> {
  if (!resultsOnClaim(config)) return {};
  return {
    affinity: {
      podAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          {
            labelSelector: { matchLabels: { [COMPONENT_LABEL]: RESULTS_SERVER_COMPONENT } },
            topologyKey: 'kubernetes.io/hostname',
          },
        ],
      },
    },
  };
}

export interface ResultsStoreChartProps extends ChartProps {
  readonly config: LabConfig;
}

/** `05-results`: the claim and its file server, before anything that writes results. */
export class ResultsStoreChart extends Chart {
  constructor(scope: Construct, id: string, props: ResultsStoreChartProps) {
    super(scope, id, props);
    const { config } = props;
    const { storageClassName, size } = config.runner.results;
    new k8s.KubePersistentVolumeClaim(this, 'claim', {
      metadata: { name: RESULTS_CLAIM_NAME },
      spec: {
        accessModes: ['ReadWriteOnce'],
        ...(storageClassName ? { storageClassName } : {}),
        resources: { requests: { storage: k8s.Quantity.fromString(size) } },
      },
    });
    const name = RESULTS_SERVER_NAME;
    new k8s.KubeConfigMap(this, 'server-code', {
      metadata: { name },
      data: { [RESULTS_SERVER_BUNDLE]: resultsServerBundle() },
    });
    const labels = { [COMPONENT_LABEL]: RESULTS_SERVER_COMPONENT };
    new k8s.KubeDeployment(this, 'server', {
      metadata: { name, labels },
      spec: {
        replicas: 1,
        // A ReadWriteOnce claim: the old pod must let go of it before the new one mounts it.
        strategy: { type: 'Recreate' },
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            // It reads files and answers HTTP through the API server: no API token needed.
            automountServiceAccountToken: false,
            ...podPlacement(labPlacement(config).runner),
            containers: [
              {
                name: 'server',
                image: config.runner.image,
                command: ['node', `${RESULTS_SERVER_DIR}/${RESULTS_SERVER_BUNDLE}`],
                env: envVars({
                  LAB_RESULTS_DIR: RUNNER_RESULTS_MOUNT,
                  LAB_RESULTS_PORT: String(RESULTS_SERVER_PORT),
                }),
                // The first container port is the one pods/proxy reaches without a port in the name.
                ports: [{ name: 'http', containerPort: RESULTS_SERVER_PORT }],
                readinessProbe: {
                  httpGet: { path: '/healthz', port: port(RESULTS_SERVER_PORT) },
                  periodSeconds: 10,
                },
                resources: containerResources(REQUESTS.resultsServer),
                securityContext: RESULTS_READER_SECURITY,
                volumeMounts: [
                  { name: 'code', mountPath: RESULTS_SERVER_DIR, readOnly: true },
                  { name: 'results', mountPath: RUNNER_RESULTS_MOUNT, readOnly: true },
                ],
              },
            ],
            volumes: [{ name: 'code', configMap: { name } }, resultsVolume(config)],
          },
        },
      },
    });
  }
}
