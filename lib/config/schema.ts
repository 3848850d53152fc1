import { z } from 'zod';
import { AwsSchema } from './aws.ts';
import { ClusterSchema } from './cluster.ts';
import { count, dnsLabel, pinnedImage } from './fields.ts';
import { instanceSchema } from './instance.ts';
import { NetworkSchema } from './network.ts';
import { PlacementSchema } from './placement.ts';
import { ResultsVolumeSchema } from './results-volume.ts';
import { CACHE_AWARE_DEFAULTS } from './router-defaults.ts';

/**
 * The lab configuration: one typed object that feeds the CDK stack, the cdk8s charts, the study
 * plan, the runner and the planner. Every default reproduces the published lab (docs/facts.md §2-4).
 *
 * Objects are strict: an unknown key is an error, so a typo never falls back to a default.
 * Lists replace the default list as a whole when overridden.
 */

/** Block sizes vLLM accepts for `--block-size`. */
export const BLOCK_SIZES = [1, 8, 16, 32, 64, 128] as const;

/** Routing policies of the vllm-router PyPI package (`--policy`). */
export const ROUTER_POLICIES = [
  'round_robin',
  'random',
  'cache_aware',
  'power_of_two',
  'consistent_hash',
] as const;

/** Optional arms of the study (docs/facts.md §4.2 step 5); each is off by default. */
export const OPTIONAL_ARMS = ['epp-prefix3', 'ai-gateway', 'llmd-precise'] as const;

const blockSize = (description: string) =>
  z
    .number()
    .refine((size) => (BLOCK_SIZES as readonly number[]).includes(size), {
      message: `must be one of ${BLOCK_SIZES.join(', ')}`,
    })
    .meta({ description, allowed: BLOCK_SIZES.join(', ') });

const InstanceSchema = instanceSchema({
  type: 'g6.12xlarge',
  role: 'GPU host',
  gpus: 4,
  gpusNote: 'g6.12xlarge: 4x NVIDIA L4 24 GB',
  vcpus: 48,
  quota: 'On-Demand G and VT',
  memoryGiB: 192,
  pricePerHourUsd: 4.6,
  amiParameter: '/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id',
  amiNote: 'Public SSM parameter holding the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)',
  rootVolumeGiB: 200,
  minRootVolumeGiB: 100,
  rootVolumeNote: 'Encrypted gp3 root volume: images, model cache and results',
});

const K3sSchema = z
  .strictObject({
    version: z
      .string()
      .regex(/^v\d+\.\d+\.\d+\+k3s\d+$/, 'must be a K3s release like v1.36.4+k3s1')
      .default('v1.36.4+k3s1')
      .describe('K3s release installed on the host (INSTALL_K3S_VERSION)'),
  })
  .prefault({});

const DevicePluginSchema = z
  .strictObject({
    image: pinnedImage('NVIDIA device plugin image').default('nvcr.io/nvidia/k8s-device-plugin:v0.17.1'),
  })
  .prefault({});

const ModelSchema = z
  .strictObject({
    name: z.string().min(1).default('Qwen/Qwen3-0.6B-FP8').describe('Hugging Face model id served by vLLM'),
    servedName: dnsLabel(
      '--served-model-name; also names the replicas (StatefulSet <name>, headless Service <name>-headless)',
    ).default('qwen3'),
  })
  .prefault({});

const VllmSchema = z
  .strictObject({
    image: pinnedImage('vLLM server image').default('vllm/vllm-openai:v0.11.0'),
    replicas: count('vLLM replicas, one GPU each').default(2),
    maxModelLen: count('--max-model-len').default(8192),
    gpuMemoryUtilization: z
      .number()
      .gt(0)
      .max(1)
      .default(0.85)
      .describe('--gpu-memory-utilization, fraction of GPU memory vLLM may use'),
    blockSize: blockSize('--block-size, tokens per KV cache block').default(16),
    maxNumBatchedTokens: count(
      '--max-num-batched-tokens: tokens per engine step (vLLM would pick it from the GPU memory; 2,048 is its L4 choice)',
    ).default(2048),
    maxNumSeqs: count(
      '--max-num-seqs: requests per engine step (vLLM would pick it from the GPU memory; 256 is its L4 choice)',
    ).default(256),
    kvCacheTokensPerReplica: count(
      'KV cache tokens per replica ("GPU KV cache size" in the vLLM log; 163,472 on an L4 at 0.85)',
    ).default(163_472),
  })
  .prefault({});

const RouterVariantSchema = z.strictObject({
  name: dnsLabel('Variant name; the arm is router-<name>'),
  policy: z.enum(ROUTER_POLICIES).describe('--policy'),
  cacheThreshold: z.number().min(0).max(1).optional().describe('--cache-threshold (cache_aware only)'),
  balanceAbsThreshold: z.number().int().nonnegative().optional().describe('--balance-abs-threshold'),
  balanceRelThreshold: z.number().positive().optional().describe('--balance-rel-threshold'),
  evictionIntervalSecs: z.number().int().positive().optional().describe('--eviction-interval-secs'),
  maxTreeSize: z.number().int().positive().optional().describe('--max-tree-size'),
});
export type RouterVariant = z.infer<typeof RouterVariantSchema>;

const RouterSchema = z
  .strictObject({
    version: z
      .string()
      .regex(/^\d+\.\d+\.\d+$/, 'must be an exact PyPI version like 0.1.15')
      .default('0.1.15')
      .describe(
        'vllm-router version installed at container start (offline from the host wheelhouse, else from PyPI)',
      ),
    image: pinnedImage(
      'Base image the router is pip-installed into; the wheelhouse the bootstrap stages must match its Python',
    ).default(
      // The `python:3.12-slim` index (Python 3.12.13, Debian trixie) as docker-library/repo-info
      // records it (repos/python/remote/3.12-slim.md at 2986dca3a80cb11b70fc4599941096374ea9e509).
      'python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36',
    ),
    variants: z
      .array(RouterVariantSchema)
      .min(1)
      .default([
        { name: 'round-robin', policy: 'round_robin' },
        { name: 'cache-aware', policy: 'cache_aware', ...CACHE_AWARE_DEFAULTS },
        {
          name: 'cache-aware-tuned',
          policy: 'cache_aware',
          ...CACHE_AWARE_DEFAULTS,
          balanceAbsThreshold: 4096,
          balanceRelThreshold: 100,
          evictionIntervalSecs: 3600,
        },
      ])
      .describe('One Deployment and Service per variant, so arms need no reconfiguration'),
  })
  .prefault({});

const weight = (description: string) => z.number().int().nonnegative().describe(description);

const GaieSchema = z
  .strictObject({
    version: z
      .string()
      .regex(/^v\d+\.\d+\.\d+$/, 'must be a release tag like v1.0.1')
      .default('v1.0.1')
      .describe('Gateway API Inference Extension release (CRDs from its release URL)'),
    eppImage: pinnedImage('Endpoint Picker image').default(
      'registry.k8s.io/gateway-api-inference-extension/epp:v1.0.1',
    ),
    weights: z
      .strictObject({
        queue: weight('queue-scorer weight').default(1),
        kvCacheUtilization: weight('kv-cache-utilization-scorer weight').default(1),
        prefixCache: weight('prefix-cache-scorer weight').default(1),
      })
      .prefault({}),
    prefixHeavyWeight: weight('prefix-cache-scorer weight of the optional epp-prefix3 arm').default(3),
  })
  .prefault({});

const EnvoySchema = z
  .strictObject({
    image: pinnedImage('Standalone Envoy image').default('envoyproxy/envoy:v1.35.3'),
    concurrency: count('--concurrency: Envoy worker threads (default would be one per host core)').default(8),
    logLevel: z
      .enum(['trace', 'debug', 'info', 'warn', 'error', 'critical', 'off'])
      .default('warn')
      .describe('--log-level; trace logging eats CPU under load'),
  })
  .prefault({});

const AiGatewaySchema = z
  .strictObject({
    envoyGatewayVersion: z
      .string()
      .regex(/^v\d+\.\d+\.\d+$/)
      .default('v1.8.1')
      .describe('Envoy Gateway release (the one AI Gateway was released against)'),
    aiGatewayVersion: z
      .string()
      .regex(/^v\d+\.\d+\.\d+$/)
      .default('v1.1.0')
      .describe('Envoy AI Gateway release'),
  })
  .prefault({});

const LlmdSchema = z
  .strictObject({
    eppImage: pinnedImage(
      'llm-d inference scheduler image (built on GAIE v1.0.0; runs with the GAIE v1.0.1 flags)',
    ).default('ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2'),
    blockSize: blockSize('Block size of the KV-events replicas; must equal the indexer blockSize').default(
      64,
    ),
    hashSeed: z
      .string()
      .regex(/^\d+$/)
      .default('42')
      .describe('PYTHONHASHSEED of the replicas and indexer hashSeed'),
    weights: z
      .strictObject({
        precisePrefixCache: weight('precise-prefix-cache-scorer weight').default(3),
        kvCacheUtilization: weight('kv-cache-utilization-scorer weight').default(2),
        queue: weight('queue-scorer weight').default(2),
      })
      .prefault({}),
  })
  .prefault({});

const BenchmarkSchema = z
  .strictObject({
    image: pinnedImage('Image of the `vllm bench serve` client; separate from the server image').default(
      'vllm/vllm-openai:v0.11.0',
    ),
    memoryLimitGi: count('Memory limit of a benchmark Job (tokenizer plus dataset parsing)').default(12),
    sharegptPath: z
      .string()
      .startsWith('/')
      .default('/models/datasets/ShareGPT_V3_unfiltered_cleaned_split.json')
      .describe('ShareGPT file in the shared cache, downloaded once by the testbed'),
  })
  .prefault({});

const WorkloadSchema = z
  .strictObject({
    prefixLen: count('Tokens of each shared prefix (--prefix-repetition-prefix-len)').default(2048),
    suffixLen: count('Unique tokens after the prefix (--prefix-repetition-suffix-len)').default(128),
    prefixes: count('Distinct prefixes (--prefix-repetition-num-prefixes)').default(128),
    outputLen: count('Generated tokens per request (--prefix-repetition-output-len)').default(128),
    prompts: count('Requests per run (--num-prompts)').default(1024),
    concurrency: count('--max-concurrency').default(32),
    seed: z.number().int().nonnegative().default(42).describe('--seed'),
    chatTemplateTokens: z
      .number()
      .int()
      .nonnegative()
      .default(10)
      .describe('Tokens the chat template adds to each request (2,186 looked up = 2,048 + 128 + 10)'),
    partitionSeeds: z
      .array(z.number().int().nonnegative())
      .optional()
      .describe(
        'Seed of each replica in the ideal-partition run, one per replica; absent: workload.seed + 4200 x replica (42, 4242, 8442, ...)',
      ),
  })
  .prefault({});

const RunnerSchema = z
  .strictObject({
    image: pinnedImage('Public Node.js image the in-cluster study runner runs on').default(
      'node:22.20.0-bookworm-slim',
    ),
    autoStart: z
      .boolean()
      .default(true)
      .describe('Start the study as soon as the testbed is ready (else start it with lab run)'),
    terminateWhenDone: z
      .boolean()
      .default(false)
      .describe('Upload the results and terminate the instance when the study has finished'),
    stageNextRun: z
      .boolean()
      .default(true)
      .describe(
        "While a run's load runs, start the next run's clients behind a closed gate Service, so their start (imports, tokenizer, dataset) and a restart of the next front end cost no instance time; the starting client shares the host's CPUs with the running one. false: each run starts its clients when it starts",
      ),
    readyTimeoutMinutes: z
      .number()
      .positive()
      .max(120)
      .default(10)
      .describe(
        'Before each run, how long the replicas may take to serve again and the front end to be available (a restart, an outage); replicas still down then stop the study',
      ),
    retry: z
      .strictObject({
        attempts: z
          .number()
          .int()
          .min(1)
          .max(20)
          .default(5)
          .describe('Tries of a Kubernetes or replica call on 429, 5xx or a connection error (1: no retry)'),
        initialDelaySeconds: z
          .number()
          .positive()
          .max(60)
          .default(1)
          .describe('Delay before the first retry; each later one doubles'),
        maxDelaySeconds: z
          .number()
          .positive()
          .max(600)
          .default(30)
          .describe('Longest delay between two tries'),
        outageMinutes: z
          .number()
          .int()
          .min(1)
          .max(240)
          .default(15)
          .describe(
            'How long a Kubernetes API call is tried again after its first failure (an API server restart): a study rides out an outage this long, then stops as interrupted and lab run resumes it',
          ),
      })
      .prefault({}),
    results: ResultsVolumeSchema,
  })
  .prefault({});

/** What the runner runs when it starts without a request (docs/first-run.md). */
export const STUDY_PROFILES = ['full', 'smoke'] as const;
export type StudyProfile = (typeof STUDY_PROFILES)[number];

const StudySchema = z
  .strictObject({
    profile: z
      .enum(STUDY_PROFILES)
      .default('full')
      .describe(
        'What the runner runs when it starts: full (the study, after a smoke check of every arm) or smoke (only the smoke study: every arm, or in the network lab every experiment of the cell, with a tiny load and a checklist of every proof, in minutes; then lab run starts the full study)',
      ),
    boundSweepPrefixes: z
      .array(count('prefixes'))
      .default([128, 64, 16, 8])
      .describe('Prefix counts of the single-replica upper-bound sweep'),
    sharegptControl: z.boolean().default(true).describe('Run every arm with the ShareGPT control too'),
    completionsArms: z
      .boolean()
      .default(true)
      .describe(
        'Also run every router, EPP, AI Gateway and llm-d arm over /v1/completions, where each can read the prompt',
      ),
    concurrencySweep: z
      .strictObject({
        levels: z.array(count('concurrency')).default([4, 8]).describe('Concurrency levels'),
        arms: z.array(z.string()).default(['kube-proxy', 'router-cache-aware']).describe('Arms swept'),
      })
      .prefault({}),
    optionalArms: z
      .array(z.enum(OPTIONAL_ARMS))
      .default([])
      .describe(`Optional arms to run: ${OPTIONAL_ARMS.join(', ')}`),
    repeats: count(
      'Runs of each arm, interleaved across arms (A B C A B C), each with its own id and reset; 2 or more give a measured noise band',
    )
      .max(20)
      .default(1),
    predictionSeeds: count(
      'Client seeds each arm is simulated with by lab plan and the report: the simulated run-to-run spread',
    )
      .min(2)
      .max(20)
      .default(5),
    parallelism: count(
      'Replica pairs that run at once: 2 adds a second set of replicas and core front ends (names suffixed -b) so two runs execute together; needs 2 x vllm.replicas GPUs, and concurrent runs share the CPUs and PCIe',
    )
      .max(2)
      .default(1),
  })
  .prefault({});

/** The labs one configuration can describe (docs/facts.md §N1: one file chooses the lab). */
export const LABS = ['llm-gateway', 'network'] as const;
export type LabKind = (typeof LABS)[number];

/**
 * Every setting with its own rules and default. The rules that relate settings to each other, some
 * of which need the study model, are added above both (checked.ts: LabConfigSchema).
 */
export const LabConfigFieldsSchema = z.strictObject({
  lab: z
    .enum(LABS)
    .default('llm-gateway')
    .describe(
      'Which lab this configuration deploys: the LLM-gateway lab, or the network lab (section network)',
    ),
  stackName: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9-]{0,127}$/, 'must be a CloudFormation stack name')
    .default('LlmGatewayLab')
    .describe('CloudFormation stack name'),
  namespace: dnsLabel('Kubernetes namespace of the lab').default('vllm'),
  aws: AwsSchema,
  instance: InstanceSchema,
  k3s: K3sSchema,
  devicePlugin: DevicePluginSchema,
  model: ModelSchema,
  vllm: VllmSchema,
  router: RouterSchema,
  gaie: GaieSchema,
  envoy: EnvoySchema,
  aiGateway: AiGatewaySchema,
  llmd: LlmdSchema,
  benchmark: BenchmarkSchema,
  workload: WorkloadSchema,
  study: StudySchema,
  runner: RunnerSchema,
  placement: PlacementSchema,
  network: NetworkSchema,
  cluster: ClusterSchema,
});

export type LabConfig = z.output<typeof LabConfigFieldsSchema>;
export type LabConfigInput = z.input<typeof LabConfigFieldsSchema>;
