import { Chart, type ChartProps } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { labPlacement, type NodePool } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import type { ServerSet } from '../lib/study/arms.ts';
import { pairSuffix, studyPairs } from '../lib/study/pairs.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import { eppName, headlessServiceName, replicaSetName, VLLM_PORT } from '../lib/study/topology.ts';
import {
  COMPONENT_LABEL,
  envVars,
  GPU_RESOURCE,
  gpuRuntime,
  MODEL_CACHE_MOUNT,
  modelCacheMount,
  modelCacheVolume,
  NVIDIA_RUNTIME_CLASS,
  podPlacement,
  port,
  quantity,
  rootContainerSecurity,
} from './common.ts';

/** The ZMQ port the llm-d EPP binds for KV events; the replicas connect to it (docs/facts.md §3.7). */
export const KV_EVENTS_PORT = 5557;

/** KV-cache event publishing of llm-d's replica set (docs/facts.md §3.7). */
export interface KvEventsOptions {
  /** `tcp://host:port` of the EPP that indexes the events. */
  readonly endpoint: string;
  /** PYTHONHASHSEED; must equal the indexer's hashSeed. */
  readonly hashSeed: string;
}

export interface ModelServersProps {
  /** StatefulSet name, pod-name prefix and `app` label (`qwen3`, `qwen3-kv`). */
  readonly name: string;
  /** Headless Service that gives each replica a stable DNS name. */
  readonly headlessService: string;
  readonly replicas: number;
  /** Pinned vLLM image. */
  readonly image: string;
  /** Hugging Face model id (`--model`). */
  readonly model: string;
  /** `--served-model-name`; benchmark clients must send the same name. */
  readonly servedName: string;
  readonly maxModelLen: number;
  readonly gpuMemoryUtilization: number;
  readonly blockSize: number;
  /**
   * `--max-num-batched-tokens`: explicit, because vLLM otherwise picks it from the GPU's memory
   * and the planner must simulate what the servers run (docs/facts.md §3.1).
   */
  readonly maxNumBatchedTokens: number;
  /** `--max-num-seqs`: explicit for the same reason. */
  readonly maxNumSeqs: number;
  /**
   * Publish KV-cache events to an llm-d EPP.
   * @default - no events (the standard replicas)
   */
  readonly kvEvents?: KvEventsOptions;
  /**
   * CPU request of each replica.
   * @default REQUESTS.replica.cpu (lib/study/resources.ts)
   */
  readonly cpu?: string;
  /**
   * Memory request and limit of each replica (host RAM: weights staging, tokenizer, CUDA graphs).
   * @default REQUESTS.replica.memory (lib/study/resources.ts)
   */
  readonly memory?: string;
  /**
   * Size of the `/dev/shm` memory volume.
   * @default '4Gi'
   */
  readonly shmSize?: string;
  /**
   * RuntimeClass that injects the GPU; null where the node's default runtime already does.
   * @default 'nvidia' (the RuntimeClass K3s registers)
   */
  readonly runtimeClassName?: string | null;
  /**
   * GPU nodes the replicas may run on (nodeSelector and tolerations).
   * @default - any node with a free GPU
   */
  readonly nodePool?: NodePool;
  /**
   * Labels of a node the replicas prefer to avoid (a soft node affinity): the runner's node,
   * which also holds every client, when there is another GPU node.
   * @default - no preference
   */
  readonly avoidNode?: Readonly<Record<string, string>>;
}

/**
 * A preferred node affinity away from the node with these labels: one term per label, each
 * scoring a node that lacks the label or has another value (NotIn also matches an absent key).
 */
export function preferAwayFrom(labels: Readonly<Record<string, string>>): k8s.Affinity {
  const entries = Object.entries(labels);
  return {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: entries.map(([key, value]) => ({
        weight: Math.max(1, Math.floor(100 / entries.length)),
        preference: { matchExpressions: [{ key, operator: 'NotIn', values: [value] }] },
      })),
    },
  };
}

/** Node label that tells nodes apart, for spreading the replicas over every GPU node. */
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';

/** Arguments of the vLLM OpenAI server for one replica set (docs/facts.md §3.1, 3.7). */
export function vllmServerArgs(props: ModelServersProps): string[] {
  const args = [
    `--model=${props.model}`,
    `--served-model-name=${props.servedName}`,
    '--host=0.0.0.0',
    `--port=${VLLM_PORT}`,
    `--max-model-len=${props.maxModelLen}`,
    `--gpu-memory-utilization=${props.gpuMemoryUtilization}`,
    // Never --disable-log-stats: it removes every vllm:* metric, the study's evidence.
    '--enable-prefix-caching',
    `--block-size=${props.blockSize}`,
    `--max-num-batched-tokens=${props.maxNumBatchedTokens}`,
    `--max-num-seqs=${props.maxNumSeqs}`,
  ];
  if (props.kvEvents) {
    const kvEventsConfig = {
      enable_kv_cache_events: true,
      publisher: 'zmq',
      endpoint: props.kvEvents.endpoint,
      // Kubernetes expands $(POD_IP) from the container env. The indexer keys blocks by the
      // topic's model part (llm-d-kv-cache-manager v0.3.2 kvevents zmqSubscriber.runSubscriber
      // splits `kv@<pod>@<model>`) and looks them up by the request's model, the served name.
      topic: `kv@$(POD_IP)@${props.servedName}`,
    };
    args.push(
      '--prefix-caching-hash-algo=sha256_cbor',
      `--kv-events-config=${JSON.stringify(kvEventsConfig)}`,
    );
  }
  return args;
}

/**
 * N vLLM replicas of one model, one GPU each, with stable names: a StatefulSet (`qwen3-0`,
 * `qwen3-1`, ...) and a headless Service, so front ends address `qwen3-0.qwen3-headless` and
 * nothing is re-pointed when a pod restarts.
 */
export class ModelServers extends Construct {
  public readonly name: string;
  public readonly headlessService: string;
  /** Labels that select exactly these replicas. */
  public readonly selector: Readonly<Record<string, string>>;

  constructor(scope: Construct, id: string, props: ModelServersProps) {
    super(scope, id);
    if (!Number.isInteger(props.replicas) || props.replicas < 1) {
      throw new Error(
        `ModelServers ${props.name}: replicas must be a positive integer, got ${props.replicas}`,
      );
    }
    this.name = props.name;
    this.headlessService = props.headlessService;
    this.selector = { app: props.name };
    const memory = props.memory ?? REQUESTS.replica.memory;

    new k8s.KubeService(this, 'headless', {
      metadata: { name: props.headlessService, labels: { [COMPONENT_LABEL]: 'model-servers' } },
      spec: {
        clusterIp: 'None',
        // DNS names exist while a replica loads its model, so front ends resolve them early.
        publishNotReadyAddresses: true,
        selector: { ...this.selector },
        ports: [{ name: 'http', port: VLLM_PORT, targetPort: port(VLLM_PORT) }],
      },
    });

    const env: k8s.EnvVar[] = [
      // Registers POST /reset_prefix_cache, so runs reset caches without restarting pods.
      ...envVars({ VLLM_SERVER_DEV_MODE: '1', HF_HOME: MODEL_CACHE_MOUNT }),
    ];
    if (props.kvEvents) {
      env.push(
        { name: 'PYTHONHASHSEED', value: props.kvEvents.hashSeed },
        { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      );
    }

    new k8s.KubeStatefulSet(this, 'statefulset', {
      metadata: { name: props.name, labels: { [COMPONENT_LABEL]: 'model-servers' } },
      spec: {
        serviceName: props.headlessService,
        replicas: props.replicas,
        // Replicas are independent; start them together (the bootstrap pre-fetches the model).
        podManagementPolicy: 'Parallel',
        selector: { matchLabels: { ...this.selector } },
        template: {
          metadata: { labels: { ...this.selector, [COMPONENT_LABEL]: 'model-servers' } },
          spec: {
            // Without it the GPU is requested but not injected into the container.
            ...gpuRuntime(
              props.runtimeClassName === undefined ? NVIDIA_RUNTIME_CLASS : props.runtimeClassName,
            ),
            ...(props.nodePool ? podPlacement(props.nodePool) : {}),
            ...(props.avoidNode && Object.keys(props.avoidNode).length > 0
              ? { affinity: preferAwayFrom(props.avoidNode) }
              : {}),
            // Use every GPU node: one more replica on a node than on another only when the GPUs
            // (a hard limit through nvidia.com/gpu) leave no other choice, hence ScheduleAnyway.
            topologySpreadConstraints: [
              {
                maxSkew: 1,
                topologyKey: HOSTNAME_LABEL,
                whenUnsatisfiable: 'ScheduleAnyway',
                labelSelector: { matchLabels: { ...this.selector } },
              },
            ],
            terminationGracePeriodSeconds: 30,
            containers: [
              {
                name: 'vllm',
                image: props.image,
                // The API server module takes --model as a flag in every release; `vllm serve`
                // prefers the model as a positional argument.
                command: ['python3', '-m', 'vllm.entrypoints.openai.api_server'],
                args: vllmServerArgs(props),
                env,
                ports: [{ name: 'http', containerPort: VLLM_PORT }],
                resources: {
                  requests: { cpu: quantity(props.cpu ?? REQUESTS.replica.cpu), memory: quantity(memory) },
                  limits: { memory: quantity(memory), [GPU_RESOURCE]: quantity(1) },
                },
                securityContext: rootContainerSecurity(),
                readinessProbe: {
                  httpGet: { path: '/health', port: port(VLLM_PORT) },
                  // Model load plus engine start takes more than a minute.
                  initialDelaySeconds: 30,
                  periodSeconds: 10,
                  failureThreshold: 60,
                },
                volumeMounts: [modelCacheMount(), { name: 'dshm', mountPath: '/dev/shm' }],
              },
            ],
            volumes: [
              modelCacheVolume(),
              { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: quantity(props.shmSize ?? '4Gi') } },
            ],
          },
        },
      },
    });
  }
}

/** ModelServers props of a server set, from the configuration. */
export function modelServersProps(config: LabConfig, servers: ServerSet, pair = 0): ModelServersProps {
  const placement = labPlacement(config);
  const common = {
    name: replicaSetName(config, servers, pair),
    headlessService: headlessServiceName(config, servers, pair),
    replicas: config.vllm.replicas,
    image: config.vllm.image,
    model: config.model.name,
    servedName: config.model.servedName,
    maxModelLen: config.vllm.maxModelLen,
    gpuMemoryUtilization: config.vllm.gpuMemoryUtilization,
    maxNumBatchedTokens: config.vllm.maxNumBatchedTokens,
    maxNumSeqs: config.vllm.maxNumSeqs,
    runtimeClassName: placement.gpuRuntimeClass ?? null,
    nodePool: placement.replicas,
    ...(placement.replicasAvoid ? { avoidNode: placement.replicasAvoid } : {}),
  };
  if (servers === 'standard') return { ...common, blockSize: config.vllm.blockSize };
  const epp = eppName(config, 'llmd-precise');
  return {
    ...common,
    // Must equal the indexer's blockSize, or no event ever matches a lookup.
    blockSize: config.llmd.blockSize,
    kvEvents: {
      endpoint: `tcp://${epp}.${config.namespace}.svc.cluster.local:${KV_EVENTS_PORT}`,
      hashSeed: config.llmd.hashSeed,
    },
  };
}

export interface ModelServersChartProps extends ChartProps {
  readonly config: LabConfig;
}

/**
 * The replicas: the standard set always, llm-d's KV-events set only when the `llmd-precise` arm
 * is enabled (it needs GPUs of its own), and the standard set of each further replica pair with
 * `study.parallelism: 2` (`qwen3-b`, lib/study/pairs.ts).
 */
export class ModelServersChart extends Chart {
  public readonly standard: ModelServers;
  public readonly kvEvents?: ModelServers;

  constructor(scope: Construct, id: string, props: ModelServersChartProps) {
    super(scope, id, props);
    const { config } = props;
    this.standard = new ModelServers(this, 'standard', modelServersProps(config, 'standard'));
    for (const pair of studyPairs(config).slice(1)) {
      new ModelServers(this, `standard${pairSuffix(pair)}`, modelServersProps(config, 'standard', pair));
    }
    if (config.study.optionalArms.includes('llmd-precise')) {
      this.kvEvents = new ModelServers(this, 'kv-events', modelServersProps(config, 'kv-events'));
    }
  }
}
