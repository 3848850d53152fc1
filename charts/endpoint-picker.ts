import { createHash } from 'node:crypto';
import { type ApiObject, Chart, type ChartProps, JsonPatch } from 'cdk8s';
import { k8s } from 'cdk8s-plus-34';
import { Construct } from 'constructs';
import { stringify } from 'yaml';
import { labPlacement, type NodePool } from '../lib/config/placement.ts';
import type { LabConfig } from '../lib/config/schema.ts';
import type { Arm } from '../lib/study/arms.ts';
import { studyFrontEnds } from '../lib/study/arms.ts';
import { onEveryPair, pairSuffix, studyPairs } from '../lib/study/pairs.ts';
import { SCORES_LINE_VERBOSITY } from '../lib/study/precise-evidence.ts';
import { REQUESTS } from '../lib/study/resources.ts';
import {
  EPP_CONTAINER,
  EPP_GRPC_PORT,
  EPP_METRICS_PORT,
  eppName,
  replicaSetName,
  VLLM_PORT,
} from '../lib/study/topology.ts';
import {
  COMPONENT_LABEL,
  containerResources,
  MODEL_CACHE_MOUNT,
  modelCacheVolume,
  podPlacement,
  port,
} from './common.ts';
import {
  type EndpointPickerConfig,
  gaieSchedulerConfig,
  precisePrefixCacheConfig,
} from './gaie/endpoint-picker-config.ts';
import { INFERENCE_POOL_GROUP, InferencePool } from './gaie/inference-pool.ts';
import { KV_EVENTS_PORT } from './model-servers.ts';

/** gRPC health service port; probes use it (9002 serves health only with --health-checking). */
export const EPP_HEALTH_PORT = 9003;
/** Service name the EPP registers with its gRPC health server. */
export const EPP_HEALTH_SERVICE = 'inference-extension';
/** vLLM 0.11 hides the EPP's default `vllm:gpu_cache_usage_perc`; without this the scorer reads nothing. */
export const VLLM_KV_CACHE_METRIC = 'vllm:kv_cache_usage_perc';

const CONFIG_DIR = '/config';
const CONFIG_FILE = 'default-plugins.yaml';

/** Writable emptyDir of llm-d's precise scorer: `indexerConfig.tokenizersPoolConfig.tokenizersCacheDir`. */
export const TOKENIZERS_DIR = '/tokenizers';
/** The llm-d scheduler image's user (its Dockerfile: `USER 65532:65532`); the seed is written as it. */
export const EPP_IMAGE_USER = 65532;

/**
 * The files `tokenizers.FromPretrained` (daulet/tokenizers v1.22.1, used by llm-d-kv-cache-manager
 * v0.3.2 CachedHFTokenizer.getTokenizer) looks for in `<cacheDir>/<model>/`: it downloads each one
 * that is missing (only tokenizer.json is mandatory) and then loads tokenizer.json alone.
 */
export const TOKENIZER_FILES = [
  'tokenizer.json',
  'vocab.txt',
  'merges.txt',
  'special_tokens_map.json',
  'added_tokens.json',
] as const;

/** Pre-seeding of llm-d's tokenizer folder from the shared model cache (docs/facts.md §3.7). */
export interface TokenizerSeed {
  /** An image the host already has, with a POSIX shell and cp (the vLLM image). */
  readonly image: string;
  /** Hugging Face id of the model whose snapshot is in the shared cache (`Qwen/Qwen3-0.6B-FP8`). */
  readonly model: string;
  /**
   * The folder the scorer opens: the request's `model` field, i.e. the served name. The scorer
   * tokenizes with `request.TargetModel` (llm-d-inference-scheduler v0.3.2 PrecisePrefixCacheScorer.Score)
   * and `FromPretrained` reads `<cacheDir>/<model>/tokenizer.json`.
   */
  readonly servedName: string;
}

/** The model's folder in the HF_HOME layout of the shared cache: `/models/hub/models--Qwen--Qwen3-0.6B-FP8`. */
export function hubModelDir(model: string, cacheRoot = MODEL_CACHE_MOUNT): string {
  return `${cacheRoot}/hub/models--${model.split('/').join('--')}`;
}

/**
 * The initContainer's script: copy the tokenizer files of the cached snapshot `refs/main` points
 * at (what the bootstrap's snapshot_download fetched) into `<dir>/<served name>/`, or fail saying
 * which file is missing. Paths are single-quoted: model ids never contain a quote.
 */
export function tokenizerSeedScript(
  seed: TokenizerSeed,
  paths: { readonly dir?: string; readonly cacheRoot?: string } = {},
): string {
  const dir = paths.dir ?? TOKENIZERS_DIR;
  const repo = hubModelDir(seed.model, paths.cacheRoot);
  const target = `${dir}/${seed.servedName}`;
  return [
    'set -eu',
    `repo='${repo}'`,
    `target='${target}'`,
    'if [ ! -f "$repo/refs/main" ]; then',
    `  echo "lab: $repo/refs/main not found: ${seed.model} is not in the shared model cache (the bootstrap pre-fetches it); cannot seed the tokenizer for ${seed.servedName}" >&2`,
    '  exit 1',
    'fi',
    'snapshot="$repo/snapshots/$(cat "$repo/refs/main")"',
    'if [ ! -f "$snapshot/tokenizer.json" ]; then',
    `  echo "lab: $snapshot/tokenizer.json not found: the cached snapshot of ${seed.model} has no tokenizer.json; the llm-d scorer cannot tokenize ${seed.servedName} requests" >&2`,
    '  exit 1',
    'fi',
    'mkdir -p "$target"',
    `for f in ${TOKENIZER_FILES.join(' ')}; do`,
    '  if [ -f "$snapshot/$f" ]; then cp -L "$snapshot/$f" "$target/$f"; fi',
    'done',
    'echo "lab: seeded $target from $snapshot"',
  ].join('\n');
}

/**
 * The InferencePool of an EPP-style front end: `qwen3-pool` for the core EPP, one per other front
 * end; `qwen3-pool-b` for the core EPP of the second replica pair (lib/study/pairs.ts).
 */
export function inferencePoolName(config: LabConfig, frontEndId: string, pair = 0): string {
  return frontEndId === 'epp'
    ? `${config.model.servedName}-pool${pairSuffix(pair)}`
    : `${eppName(config, frontEndId, pair)}-pool`;
}

export interface EndpointPickerProps {
  /** Name of the Deployment, Service, ServiceAccount and Role (`qwen3-epp`, ...). */
  readonly name: string;
  /** Namespace of the pool (`--pool-namespace`); also the RBAC subject's namespace. */
  readonly namespace: string;
  /** The InferencePool this EPP picks endpoints of. */
  readonly poolName: string;
  /** Labels that select the pool's model servers (matchLabels only). */
  readonly poolSelector: Readonly<Record<string, string>>;
  /** The model servers' port. */
  readonly targetPort: number;
  /** Pinned EPP image (GAIE's, or llm-d's inference scheduler). */
  readonly image: string;
  /** Scheduler configuration, written to the config file the EPP reads at start. */
  readonly schedulerConfig: EndpointPickerConfig;
  /**
   * Serve ext_proc with TLS (a self-signed certificate). Must match the data plane: the standalone
   * Envoy talks plaintext; the Envoy AI Gateway's generated ext_proc cluster speaks TLS.
   * @default false
   */
  readonly secureServing?: boolean;
  /**
   * The EPP's `--v`: 1 keeps its log to errors and start-up; llm-d's precise scorer logs its pod
   * scores, the run's evidence that it matched, only at 4 (docs/facts.md §3.7).
   * @default 1
   */
  readonly verbosity?: number;
  /**
   * Also expose the ZMQ port llm-d's KV-events replicas publish to.
   * @default - no KV-events port
   */
  readonly kvEventsPort?: number;
  /**
   * Give the EPP a writable tokenizer folder at TOKENIZERS_DIR, seeded by an initContainer (llm-d's
   * precise scorer; the scheduler config must name the same folder).
   * @default - no tokenizer folder
   */
  readonly tokenizerSeed?: TokenizerSeed;
  /**
   * Nodes the pod may run on (nodeSelector and tolerations).
   * @default - any node
   */
  readonly nodePool?: NodePool;
}

/** The EPP's command line (docs/facts.md §3.4); the image's entrypoint is `/epp`. */
export function endpointPickerArgs(
  props: Pick<EndpointPickerProps, 'poolName' | 'namespace' | 'secureServing' | 'verbosity'>,
): string[] {
  return [
    '--pool-name',
    props.poolName,
    '--pool-namespace',
    props.namespace,
    '--pool-group',
    INFERENCE_POOL_GROUP,
    // Without a config file the EPP exits: "scheduler config must be set".
    '--config-file',
    `${CONFIG_DIR}/${CONFIG_FILE}`,
    '--zap-encoder',
    'json',
    '--v',
    String(props.verbosity ?? 1),
    '--kv-cache-usage-percentage-metric',
    VLLM_KV_CACHE_METRIC,
    `--secure-serving=${props.secureServing ?? false}`,
  ];
}

/** Cluster-scoped objects must not carry the chart's namespace. */
export function clusterScoped<T extends ApiObject>(object: T): T {
  object.addJsonPatch(JsonPatch.remove('/metadata/namespace'));
  return object;
}

/**
 * GAIE's Endpoint Picker for one arm: its InferencePool, scheduler ConfigMap, RBAC, Deployment
 * and Service. Ready only after the pool has synced.
 */
export class EndpointPicker extends Construct {
  public readonly name: string;
  public readonly poolName: string;

  constructor(scope: Construct, id: string, props: EndpointPickerProps) {
    super(scope, id);
    this.name = props.name;
    this.poolName = props.poolName;
    const labels = { [COMPONENT_LABEL]: 'epp' };
    const selector = { app: props.name };
    const configText = stringify(props.schedulerConfig);

    new InferencePool(this, 'pool', {
      metadata: { name: props.poolName, labels },
      spec: {
        selector: { matchLabels: { ...props.poolSelector } },
        targetPorts: [{ number: props.targetPort }],
        endpointPickerRef: { name: props.name, port: { number: EPP_GRPC_PORT }, failureMode: 'FailClose' },
      },
    });

    new k8s.KubeConfigMap(this, 'config', {
      metadata: { name: `${props.name}-config`, labels },
      data: { [CONFIG_FILE]: configText },
    });

    new k8s.KubeServiceAccount(this, 'service-account', { metadata: { name: props.name, labels } });
    const subject = { kind: 'ServiceAccount', name: props.name, namespace: props.namespace };

    new k8s.KubeRole(this, 'role', {
      metadata: { name: props.name, labels },
      rules: [
        {
          apiGroups: [INFERENCE_POOL_GROUP],
          resources: ['inferencepools'],
          verbs: ['get', 'watch', 'list'],
        },
        // The EPP watches InferenceObjectives too, even when none exist.
        {
          apiGroups: ['inference.networking.x-k8s.io'],
          resources: ['inferenceobjectives'],
          verbs: ['get', 'watch', 'list'],
        },
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'watch', 'list'] },
      ],
    });
    new k8s.KubeRoleBinding(this, 'role-binding', {
      metadata: { name: props.name, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: props.name },
      subjects: [subject],
    });

    // Cluster-wide names: prefix with the namespace so two labs on one cluster do not collide.
    const authName = `${props.namespace}-${props.name}-auth`;
    clusterScoped(
      new k8s.KubeClusterRole(this, 'auth-role', {
        metadata: { name: authName, labels },
        // The metrics endpoint authenticates its scrapers with these reviews.
        rules: [
          { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
          { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
        ],
      }),
    );
    clusterScoped(
      new k8s.KubeClusterRoleBinding(this, 'auth-role-binding', {
        metadata: { name: authName, labels },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: authName },
        subjects: [subject],
      }),
    );

    const containerPorts: k8s.ContainerPort[] = [
      { name: 'grpc', containerPort: EPP_GRPC_PORT },
      { name: 'grpc-health', containerPort: EPP_HEALTH_PORT },
      { name: 'metrics', containerPort: EPP_METRICS_PORT },
    ];
    if (props.kvEventsPort !== undefined)
      containerPorts.push({ name: 'zmq', containerPort: props.kvEventsPort });
    const healthProbe = { port: EPP_HEALTH_PORT, service: EPP_HEALTH_SERVICE };
    const seed = props.tokenizerSeed;

    new k8s.KubeDeployment(this, 'deployment', {
      metadata: { name: props.name, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: selector },
        // The runner restarts the EPP between runs to clear its prefix index: never two at once.
        strategy: { type: 'Recreate' },
        template: {
          metadata: {
            labels: { ...selector, ...labels },
            // A changed scheduler config rolls the pod.
            annotations: { 'lab/config-sha256': createHash('sha256').update(configText).digest('hex') },
          },
          spec: {
            serviceAccountName: props.name,
            ...(props.nodePool ? podPlacement(props.nodePool) : {}),
            terminationGracePeriodSeconds: 30,
            containers: [
              {
                name: EPP_CONTAINER,
                image: props.image,
                args: endpointPickerArgs(props),
                ports: containerPorts,
                resources: containerResources(REQUESTS.endpointPicker),
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
                readinessProbe: { grpc: healthProbe, periodSeconds: 2, failureThreshold: 3 },
                livenessProbe: {
                  grpc: healthProbe,
                  initialDelaySeconds: 5,
                  periodSeconds: 10,
                  failureThreshold: 3,
                },
                volumeMounts: [
                  { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
                  ...(seed ? [{ name: 'tokenizers', mountPath: TOKENIZERS_DIR }] : []),
                ],
              },
            ],
            ...(seed ? { initContainers: [tokenizerSeedContainer(seed)] } : {}),
            volumes: [
              { name: 'config', configMap: { name: `${props.name}-config` } },
              ...(seed ? [{ name: 'tokenizers', emptyDir: {} }, modelCacheVolume()] : []),
            ],
          },
        },
      },
    });

    const servicePorts: k8s.ServicePort[] = [
      {
        name: 'grpc',
        port: EPP_GRPC_PORT,
        targetPort: port(EPP_GRPC_PORT),
        // h2c is cleartext HTTP/2: true only without secure serving (no standard value names h2 over TLS).
        ...(props.secureServing ? {} : { appProtocol: 'kubernetes.io/h2c' }),
      },
      { name: 'grpc-health', port: EPP_HEALTH_PORT, targetPort: port(EPP_HEALTH_PORT) },
      { name: 'metrics', port: EPP_METRICS_PORT, targetPort: port(EPP_METRICS_PORT) },
    ];
    if (props.kvEventsPort !== undefined) {
      servicePorts.push({ name: 'zmq', port: props.kvEventsPort, targetPort: port(props.kvEventsPort) });
    }
    new k8s.KubeService(this, 'service', {
      metadata: { name: props.name, labels },
      spec: { selector, ports: servicePorts },
    });
  }
}

/** The initContainer that fills the tokenizer folder before the EPP starts. */
function tokenizerSeedContainer(seed: TokenizerSeed): k8s.Container {
  return {
    name: 'seed-tokenizer',
    image: seed.image,
    command: ['sh', '-c', tokenizerSeedScript(seed)],
    resources: containerResources(REQUESTS.tokenizerSeed),
    // As the EPP's user, so the scorer may still add the optional files it finds missing.
    securityContext: {
      runAsUser: EPP_IMAGE_USER,
      runAsGroup: EPP_IMAGE_USER,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [
      { name: 'model-cache', mountPath: MODEL_CACHE_MOUNT, readOnly: true },
      { name: 'tokenizers', mountPath: TOKENIZERS_DIR },
    ],
  };
}

/** EPP-style front ends of the study that this chart deploys (core EPP, prefix x3, llm-d precise). */
export function endpointPickerArms(config: LabConfig): Arm[] {
  return studyFrontEnds(config).filter((arm) => arm.frontEnd === 'epp' || arm.frontEnd === 'llmd');
}

/** EndpointPicker props of one EPP-style arm on a replica pair, from the configuration. */
export function endpointPickerProps(config: LabConfig, arm: Arm, pair = 0): EndpointPickerProps {
  const placement = labPlacement(config);
  const common = {
    name: eppName(config, arm.frontEndId, pair),
    namespace: config.namespace,
    poolName: inferencePoolName(config, arm.frontEndId, pair),
    poolSelector: { app: replicaSetName(config, arm.servers, pair) },
    targetPort: VLLM_PORT,
    nodePool: placement.frontEnds,
  };
  switch (arm.frontEndId) {
    case 'epp':
      return {
        ...common,
        image: config.gaie.eppImage,
        schedulerConfig: gaieSchedulerConfig(config.gaie.weights),
      };
    case 'epp-prefix3':
      return {
        ...common,
        image: config.gaie.eppImage,
        schedulerConfig: gaieSchedulerConfig({
          ...config.gaie.weights,
          prefixCache: config.gaie.prefixHeavyWeight,
        }),
      };
    case 'ai-gateway':
      // Its own EPP and pool over the standard replicas: a pool names exactly one EPP Service, and
      // the AI Gateway's generated ext_proc cluster speaks TLS to it (docs/facts.md §3.6).
      return {
        ...common,
        image: config.gaie.eppImage,
        schedulerConfig: gaieSchedulerConfig(config.gaie.weights),
        secureServing: true,
      };
    case 'llmd-precise':
      return {
        ...common,
        image: config.llmd.eppImage,
        schedulerConfig: precisePrefixCacheConfig({
          blockSize: config.llmd.blockSize,
          hashSeed: config.llmd.hashSeed,
          tokenizersCacheDir: TOKENIZERS_DIR,
          weights: config.llmd.weights,
        }),
        kvEventsPort: KV_EVENTS_PORT,
        // Its "Got pod scores" lines are the runner's evidence that the scorer matched.
        verbosity: SCORES_LINE_VERBOSITY,
        // Its tokenizer comes from the model cache, which only the GPU nodes have filled.
        nodePool: placement.modelCacheReaders,
        // The vLLM image: the host already has it for the replicas. No HF_TOKEN on the EPP: in
        // llm-d-kv-cache-manager v0.3.2 NewCachedHFTokenizer a token replaces the cache-dir option.
        tokenizerSeed: {
          image: config.vllm.image,
          model: config.model.name,
          servedName: config.model.servedName,
        },
      };
    default:
      throw new Error(`arm "${arm.id}" is not an Endpoint Picker arm`);
  }
}

export interface EndpointPickersChartProps extends ChartProps {
  readonly config: LabConfig;
}

/**
 * One EndpointPicker per EPP-style arm of the study and replica pair it runs on: the core EPP
 * once more over the second pair with `study.parallelism: 2` (`qwen3-epp-b`).
 */
export class EndpointPickersChart extends Chart {
  constructor(scope: Construct, id: string, props: EndpointPickersChartProps) {
    super(scope, id, props);
    for (const [arm, pair] of endpointPickerPlacements(props.config)) {
      new EndpointPicker(this, `${arm.id}${pairSuffix(pair)}`, endpointPickerProps(props.config, arm, pair));
    }
  }
}

/** Each EPP-style front end with every replica pair it is deployed on (lib/study/pairs.ts). */
export function endpointPickerPlacements(config: LabConfig): [Arm, number][] {
  return endpointPickerArms(config).flatMap((arm) =>
    (onEveryPair(arm) ? studyPairs(config) : [0]).map((pair): [Arm, number] => [arm, pair]),
  );
}
