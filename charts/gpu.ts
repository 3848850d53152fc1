import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import type { NodePool } from '../lib/config/placement.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { containerResources, GPU_RESOURCE, gpuRuntime, NVIDIA_RUNTIME_CLASS } from './common.ts';

/** Where the kubelet expects device plugins to register their sockets. */
const DEVICE_PLUGIN_DIR = '/var/lib/kubelet/device-plugins';

export interface NvidiaDevicePluginProps {
  /** Pinned device plugin image (`config.devicePlugin.image`). */
  readonly image: string;
  /**
   * DaemonSet name.
   * @default 'nvidia-device-plugin'
   */
  readonly name?: string;
  /**
   * RuntimeClass that lets the plugin see the GPUs; null where the node's default runtime does.
   * @default 'nvidia'
   */
  readonly runtimeClassName?: string | null;
  /**
   * The GPU nodes: the plugin runs only there, with their tolerations.
   * @default - every node that tolerates nothing but nvidia.com/gpu
   */
  readonly gpuNodes?: NodePool;
}

/**
 * The NVIDIA device plugin: advertises each GPU as `nvidia.com/gpu` so replicas can request one.
 * It runs with the `nvidia` RuntimeClass, or it cannot see the GPUs to advertise them.
 */
export class NvidiaDevicePlugin extends Construct {
  public readonly name: string;

  constructor(scope: Construct, id: string, props: NvidiaDevicePluginProps) {
    super(scope, id);
    this.name = props.name ?? 'nvidia-device-plugin';
    const selector = { 'app.kubernetes.io/name': this.name };
    new k8s.KubeDaemonSet(this, 'daemonset', {
      metadata: { name: this.name },
      spec: {
        selector: { matchLabels: selector },
        updateStrategy: { type: 'RollingUpdate' },
        template: {
          metadata: { labels: selector },
          spec: {
            ...gpuRuntime(
              props.runtimeClassName === undefined ? NVIDIA_RUNTIME_CLASS : props.runtimeClassName,
            ),
            ...(props.gpuNodes ? { nodeSelector: { ...props.gpuNodes.nodeSelector } } : {}),
            // A node without this plugin cannot run any replica: evict it last.
            priorityClassName: 'system-node-critical',
            tolerations: [
              { key: GPU_RESOURCE, operator: 'Exists', effect: 'NoSchedule' },
              ...(props.gpuNodes?.tolerations ?? []).map((t) => ({ ...t })),
            ],
            containers: [
              {
                name: 'device-plugin',
                image: props.image,
                // Keep running on a node without GPUs instead of crash-looping.
                env: [{ name: 'FAIL_ON_INIT_ERROR', value: 'false' }],
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
                resources: containerResources(REQUESTS.devicePlugin),
                volumeMounts: [{ name: 'device-plugins', mountPath: DEVICE_PLUGIN_DIR }],
              },
            ],
            volumes: [{ name: 'device-plugins', hostPath: { path: DEVICE_PLUGIN_DIR, type: 'Directory' } }],
          },
        },
      },
    });
  }
}

export interface GpuPlumbingChartProps extends ChartProps {
  /** Pinned device plugin image. */
  readonly devicePluginImage: string;
  /**
   * RuntimeClass of the plugin; null for none.
   * @default 'nvidia'
   */
  readonly runtimeClassName?: string | null;
  /**
   * The GPU nodes the plugin runs on.
   * @default - every node
   */
  readonly gpuNodes?: NodePool;
}

/** GPU plumbing in `kube-system`: applied before anything that requests a GPU. */
export class GpuPlumbingChart extends Chart {
  constructor(scope: Construct, id: string, props: GpuPlumbingChartProps) {
    super(scope, id, { ...props, namespace: props.namespace ?? 'kube-system' });
    new NvidiaDevicePlugin(this, 'device-plugin', {
      image: props.devicePluginImage,
      ...(props.runtimeClassName === undefined ? {} : { runtimeClassName: props.runtimeClassName }),
      ...(props.gpuNodes ? { gpuNodes: props.gpuNodes } : {}),
    });
  }
}
