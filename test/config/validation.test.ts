import { describe, expect, it } from 'vitest';
import { imageTagProblem } from '../../lib/config/fields.ts';
import { parseLabConfig } from '../../lib/config/load.ts';
import { configWarnings } from '../../lib/config/warnings.ts';
import { problems } from './problems.ts';

/** The ready timeout a cluster with agents needs (the server waits for them too). */
const READY = { readyTimeoutMinutes: 60 };

describe('LabConfig validation', () => {
  it('accepts the defaults and a partial override', () => {
    expect(problems({})).toEqual([]);
    expect(
      parseLabConfig({ vllm: { replicas: 3 }, workload: { partitionSeeds: [1, 2, 3] } }).vllm,
    ).toMatchObject({
      replicas: 3,
      blockSize: 16,
    });
  });

  it('rejects more replicas than the cluster has GPUs, naming where they are', () => {
    expect(problems({ vllm: { replicas: 5 } })).toContain(
      'vllm.replicas = 5: each replica needs its own GPU and the cluster has 4 GPU(s) a replica fits beside (server g6.12xlarge: 4); allowed: 1 to 4, or add GPU agents (cluster.agents)',
    );
    const agents = [
      { name: 'gpu', role: 'gpu', count: 2, instanceType: 'g6.4xlarge' },
      { name: 'cpu', role: 'cpu', instanceType: 'c7i.4xlarge' },
    ];
    // The GPU agents add theirs; a CPU agent adds none. (4 replicas and the 6 default 12 GiB
    // clients would overfill the server's 192 GiB: the per-node budget, test/config/budget-fit.test.ts.)
    const clients = { memoryLimitGi: 8 };
    expect(
      problems({ vllm: { replicas: 6 }, benchmark: clients, instance: READY, cluster: { agents } }),
    ).toEqual([]);
    expect(problems({ vllm: { replicas: 7 }, instance: READY, cluster: { agents } })).toEqual([
      'vllm.replicas = 7: each replica needs its own GPU and the cluster has 6 GPU(s) a replica fits beside (server g6.12xlarge: 4, gpu-1..gpu-2 g6.4xlarge: 1 each); allowed: 1 to 6, or add GPU agents (cluster.agents)',
    ]);
  });

  it('does not count the GPU of an agent too small for one replica, and warns about it', () => {
    const agents = [{ name: 'small', role: 'gpu', count: 2, instanceType: 'g6.xlarge' }];
    expect(problems({ vllm: { replicas: 5 }, instance: READY, cluster: { agents } })).toContain(
      'vllm.replicas = 5: each replica needs its own GPU and the cluster has 4 GPU(s) a replica fits beside (server g6.12xlarge: 4); allowed: 1 to 4, or add GPU agents (cluster.agents)',
    );
    expect(configWarnings(parseLabConfig({ instance: READY, cluster: { agents } }))).toContain(
      'placement: cluster.agents small (g6.xlarge: 4 vCPUs, 16 GiB) runs no replica: a vLLM replica requests 4 CPUs and 32Gi (lib/study/resources.ts), more than the host has, so its GPU is paid for but idle; use a larger GPU type (e.g. g6.4xlarge)',
    );
  });

  it('warns when the front ends are sent to CPU nodes the cluster does not have', () => {
    expect(configWarnings(parseLabConfig({ placement: { frontEnds: 'cpu' } }))).toEqual([
      "placement.frontEnds is cpu but cluster.agents has no cpu agent: on the lab's own cluster the routers, EPPs and Envoys would stay Pending (fine on a cluster of your own whose CPU nodes carry placement.cpuNodes.nodeSelector). Add a cpu agent or use auto",
    ]);
  });

  it('keeps the benchmark clients on GPU nodes and the node pools apart', () => {
    expect(problems({ placement: { clients: 'cpu' } })).toEqual([
      'placement.clients = "cpu": cannot be cpu: `vllm bench serve` builds an engine configuration and exits with "RuntimeError: Failed to infer device type" where no GPU is visible (vLLM issue 23967, open: https://github.com/vllm-project/vllm/issues/23967); no CPU-capable client is verified, so the clients stay on GPU nodes, where they see the GPUs without taking one. Allowed: gpu',
    ]);
    expect(
      problems({ placement: { cpuNodes: { nodeSelector: { 'llm-gateway-lab/node-role': 'gpu' } } } }),
    ).toEqual([
      'placement.cpuNodes.nodeSelector: selects the same nodes as placement.gpuNodes.nodeSelector ({"llm-gateway-lab/node-role":"gpu"}); give the CPU nodes their own labels (default: llm-gateway-lab/node-role: cpu)',
    ]);
  });

  it('rejects node selectors, tolerations and runtime classes Kubernetes would refuse', () => {
    expect(problems({ placement: { gpuNodes: { nodeSelector: {} } } })).toEqual([
      'placement.gpuNodes.nodeSelector: needs at least one label, or gpu pods could land on any node',
    ]);
    expect(problems({ placement: { gpuNodes: { nodeSelector: { 'bad key!': 'x' } } } })).toEqual([
      'placement.gpuNodes.nodeSelector.bad key! = "bad key!": must be a Kubernetes label key like "example.com/name" or "name"',
    ]);
    expect(
      problems({ placement: { cpuNodes: { tolerations: [{ key: 'dedicated', effect: 'Never' }] } } }),
    ).toEqual([
      'placement.cpuNodes.tolerations[0].effect = "Never": allowed: NoSchedule, PreferNoSchedule, NoExecute',
    ]);
    expect(problems({ placement: { gpuNodes: { runtimeClassName: 'NVIDIA' } } })).toEqual([
      'placement.gpuNodes.runtimeClassName = "NVIDIA": must be a RuntimeClass name (DNS-1123 subdomain), or null for none',
    ]);
    expect(problems({ placement: { gpuNodes: { runtimeClassName: null } } })).toEqual([]);
  });

  it("counts the GPUs of llm-d's second replica set", () => {
    expect(problems({ study: { optionalArms: ['llmd-precise'] } })).toEqual([]);
    expect(
      problems({
        vllm: { replicas: 3 },
        workload: { partitionSeeds: [1, 2, 3] },
        study: { optionalArms: ['llmd-precise'] },
      }),
    ).toEqual([
      'study.optionalArms = ["llmd-precise"]: llmd-precise runs its own 3 replica(s) beside the standard 3, needing 6 GPUs; the cluster has 4 GPU(s) a replica fits beside (server g6.12xlarge: 4). Lower vllm.replicas to 2 or add GPU agents (cluster.agents)',
    ]);
  });

  it('rejects a runner retry whose longest delay is below its first', () => {
    expect(problems({ runner: { retry: { initialDelaySeconds: 10, maxDelaySeconds: 5 } } })).toEqual([
      'runner.retry.maxDelaySeconds = 5: is 5 s, below runner.retry.initialDelaySeconds (10 s); allowed: at least the initial delay',
    ]);
    expect(problems({ runner: { retry: { attempts: 0 } } })).toHaveLength(1);
    expect(problems({ runner: { readyTimeoutMinutes: 30, retry: { attempts: 1 } } })).toEqual([]);
  });

  it('takes the API outage a study rides out in whole minutes, at least 1 and at most 240', () => {
    expect(parseLabConfig({}).runner.retry.outageMinutes).toBe(15);
    expect(problems({ runner: { retry: { outageMinutes: 30 } } })).toEqual([]);
    expect(problems({ runner: { retry: { outageMinutes: 0 } } })).toEqual([
      'runner.retry.outageMinutes = 0: must be at least 1',
    ]);
    expect(problems({ runner: { retry: { outageMinutes: 1.5 } } })).toEqual([
      'runner.retry.outageMinutes = 1.5: must be a whole number',
    ]);
  });

  it('stages the next run by default, takes false, and rejects anything but a boolean', () => {
    expect(parseLabConfig({}).runner.stageNextRun).toBe(true);
    expect(parseLabConfig({ runner: { stageNextRun: false } }).runner.stageNextRun).toBe(false);
    expect(problems({ runner: { stageNextRun: 'no' } })).toEqual([
      'runner.stageNextRun = "no": must be a boolean',
    ]);
    expect(problems({ runner: { stageNextRun: 0 } })).toEqual(['runner.stageNextRun = 0: must be a boolean']);
  });

  it('rejects a block size vLLM does not accept', () => {
    expect(problems({ vllm: { blockSize: 24 } })).toEqual([
      'vllm.blockSize = 24: must be one of 1, 8, 16, 32, 64, 128',
    ]);
    expect(problems({ llmd: { blockSize: 48 } })).toEqual([
      'llmd.blockSize = 48: must be one of 1, 8, 16, 32, 64, 128',
    ]);
  });

  it('rejects a workload longer than the model length', () => {
    expect(problems({ workload: { prefixLen: 8000 } })).toContain(
      'workload.prefixLen = 8000: prefixLen + chatTemplateTokens + suffixLen + outputLen = 8000 + 10 + 128 + 128 = 8266 tokens, above vllm.maxModelLen 8192; shorten the workload or raise vllm.maxModelLen',
    );
    expect(problems({ workload: { prefixLen: 4096 }, vllm: { maxModelLen: 4096 } })).toHaveLength(1);
  });

  it.each([
    [
      'vllm',
      'image',
      'vllm/vllm-openai',
      'has no tag; pin a version tag (e.g. "repo/image:v1.2.3") or a digest',
    ],
    [
      'vllm',
      'image',
      'vllm/vllm-openai:latest',
      'uses the floating tag "latest"; pin a version tag or a digest',
    ],
    [
      'envoy',
      'image',
      'envoyproxy/envoy:dev-latest',
      'uses the floating tag "dev-latest"; pin a version tag or a digest',
    ],
    [
      'gaie',
      'eppImage',
      'registry.k8s.io:5000/epp',
      'has no tag; pin a version tag (e.g. "repo/image:v1.2.3") or a digest',
    ],
    [
      'benchmark',
      'image',
      'vllm/vllm-openai:',
      'has no tag; pin a version tag (e.g. "repo/image:v1.2.3") or a digest',
    ],
  ])('rejects the unpinned image %s.%s = %s', (section, key, image, message) => {
    expect(problems({ [section]: { [key]: image } })).toEqual([`${section}.${key} = "${image}": ${message}`]);
  });

  it('accepts images pinned by tag on a registry with a port, or by digest', () => {
    expect(imageTagProblem('registry.local:5000/team/vllm:v0.11.0')).toBeUndefined();
    expect(imageTagProblem(`vllm/vllm-openai@sha256:${'a'.repeat(64)}`)).toBeUndefined();
  });

  it('rejects an unknown router policy, naming the allowed ones', () => {
    const sweep = { concurrencySweep: { arms: ['kube-proxy'] } };
    expect(problems({ router: { variants: [{ name: 'smart', policy: 'smart' }] }, study: sweep })).toEqual([
      'router.variants[0].policy = "smart": allowed: round_robin, random, cache_aware, power_of_two, consistent_hash',
    ]);
  });

  it('rejects cache_aware tuning on another policy and duplicate variant names', () => {
    expect(
      problems({
        router: {
          variants: [
            { name: 'rr', policy: 'round_robin', balanceAbsThreshold: 4096 },
            { name: 'rr', policy: 'random' },
          ],
        },
        study: { concurrencySweep: { arms: ['kube-proxy'] } },
      }),
    ).toEqual([
      'router.variants[0]: balanceAbsThreshold only apply to policy cache_aware, not round_robin',
      'router.variants[1].name = "rr": "rr" is used twice',
    ]);
  });

  it.each([
    ['vllm', 'replicas', 0, 'must be greater than 0'],
    ['workload', 'prompts', -8, 'must be greater than 0'],
    ['workload', 'concurrency', 0, 'must be greater than 0'],
    ['envoy', 'concurrency', 0, 'must be greater than 0'],
    ['workload', 'prefixes', 2.5, 'must be a whole number'],
  ])('rejects a non-positive or fractional count %s.%s = %s', (section, key, value, message) => {
    expect(problems({ [section]: { [key]: value } })).toContain(`${section}.${key} = ${value}: ${message}`);
  });

  it.each([0, -1, 73, 100])('rejects a lifetime of %s hours', (hours) => {
    expect(problems({ instance: { maxLifetimeHours: hours } })).toEqual([
      `instance.maxLifetimeHours = ${hours}: must be more than 0 and at most 72 hours`,
    ]);
  });

  it('accepts lifetimes up to 72 hours', () => {
    expect(problems({ instance: { maxLifetimeHours: 72 } })).toEqual([]);
    expect(problems({ instance: { maxLifetimeHours: 0.5 } })).toEqual([]);
  });

  it('rejects a study whose pods cannot all be scheduled on the instance', () => {
    const all = { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] };
    expect(problems({ study: all })).toEqual([]);
    expect(problems({ instance: { vcpus: 32 }, study: all })).toEqual([
      'instance.vcpus = 32: the pods that can run at once request 34.15 CPUs but g6.12xlarge has 32 vCPUs (34.15 CPUs and 161.69 GiB in all, largest: 4 x vLLM replica (16 CPU, 128 GiB), 4 x Envoy (8 CPU, 2 GiB), 2 x benchmark client (largest run) (4 CPU, 24 GiB)). Enable fewer optional arms (study.optionalArms), lower vllm.replicas or benchmark.memoryLimitGi, or use a larger instance',
    ]);
    expect(problems({ benchmark: { memoryLimitGi: 40 }, study: all })[0]).toMatch(
      /^instance\.memoryGiB = 192: the pods that can run at once request 217\.69 GiB but g6\.12xlarge has 192 GiB \(34\.15 CPUs and 217\.69 GiB in all, largest: 4 x vLLM replica \(16 CPU, 128 GiB\), 2 x benchmark client \(largest run\) \(4 CPU, 80 GiB\)/,
    );
  });

  it('rejects batch limits vLLM refuses to start with', () => {
    expect(problems({ vllm: { maxNumBatchedTokens: 128, maxNumSeqs: 256 } })).toEqual([
      'vllm.maxNumBatchedTokens = 128: must be at least vllm.maxNumSeqs (256): vLLM refuses to start with fewer batched tokens than sequences per step',
    ]);
    expect(problems({ vllm: { maxNumBatchedTokens: 256, maxNumSeqs: 256 } })).toEqual([]);
  });

  it('rejects unknown keys and suggests the setting that was meant', () => {
    expect(problems({ vllm: { blcokSize: 16 } })).toEqual([
      'vllm.blcokSize: unknown setting (did you mean "blockSize"?); allowed here: image, replicas, maxModelLen, gpuMemoryUtilization, blockSize, maxNumBatchedTokens, maxNumSeqs, kvCacheTokensPerReplica',
    ]);
    expect(problems({ workloads: {} })[0]).toMatch(
      /^workloads: unknown setting \(did you mean "workload"\?\)/,
    );
    expect(problems({ router: { variants: [{ name: 'x', policy: 'random', weight: 1 }] } })[0]).toMatch(
      /^router\.variants\[0\]\.weight: unknown setting; allowed here: name, policy, cacheThreshold/,
    );
  });

  it('rejects a wrong type with the setting and the value', () => {
    expect(problems({ vllm: { replicas: 'two' } })).toEqual(['vllm.replicas = "two": must be a number']);
    expect(problems({ study: { sharegptControl: 'yes' } })).toEqual([
      'study.sharegptControl = "yes": must be a boolean',
    ]);
    expect(problems({ study: { boundSweepPrefixes: 8 } })).toEqual([
      'study.boundSweepPrefixes = 8: must be an array',
    ]);
    expect(problems({ vllm: 2 })).toEqual(['vllm = 2: must be an object']);
  });

  it('rejects a prompt count that does not repeat every prefix equally', () => {
    expect(problems({ workload: { prompts: 1000 } })).toEqual([
      'workload.prompts = 1000: must be a multiple of workload.prefixes (128) so that every prefix repeats equally; nearest: 896 or 1024',
      'study.boundSweepPrefixes = [128,64,16,8]: every swept prefix count must divide workload.prompts (1000); 128, 64, 16 do(es) not',
    ]);
  });

  it('needs one distinct partition seed and one client slot per replica', () => {
    // Without a list every replica gets a derived seed; a list must cover every replica.
    expect(problems({ vllm: { replicas: 3 } })).toEqual([]);
    expect(problems({ vllm: { replicas: 3 }, workload: { partitionSeeds: [42, 4242] } })).toEqual([
      'workload.partitionSeeds = [42,4242]: needs one seed per replica: 3 replicas, 2 seeds',
    ]);
    expect(problems({ workload: { partitionSeeds: [7, 7] } })).toEqual([
      'workload.partitionSeeds = [7,7]: seeds must differ, or two replicas would get the same prefixes',
    ]);
    expect(problems({ workload: { concurrency: 1 } })).toEqual([
      'workload.concurrency = 1: the ideal-partition run gives each of the 2 replicas its own client, so concurrency must be at least 2',
    ]);
  });

  it('rejects sweep arms that are unknown or not enabled', () => {
    expect(problems({ study: { concurrencySweep: { arms: ['router-fast'] } } })[0]).toBe(
      'study.concurrencySweep.arms[0] = "router-fast": unknown arm; allowed: kube-proxy, router-round-robin, router-cache-aware, router-cache-aware-tuned, router-round-robin-completions, router-cache-aware-completions, router-cache-aware-tuned-completions, epp, epp-completions',
    );
    expect(problems({ study: { concurrencySweep: { arms: ['llmd-precise'] } } })).toEqual([
      'study.concurrencySweep.arms[0] = "llmd-precise": "llmd-precise" is an arm of the optional front end "llmd-precise", which is not in study.optionalArms; enable it there first',
    ]);
    expect(problems({ study: { concurrencySweep: { arms: ['ai-gateway-completions'] } } })).toEqual([
      'study.concurrencySweep.arms[0] = "ai-gateway-completions": "ai-gateway-completions" is an arm of the optional front end "ai-gateway", which is not in study.optionalArms; enable it there first',
    ]);
    expect(
      problems({ study: { optionalArms: ['llmd-precise'], concurrencySweep: { arms: ['llmd-precise'] } } }),
    ).toEqual([]);
  });

  it('rejects an unknown optional arm and names the allowed ones', () => {
    expect(problems({ study: { optionalArms: ['ai-gatway'] } })).toEqual([
      'study.optionalArms[0] = "ai-gatway": allowed: epp-prefix3, ai-gateway, llmd-precise',
    ]);
  });

  it('rejects names Kubernetes would refuse', () => {
    expect(problems({ namespace: 'LLM_Lab' })).toEqual([
      'namespace = "LLM_Lab": must be a DNS-1123 label: lowercase letters, digits and "-"',
    ]);
    expect(problems({ model: { servedName: 'Qwen/Qwen3' } })).toEqual([
      'model.servedName = "Qwen/Qwen3": must be a DNS-1123 label: lowercase letters, digits and "-"',
    ]);
  });

  it('reports every problem at once, schema and cross-field together', () => {
    const found = problems({
      vllm: { replicas: 6, blockSize: 12, blcokSize: 1 },
      envoy: { image: 'envoyproxy/envoy:latest' },
      instance: { maxLifetimeHours: 0 },
      workload: { prefixLen: 9000 },
    });
    expect(found.map((line) => line.split(':')[0])).toEqual([
      'instance.maxLifetimeHours = 0',
      'vllm.blockSize = 12',
      'vllm.blcokSize',
      'envoy.image = "envoyproxy/envoy',
      'vllm.replicas = 6',
      'workload.prefixLen = 9000',
    ]);
  });

  it('formats the error for people: source, count, one line per problem', () => {
    expect(() => parseLabConfig({ vllm: { replicas: 0 } }, 'lab.yaml')).toThrow(
      'Invalid lab configuration (lab.yaml): 1 problem(s)\n  - vllm.replicas = 0: must be greater than 0',
    );
  });
});
