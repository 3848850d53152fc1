import { z } from 'zod';
import { crossCheck } from './rules.ts';

/**
 * The lab configuration: one typed object that feeds the CDK stack, the cdk8s charts, the study
 * plan, the runner and the planner. Every default reproduces the published lab (lab-spec 2-4).
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

/** Optional arms of the study (lab-spec 4.2 step 5); each is off by default. */
export const OPTIONAL_ARMS = ['epp-prefix3', 'ai-gateway', 'llmd-precise'] as const;

const MAX_LIFETIME_HOURS = 72;

const count = (description: string) => z.number().int().positive().describe(description);

const blockSize = (description: string) =>
  z
    .number()
    .refine((size) => (BLOCK_SIZES as readonly number[]).includes(size), {
      message: `must be one of ${BLOCK_SIZES.join(', ')}`,
    })
    .meta({ description, allowed: BLOCK_SIZES.join(', ') });

/** A DNS-1123 label: what Kubernetes accepts as a namespace or object name. */
const dnsLabel = (description: string) =>
  z
    .string()
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1123 label: lowercase letters, digits and "-"')
    .meta({ description, allowed: 'DNS-1123 label (a-z, 0-9, "-"; at most 63)' });

/**
 * A container image pinned by tag (or digest). Floating tags would make two runs of the "same"
 * study use different software.
 */
const pinnedImage = (description: string) =>
  z
    .string()
    .superRefine((image, ctx) => {
      const problem = imageTagProblem(image);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({ description, allowed: 'image pinned by version tag or digest; no latest' });

/** Why an image reference is not pinned, or undefined when it is. */
export function imageTagProblem(image: string): string | undefined {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return undefined;
  const lastSegment = image.slice(image.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  if (colon < 0 || colon === lastSegment.length - 1) {
    return 'has no tag; pin a version tag (e.g. "repo/image:v1.2.3") or a digest';
  }
  const tag = lastSegment.slice(colon + 1);
  if (tag === 'latest' || tag.endsWith('-latest')) {
    return `uses the floating tag "${tag}"; pin a version tag or a digest`;
  }
  return undefined;
}

const InstanceSchema = z
  .strictObject({
    type: z.string().min(1).default('g6.12xlarge').describe('EC2 instance type of the GPU host'),
    gpus: count('GPUs of the instance type (g6.12xlarge: 4x NVIDIA L4 24 GB)').default(4),
    vcpus: count('vCPUs of the instance type; the On-Demand G and VT quota must allow this many').default(48),
    memoryGiB: count('Memory (GiB) of the instance type; the pods of the lab must fit in it').default(192),
    pricePerHourUsd: z
      .number()
      .positive()
      .default(4.6)
      .describe('On-demand price per hour, for cost estimates (us-west-2)'),
    amiParameter: z
      .string()
      .startsWith('/')
      .default('/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id')
      .describe(
        'Public SSM parameter holding the Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)',
      ),
    rootVolumeGiB: z
      .number()
      .int()
      .min(100)
      .max(16384)
      .default(200)
      .describe('Encrypted gp3 root volume: images, model cache and results'),
    maxLifetimeHours: z
      .number()
      .positive(`must be more than 0 and at most ${MAX_LIFETIME_HOURS} hours`)
      .max(MAX_LIFETIME_HOURS, `must be more than 0 and at most ${MAX_LIFETIME_HOURS} hours`)
      .default(8)
      .describe('The instance shuts itself down (and terminates) after this many hours'),
    readyTimeoutMinutes: z
      .number()
      .int()
      .min(10)
      .max(720)
      .default(45)
      .describe('How long cdk deploy waits for the bootstrap to report the testbed usable'),
    fallbackTypes: z
      .array(z.string().min(1))
      .default([])
      .describe(
        'Instance types tried in order when the primary type has no capacity in any AZ (off by default)',
      ),
    preferredAzs: z
      .array(
        z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/, 'must be an Availability Zone name like us-west-2a'),
      )
      .default([])
      .describe('Availability Zones tried first, in order; the others that offer the type follow'),
  })
  .prefault({});

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

/** The router's own cache_aware defaults, written out so the study records what ran. */
const CACHE_AWARE_DEFAULTS = {
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  evictionIntervalSecs: 120,
  maxTreeSize: 67_108_864,
} as const;

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
    eppImage: pinnedImage('llm-d inference scheduler image (GAIE v1.0.1 compatible)').default(
      'ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2',
    ),
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
      .default([42, 4242])
      .describe('Seed of each replica in the ideal-partition run; one per replica'),
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
      })
      .prefault({}),
  })
  .prefault({});

const StudySchema = z
  .strictObject({
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
  })
  .prefault({});

export const LabConfigSchema = z
  .strictObject({
    stackName: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9-]{0,127}$/, 'must be a CloudFormation stack name')
      .default('LlmGatewayLab')
      .describe('CloudFormation stack name'),
    namespace: dnsLabel('Kubernetes namespace of the lab').default('vllm'),
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
  })
  // Cross-field rules run even when a field failed its own schema, so every problem shows at once.
  .superRefine(crossCheck, { when: () => true });

export type LabConfig = z.output<typeof LabConfigSchema>;
export type LabConfigInput = z.input<typeof LabConfigSchema>;
