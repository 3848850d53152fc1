import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { REQUESTS } from '../lib/study/resources.ts';
import { containerResources, GPU_RESOURCE, NVIDIA_RUNTIME_CLASS } from './common.ts';

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
            runtimeClassName: NVIDIA_RUNTIME_CLASS,
            // A node without this plugin cannot run any replica: evict it last.
            priorityClassName: 'system-node-critical',
            tolerations: [{ key: GPU_RESOURCE, operator: 'Exists', effect: 'NoSchedule' }],
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
}

/** GPU plumbing in `kube-system`: applied before anything that requests a GPU. */
export class GpuPlumbingChart extends Chart {
  constructor(scope: Construct, id: string, props: GpuPlumbingChartProps) {
    super(scope, id, { ...props, namespace: props.namespace ?? 'kube-system' });
    new NvidiaDevicePlugin(this, 'device-plugin', { image: props.devicePluginImage });
  }
}
