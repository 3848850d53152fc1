import { describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { benchmarkJob } from '../../charts/benchmark-job.ts';
import { checkManifests, inspectManifests, type KubeObject, type Violation } from '../../lib/check/index.ts';
import { studyPlan } from '../../lib/study/plan.ts';
import { synthLab } from './synth.ts';

/**
 * `lab check` rules of issue 10 items 7 and 8, the llm-d invariants and the resource budget, each
 * driven by breaking (or keeping) a real synthesized manifest on purpose.
 */

const ALL_ARMS = { study: { optionalArms: ['epp-prefix3', 'ai-gateway', 'llmd-precise'] } };
// The lead resizes the Envoy requests in parallel: the rules below run with room to spare, and the
// budget tests set the node size themselves.
const ROOMY = { nodeCpu: 1000, nodeMemoryGiB: 10000 };

// biome-ignore lint/suspicious/noExplicitAny: tests edit arbitrary manifest fields
type Any = any;

/** The synthesized objects per configuration, made once for the file (two configurations, 29 tests). */
const synthesized = new Map<string, Any[]>();

/** A fresh copy of the lab's objects and benchmark Jobs for `overrides`, for a test to break. */
function testbed(overrides: unknown = ALL_ARMS): Any[] {
  const key = JSON.stringify(overrides);
  let objects = synthesized.get(key);
  if (!objects) {
    const lab = synthLab(overrides);
    const jobs = studyPlan(lab.config).runs.flatMap((run) =>
      run.benchmarks.map((spec) => benchmarkJob(lab.config, spec)),
    );
    objects = [...lab.objects, ...jobs];
    synthesized.set(key, objects);
  }
  return structuredClone(objects);
}

const find = (objects: Any[], kind: string, name: string): Any => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
const check = (objects: Any[], options = ROOMY): Violation[] =>
  checkManifests(objects as KubeObject[], options);
const messages = (violations: Violation[]) => violations.map((v) => `${v.object} ${v.field}: ${v.message}`);

/** Rewrites a YAML document in a ConfigMap key. */
function editYaml(objects: Any[], configMap: string, key: string, edit: (doc: Any) => void) {
  const cm = find(objects, 'ConfigMap', configMap);
  const doc = parse(cm.data[key]);
  edit(doc);
  cm.data[key] = stringify(doc);
}

const eppArgs = (objects: Any[], name: string): string[] =>
  find(objects, 'Deployment', name).spec.template.spec.containers[0].args;

describe('the synthesized testbeds pass with room on the node', () => {
  test('default and all arms: no violation', () => {
    expect(check(testbed({}))).toEqual([]);
    expect(check(testbed())).toEqual([]);
  });
});

describe('item 7: EPP flags as Go parses them', () => {
  test('`--secure-serving false` as two words is caught: Go ignores every later flag', () => {
    const objects = testbed();
    const args = eppArgs(objects, 'qwen3-epp');
    const at = args.indexOf('--secure-serving=false');
    args.splice(at, 1);
    args.unshift('--secure-serving', 'false');
    const found = check(objects).filter((v) => v.object === 'Deployment vllm/qwen3-epp');
    expect(messages(found).join('\n')).toMatch(
      /"--secure-serving false" is read by Go as --secure-serving \(true\) followed by the positional word "false".*every later flag is ignored \(--pool-name .*--config-file/,
    );
    // The consequences show too: no config file, and TLS against the plaintext Envoy.
    expect(messages(found).join('\n')).toMatch(/neither --config-file nor --config-text/);
  });

  test('single-dash Go flags are accepted', () => {
    const objects = testbed();
    const args = eppArgs(objects, 'qwen3-epp');
    for (let i = 0; i < args.length; i++) {
      if (args[i].startsWith('--')) args[i] = args[i].slice(1);
    }
    expect(args[0]).toBe('-pool-name');
    expect(check(objects)).toEqual([]);
  });

  test('a custom --grpc-health-port is accepted when the probes use it, and caught when they do not', () => {
    const objects = testbed();
    const deployment = find(objects, 'Deployment', 'qwen3-epp');
    const c = deployment.spec.template.spec.containers[0];
    c.args.push('--grpc-health-port=9500');
    expect(messages(check(objects)).join('\n')).toMatch(
      /readinessProbe.grpc.port: is 9003: the EPP serves gRPC health on 9500 \(--grpc-health-port 9500\)/,
    );
    c.readinessProbe.grpc.port = 9500;
    c.livenessProbe.grpc.port = 9500;
    expect(check(objects)).toEqual([]);
  });
});

describe('item 7: ext_proc as Envoy v1.35 loads it', () => {
  const FILTER = (doc: Any) =>
    doc.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.find(
      (f: Any) => f.name === 'envoy.filters.http.ext_proc',
    ).typed_config;

  test('a trailer mode other than SEND with FULL_DUPLEX_STREAMED is caught', () => {
    const objects = testbed();
    editYaml(objects, 'envoy-epp-config', 'envoy.yaml', (doc) => {
      FILTER(doc).processing_mode.response_trailer_mode = 'SKIP';
    });
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(
        /processing_mode.response_trailer_mode: is SKIP while response_body_mode is FULL_DUPLEX_STREAMED: Envoy rejects/,
      ),
    ]);
  });

  test('failure_mode_allow: true with FULL_DUPLEX_STREAMED is caught', () => {
    const objects = testbed();
    editYaml(objects, 'envoy-epp-config', 'envoy.yaml', (doc) => {
      FILTER(doc).failure_mode_allow = true;
    });
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(/failure_mode_allow: is true with FULL_DUPLEX_STREAMED: Envoy rejects/),
    ]);
  });

  test('response_body_mode NONE (trailer then free) is accepted', () => {
    const objects = testbed();
    editYaml(objects, 'envoy-epp-config', 'envoy.yaml', (doc) => {
      FILTER(doc).processing_mode.response_body_mode = 'NONE';
      FILTER(doc).processing_mode.response_trailer_mode = 'SKIP';
    });
    expect(check(objects)).toEqual([]);
  });

  test('message_timeout other than 1000s is accepted when it outlasts the route, caught when shorter', () => {
    const objects = testbed();
    editYaml(objects, 'envoy-epp-config', 'envoy.yaml', (doc) => {
      FILTER(doc).message_timeout = '300s';
    });
    expect(check(objects)).toEqual([]);
    editYaml(objects, 'envoy-epp-config', 'envoy.yaml', (doc) => {
      FILTER(doc).message_timeout = '30s';
    });
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(/message_timeout: is 30s: .*route timeout 300s.*set at least 300s/),
    ]);
  });
});

describe('item 7: scheduler configs the pinned images load', () => {
  test('a plugin type the GAIE v1.0.1 image does not register is caught; llm-d v0.3.2 registers it', () => {
    const objects = testbed();
    editYaml(objects, 'qwen3-epp-config', 'default-plugins.yaml', (doc) => {
      doc.plugins[2] = { type: 'precise-prefix-cache-scorer', name: 'prefix-cache-scorer' };
    });
    expect(messages(check(objects))).toContainEqual(
      expect.stringMatching(
        /ConfigMap vllm\/qwen3-epp-config data\["default-plugins.yaml"\].plugins\[2\].type: "precise-prefix-cache-scorer" is not a plugin type registry.k8s.io\/gateway-api-inference-extension\/epp:v1.0.1 registers.*not found in registry/,
      ),
    );
    // The llm-d EPP's config uses precise-prefix-cache-scorer and passes (the all-arms test above).
  });

  test('an EndpointPickerConfig without schedulingProfiles is accepted', () => {
    const objects = testbed();
    editYaml(objects, 'qwen3-epp-config', 'default-plugins.yaml', (doc) => {
      delete doc.schedulingProfiles;
    });
    expect(check(objects)).toEqual([]);
  });
});

describe('the llm-d invariants', () => {
  const KV = (objects: Any[]) => find(objects, 'StatefulSet', 'qwen3-kv').spec.template.spec.containers[0];
  const kvOnly = (objects: Any[]) => messages(check(objects)).join('\n');

  test('the replicas block size differing from the indexer blockSize is caught', () => {
    const objects = testbed();
    const c = KV(objects);
    c.args = c.args.map((a: string) => (a === '--block-size=64' ? '--block-size=16' : a));
    expect(kvOnly(objects)).toMatch(
      /StatefulSet vllm\/qwen3-kv .*--block-size is 16 but qwen3-llmd-precise's indexer blockSize is 64/,
    );
  });

  test('PYTHONHASHSEED differing from the indexer hashSeed is caught', () => {
    const objects = testbed();
    KV(objects).env.find((e: Any) => e.name === 'PYTHONHASHSEED').value = '7';
    expect(kvOnly(objects)).toMatch(
      /PYTHONHASHSEED is "7" but qwen3-llmd-precise's indexer hashSeed is "42"/,
    );
  });

  test('a topic naming the Hugging Face id instead of the served name is caught', () => {
    const objects = testbed();
    const c = KV(objects);
    c.args = c.args.map((a: string) => a.replace('@qwen3"', '@Qwen/Qwen3-0.6B-FP8"'));
    expect(kvOnly(objects)).toMatch(
      /the KV-event topic's model part is "Qwen\/Qwen3-0.6B-FP8", but requests carry the served name \(qwen3\)/,
    );
  });

  test('a tokenizer folder that is unset, or not writable, is caught', () => {
    const unset = testbed();
    editYaml(unset, 'qwen3-llmd-precise-config', 'default-plugins.yaml', (doc) => {
      delete doc.plugins[1].parameters.indexerConfig.tokenizersPoolConfig;
    });
    expect(messages(check(unset))).toEqual([
      expect.stringMatching(/tokenizersPoolConfig.tokenizersCacheDir: is not set: .*UID 65532/),
    ]);

    const readOnly = testbed();
    const pod = find(readOnly, 'Deployment', 'qwen3-llmd-precise').spec.template.spec;
    pod.containers[0].volumeMounts.find((m: Any) => m.name === 'tokenizers').readOnly = true;
    expect(messages(check(readOnly))).toEqual([
      expect.stringMatching(
        /tokenizersCacheDir \/tokenizers is not writable: volume tokenizers is mounted readOnly/,
      ),
    ]);

    const unmounted = testbed();
    const container = find(unmounted, 'Deployment', 'qwen3-llmd-precise').spec.template.spec.containers[0];
    container.volumeMounts = container.volumeMounts.filter((m: Any) => m.name !== 'tokenizers');
    expect(messages(check(unmounted))).toEqual([
      expect.stringMatching(/tokenizersCacheDir \/tokenizers is not writable: no volume is mounted there/),
    ]);
  });
});

describe('the llm-d scorer’s evidence is observable', () => {
  const scorerNotes = (objects: Any[]) =>
    inspectManifests(objects as KubeObject[], ROOMY)
      .notes.map((n) => n.message)
      .filter((m) => m.includes('Got pod scores'));

  test('the chart’s --v 4 gives no note; below it, or with a zap level that overrides it, a note says the runner cannot see it', () => {
    expect(scorerNotes(testbed())).toEqual([]);

    const quiet = testbed();
    const args = eppArgs(quiet, 'qwen3-llmd-precise');
    args[args.indexOf('--v') + 1] = '1';
    expect(scorerNotes(quiet)).toEqual([
      expect.stringMatching(/^qwen3-llmd-precise runs at --v 1: .*records it as not observable$/),
    ]);
    expect(check(quiet)).toEqual([]);

    const zap = testbed();
    eppArgs(zap, 'qwen3-llmd-precise').push('--zap-log-level', 'info');
    expect(scorerNotes(zap)).toEqual([expect.stringMatching(/runs at --zap-log-level info/)]);
  });
});

describe('item 8: the AI Gateway arm', () => {
  const EG = 'envoy-gateway-config';
  const KEY = 'envoy-gateway.yaml';

  test('backendResources removed: the route InferencePool backendRef is caught (InvalidKind)', () => {
    const objects = testbed();
    editYaml(objects, EG, KEY, (doc) => {
      delete doc.extensionManager.backendResources;
    });
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(
        /HTTPRoute vllm\/ai-gateway spec.rules\[0\].backendRefs\[0\]: backendRef inference.networking.k8s.io\/InferencePool .*reason InvalidKind/,
      ),
    ]);
  });

  test('the extension port changed is caught', () => {
    const objects = testbed();
    editYaml(objects, EG, KEY, (doc) => {
      doc.extensionManager.service.fqdn.port = 1064;
    });
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(
        /extensionManager.service: points at .*:1064, not the AI Gateway controller .*:1063/,
      ),
    ]);
  });

  test('hooks removed are caught (Envoy Gateway refuses its configuration)', () => {
    const objects = testbed();
    editYaml(objects, EG, KEY, (doc) => {
      doc.extensionManager.hooks.xdsTranslator.post = [];
    });
    expect(messages(check(objects)).join('\n')).toMatch(/registered extension has no hooks specified/);
  });

  test("the arm's EPP switched to plaintext is caught", () => {
    const objects = testbed();
    const args = eppArgs(objects, 'qwen3-ai-gateway');
    args[args.indexOf('--secure-serving=true')] = '--secure-serving=false';
    expect(messages(check(objects))).toEqual([
      expect.stringMatching(
        /Deployment vllm\/qwen3-ai-gateway .*--secure-serving is off, but InferencePool vllm\/qwen3-ai-gateway-pool is routed through the AI Gateway/,
      ),
    ]);
  });

  test('route and Gateway pointing at names that do not exist are caught', () => {
    const objects = testbed();
    const route = find(objects, 'HTTPRoute', 'ai-gateway');
    route.spec.rules[0].backendRefs[0].name = 'no-such-pool';
    route.spec.parentRefs[0].name = 'no-such-gateway';
    find(objects, 'Gateway', 'ai-gateway').spec.gatewayClassName = 'no-such-class';
    find(objects, 'GatewayClass', 'vllm-ai-gateway').spec.parametersRef.name = 'no-such-proxy';
    const found = messages(check(objects));
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /HTTPRoute vllm\/ai-gateway .*names InferencePool no-such-pool, which is not among/,
        ),
        expect.stringMatching(
          /HTTPRoute vllm\/ai-gateway spec.parentRefs\[0\].name: names Gateway no-such-gateway/,
        ),
        expect.stringMatching(
          /Gateway vllm\/ai-gateway spec.gatewayClassName: names GatewayClass no-such-class/,
        ),
        expect.stringMatching(
          /GatewayClass vllm-ai-gateway spec.parametersRef.name: names EnvoyProxy envoy-gateway-system\/no-such-proxy/,
        ),
      ]),
    );
  });

  test('the kinds are validated with their schemas: an unknown key is a schema violation', () => {
    const objects = testbed();
    find(objects, 'Gateway', 'ai-gateway').spec.listeners[0].prot = 'HTTP';
    expect(check(objects)).toEqual([
      expect.objectContaining({
        object: 'Gateway vllm/ai-gateway',
        lesson: 0,
        message: expect.stringMatching(/unknown key "prot"/),
      }),
    ]);
  });
});

describe('the resource budget', () => {
  test('sums replicas, Deployments, the Envoy Gateway proxy, the runner and the largest concurrent benchmark run', () => {
    const objects = testbed();
    const report = inspectManifests(objects as KubeObject[], { nodeCpu: 1, nodeMemoryGiB: 1 });
    const budget = report.violations.filter((v) => v.lesson === 11);
    expect(budget.map((v) => v.field)).toEqual(['resources.requests.cpu', 'resources.requests.memory']);
    expect(budget[0].message).toMatch(
      /more than the node's 1 CPU \(--node-cpu\); biggest: StatefulSet vllm\/qwen3 x2 8 CPU/,
    );
    // The ideal partition's two clients run at once, so its run is the largest benchmark run.
    expect(budget[1].message).toMatch(/memory requests add up to/);
  });

  test('a testbed built to fit passes, and one more replica than fits is caught with totals and capacity', () => {
    const objects = testbed({});
    // Find the total by asking with a tiny node, then size the node to exactly that.
    const probe = inspectManifests(objects as KubeObject[], { nodeCpu: 0.001, nodeMemoryGiB: 10000 });
    const total = Number(/add up to ([\d.]+) CPU/.exec(probe.violations[0].message)?.[1]);
    expect(total).toBeGreaterThan(8);
    expect(check(objects, { nodeCpu: total, nodeMemoryGiB: 10000 })).toEqual([]);
    find(objects, 'StatefulSet', 'qwen3').spec.replicas = 3;
    expect(messages(check(objects, { nodeCpu: total, nodeMemoryGiB: 10000 }))).toEqual([
      expect.stringMatching(
        new RegExp(
          `CPU requests add up to ${total + 4} CPU, more than the node's ${total} CPU .*StatefulSet vllm/qwen3 x3 12 CPU`,
        ),
      ),
    ]);
  });
});
