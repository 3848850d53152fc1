import { describe, expect, it } from 'vitest';
import { inspectManifests, type KubeObject } from '../../lib/check/index.ts';
import type { Json } from '../../lib/check/manifest.ts';
import { benchJob, container, find, goodTestbed, podSpec } from './fixtures.ts';
import {
  clusters,
  EXT_PROC_PATH,
  editEnvoy,
  expectOnly,
  extProcTyped,
  SERVER_ARGS,
  STS,
  violationsAfter,
} from './helpers.ts';

describe('the correct fixture testbed', () => {
  it('has no violation, and notes the NodePort baseline', () => {
    const report = inspectManifests(goodTestbed());
    expect(report.violations).toEqual([]);
    expect(report.notes).toEqual([
      expect.objectContaining({
        object: 'Service vllm/qwen3-nodeport',
        message: expect.stringContaining('NodePort 30800'),
      }),
    ]);
  });
});

describe('lesson 1: runtimeClassName nvidia on GPU pods', () => {
  it.each([
    ['StatefulSet', 'qwen3', 'StatefulSet vllm/qwen3', 'the GPU is requested but not injected'],
    [
      'DaemonSet',
      'nvidia-device-plugin',
      'DaemonSet kube-system/nvidia-device-plugin',
      'never advertises nvidia.com/gpu',
    ],
    ['Job', 'bench-epp', 'Job vllm/bench-epp', 'Failed to infer device type'],
  ])('flags a %s without it', (kind, name, object, why) => {
    const violations = violationsAfter((objects) => {
      delete podSpec(objects, kind, name).runtimeClassName;
    });
    expectOnly(violations, object, 'spec.template.spec.runtimeClassName', 1, why);
    expect(violations[0].message).toMatch(/^is not set; /);
  });

  it('names a wrong runtime class', () => {
    const violations = violationsAfter((objects) => {
      podSpec(objects, 'StatefulSet', 'qwen3').runtimeClassName = 'runc';
    });
    expectOnly(
      violations,
      STS,
      'spec.template.spec.runtimeClassName',
      1,
      'is "runc"; a vLLM replica needs "nvidia"',
    );
  });
});

describe('lesson 2: one GPU per replica, none for the client', () => {
  it('flags a replica with two GPUs', () => {
    const violations = violationsAfter((objects) => {
      const resources = container(objects, 'StatefulSet', 'qwen3').resources as Json;
      resources.limits = { 'nvidia.com/gpu': '2' };
      delete resources.requests;
    });
    expectOnly(
      violations,
      STS,
      'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
      2,
      'is 2; each vLLM replica must own exactly one GPU',
    );
  });

  it('flags a replica without a GPU limit', () => {
    const violations = violationsAfter((objects) => {
      container(objects, 'StatefulSet', 'qwen3').resources = {};
    });
    expectOnly(
      violations,
      STS,
      'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
      2,
      'is not set',
    );
  });

  it('flags a benchmark client that requests a GPU', () => {
    const violations = violationsAfter((objects) => {
      container(objects, 'Job', 'bench-epp').resources = { limits: { 'nvidia.com/gpu': 1 } };
    });
    expectOnly(
      violations,
      'Job vllm/bench-epp',
      'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
      2,
      'would take one from the replicas',
    );
  });
});

describe('lesson 3: prefix caching, metrics, model name, internal Services', () => {
  it('flags --disable-log-stats', () => {
    const violations = violationsAfter((objects) => {
      (container(objects, 'StatefulSet', 'qwen3').args as string[]).push('--disable-log-stats');
    });
    expectOnly(
      violations,
      STS,
      SERVER_ARGS,
      3,
      '--disable-log-stats removes all vllm:* metrics; the study cannot measure hit rates',
    );
  });

  it('flags a replica without --enable-prefix-caching', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'StatefulSet', 'qwen3');
      c.args = (c.args as string[]).filter((arg) => arg !== '--enable-prefix-caching');
    });
    expectOnly(violations, STS, SERVER_ARGS, 3, '--enable-prefix-caching is not set');
  });

  it('flags a client whose served model name the replicas do not serve', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'Job', 'bench-epp');
      c.args = (c.args as string[]).map((arg) =>
        arg === '--served-model-name=qwen3' ? '--served-model-name=qwen' : arg,
      );
    });
    expectOnly(
      violations,
      'Job vllm/bench-epp',
      SERVER_ARGS,
      3,
      '--served-model-name "qwen" does not match the replicas\' --served-model-name (qwen3)',
    );
  });

  it('flags a LoadBalancer Service over the replicas', () => {
    const violations = violationsAfter((objects) => {
      (find(objects, 'Service', 'qwen3-nodeport').spec as Json).type = 'LoadBalancer';
    });
    expectOnly(
      violations,
      'Service vllm/qwen3-nodeport',
      'spec.type',
      3,
      'exposes /reset_prefix_cache, /sleep and /wake_up outside the cluster',
    );
  });

  it('flags externalIPs on a Service over the replicas', () => {
    const violations = violationsAfter((objects) => {
      (find(objects, 'Service', 'qwen3-headless').spec as Json).externalIPs = ['203.0.113.7'];
    });
    expectOnly(
      violations,
      'Service vllm/qwen3-headless',
      'spec.externalIPs',
      3,
      'routes external addresses to the vLLM replicas',
    );
  });

  it('flags an Ingress to the replicas', () => {
    const violations = violationsAfter((objects) => {
      objects.push({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'Ingress',
        metadata: { name: 'open', namespace: 'vllm' },
        spec: { defaultBackend: { service: { name: 'qwen3-nodeport', port: { number: 8000 } } } },
      });
    });
    expectOnly(
      violations,
      'Ingress vllm/open',
      'spec.defaultBackend.service.name',
      3,
      'sends outside traffic to Service vllm/qwen3-nodeport',
    );
  });
});

describe('lesson 4: front ends address replicas by name or selector', () => {
  const ROUTER_SCRIPT = 'spec.template.spec.containers[0].args[0]';
  const setWorkers = (objects: KubeObject[], urls: string) => {
    const c = container(objects, 'Deployment', 'router');
    c.args = [(c.args as string[])[0].replace(/--worker-urls \S+ \S+/, `--worker-urls ${urls}`)];
  };

  it('flags pasted pod IPs in a router inside sh -c', () => {
    const violations = violationsAfter((objects) =>
      setWorkers(objects, 'http://10.42.0.15:8000 http://qwen3-1.qwen3-headless:8000'),
    );
    expectOnly(
      violations,
      'Deployment vllm/router',
      ROUTER_SCRIPT,
      4,
      '--worker-urls http://10.42.0.15:8000 is a pasted IP address',
    );
    expect(violations[0].message).toContain('qwen3-0.qwen3-headless');
  });

  it('flags a router pointed at the kube-proxy Service', () => {
    const violations = violationsAfter((objects) =>
      setWorkers(objects, 'http://qwen3-nodeport.vllm.svc.cluster.local:8000'),
    );
    expectOnly(
      violations,
      'Deployment vllm/router',
      ROUTER_SCRIPT,
      4,
      "Service vllm/qwen3-nodeport (NodePort), which kube-proxy balances over the replicas: it re-randomizes the router's choice",
    );
  });

  it('flags a router pointed at the headless Service as a whole', () => {
    const violations = violationsAfter((objects) => setWorkers(objects, 'http://qwen3-headless:8000'));
    expectOnly(violations, 'Deployment vllm/router', ROUTER_SCRIPT, 4, 'the router sees one worker');
  });

  it('flags a literal IP in an Envoy cluster', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => {
        const endpoint = JSON.stringify(clusters(config)[1]).replace(
          'picker.vllm.svc.cluster.local',
          '10.42.0.20',
        );
        clusters(config)[1] = JSON.parse(endpoint);
      }),
    );
    expect(violations).toContainEqual(
      expect.objectContaining({
        object: 'ConfigMap vllm/envoy-config',
        field:
          'data["envoy.yaml"].static_resources.clusters[1].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address',
        lesson: 4,
        message: expect.stringContaining('is the literal IP 10.42.0.20'),
      }),
    );
  });

  it('flags an InferencePool whose selector picks no replica', () => {
    const violations = violationsAfter((objects) => {
      (find(objects, 'InferencePool', 'qwen3-pool').spec as { selector: Json }).selector = {
        matchLabels: { app: 'qwen' },
      };
    });
    expectOnly(
      violations,
      'InferencePool vllm/qwen3-pool',
      'spec.selector.matchLabels',
      4,
      'selects no vLLM replica',
    );
  });
});

describe('lesson 5: the Endpoint Picker', () => {
  const EPP = 'Deployment vllm/picker';
  const editArgs = (objects: KubeObject[], edit: (args: string[]) => string[]) => {
    const c = container(objects, 'Deployment', 'picker');
    c.args = edit(c.args as string[]);
  };
  const without = (flag: string) => (args: string[]) => {
    const at = args.indexOf(flag);
    return args.filter((_, i) => i !== at && i !== at + 1);
  };

  it('flags a missing scheduler config', () => {
    const violations = violationsAfter((objects) => editArgs(objects, without('--config-file')));
    expectOnly(
      violations,
      EPP,
      SERVER_ARGS,
      5,
      'scheduler config must be set either by config api or through code',
    );
  });

  it('flags a config file whose ConfigMap key does not exist', () => {
    const violations = violationsAfter((objects) => {
      find(objects, 'ConfigMap', 'picker-config').data = { 'other.yaml': 'x: 1' };
    });
    expectOnly(
      violations,
      EPP,
      'spec.template.spec.volumes[0]',
      5,
      'ConfigMap vllm/picker-config has no key plugins.yaml',
    );
  });

  it('flags secure serving that does not match a plaintext Envoy cluster', () => {
    const violations = violationsAfter((objects) =>
      editArgs(objects, (args) => args.filter((a) => a !== '--secure-serving=false')),
    );
    expectOnly(
      violations,
      EPP,
      SERVER_ARGS,
      5,
      '--secure-serving is on (the default) but the Envoy cluster picker in ConfigMap vllm/envoy-config',
    );
  });

  it('flags plaintext serving behind a TLS Envoy cluster', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => {
        clusters(config)[1].transport_socket = { name: 'envoy.transport_sockets.tls', typed_config: {} };
      }),
    );
    expectOnly(violations, EPP, SERVER_ARGS, 5, '--secure-serving=false but the Envoy cluster picker');
  });

  it('flags the default KV metric', () => {
    const violations = violationsAfter((objects) =>
      editArgs(objects, without('--kv-cache-usage-percentage-metric')),
    );
    expectOnly(violations, EPP, SERVER_ARGS, 5, 'the kv-cache scorer silently reads nothing');
  });

  it('flags a probe on the ext_proc port', () => {
    const violations = violationsAfter((objects) => {
      container(objects, 'Deployment', 'picker').readinessProbe = { grpc: { port: 9002 } };
    });
    expectOnly(
      violations,
      EPP,
      'spec.template.spec.containers[0].readinessProbe.grpc.port',
      5,
      'is 9002: the EPP serves gRPC health on 9003',
    );
  });

  it('flags RBAC without subjectaccessreviews', () => {
    const violations = violationsAfter((objects) => {
      const role = find(objects, 'ClusterRole', 'picker-auth');
      role.rules = (role.rules as Json[]).slice(0, 1);
    });
    expectOnly(
      violations,
      EPP,
      'spec.template.spec.serviceAccountName',
      5,
      'no ClusterRole bound to ServiceAccount vllm/picker grants create on subjectaccessreviews',
    );
  });

  it('flags a ServiceAccount that cannot watch the pool', () => {
    const violations = violationsAfter((objects) => {
      (find(objects, 'RoleBinding', 'picker').subjects as Json[])[0].name = 'someone-else';
    });
    expectOnly(
      violations,
      EPP,
      'spec.template.spec.serviceAccountName',
      5,
      'may not get, list and watch pods and inferencepools and inferenceobjectives',
    );
  });
});

describe('lesson 6: the standalone Envoy', () => {
  const ENVOY = 'Deployment vllm/envoy';
  const CM = 'ConfigMap vllm/envoy-config';

  it('flags a body mode that is not FULL_DUPLEX_STREAMED', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => {
        (extProcTyped(config).processing_mode as Json).response_body_mode = 'BUFFERED';
      }),
    );
    expectOnly(
      violations,
      CM,
      `${EXT_PROC_PATH}.processing_mode.response_body_mode`,
      6,
      'is BUFFERED: use FULL_DUPLEX_STREAMED or NONE, so SSE responses keep streaming',
    );
  });

  it('flags the default message timeout', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => delete extProcTyped(config).message_timeout),
    );
    expectOnly(
      violations,
      CM,
      `${EXT_PROC_PATH}.message_timeout`,
      6,
      'is not set (200ms): a streamed response may last as long as the route allows (route timeout 300s)',
    );
  });

  it('flags ORIGINAL_DST on the wrong header', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => {
        clusters(config)[0].original_dst_lb_config = {
          use_http_header: true,
          http_header_name: 'x-destination',
        };
      }),
    );
    expectOnly(
      violations,
      CM,
      'data["envoy.yaml"].static_resources.clusters[0].original_dst_lb_config.http_header_name',
      6,
      'is x-destination, not x-gateway-destination-endpoint',
    );
  });

  it('flags an ext_proc cluster without HTTP/2 and with a health check', () => {
    const violations = violationsAfter((objects) =>
      editEnvoy(objects, (config) => {
        delete clusters(config)[1].http2_protocol_options;
        clusters(config)[1].health_checks = [{ grpc_health_check: {} }];
      }),
    );
    expect(violations).toEqual([
      expect.objectContaining({
        object: CM,
        field: 'data["envoy.yaml"].static_resources.clusters[1]',
        lesson: 6,
        message: expect.stringContaining('needs HTTP/2'),
      }),
      expect.objectContaining({
        object: CM,
        field: 'data["envoy.yaml"].static_resources.clusters[1].health_checks',
        lesson: 6,
        message: expect.stringContaining('gRPC health on 9003'),
      }),
    ]);
  });

  it('flags an unpinned image, no --concurrency and info logging', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'Deployment', 'envoy');
      c.image = 'envoyproxy/envoy:distroless-latest';
      c.args = ['-c', '/etc/envoy/envoy.yaml', '-l', 'info'];
    });
    expect(violations).toEqual([
      expect.objectContaining({
        object: ENVOY,
        field: 'spec.template.spec.containers[0].image',
        lesson: 6,
        message: expect.stringContaining('floating tag'),
      }),
      expect.objectContaining({
        object: ENVOY,
        field: SERVER_ARGS,
        lesson: 6,
        message: expect.stringContaining('--concurrency is not set'),
      }),
      expect.objectContaining({
        object: ENVOY,
        field: SERVER_ARGS,
        lesson: 6,
        message: expect.stringContaining('--log-level is info'),
      }),
    ]);
  });

  it('accepts error as a quiet log level', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'Deployment', 'envoy');
      c.args = ['-c', '/etc/envoy/envoy.yaml', '--log-level', 'error', '--concurrency', '4'];
    });
    expect(violations).toEqual([]);
  });
});

describe('lesson 7: benchmark Jobs run once and save their result', () => {
  const JOB = 'Job vllm/bench-epp';

  it('flags the default backoffLimit', () => {
    const violations = violationsAfter(
      (objects) => delete (find(objects, 'Job', 'bench-epp').spec as Json).backoffLimit,
    );
    expectOnly(
      violations,
      JOB,
      'spec.backoffLimit',
      7,
      "is not set (Kubernetes retries 6 times); must be 0: a retry meets the first attempt's warm cache",
    );
  });

  it('flags restartPolicy OnFailure', () => {
    const violations = violationsAfter((objects) => {
      podSpec(objects, 'Job', 'bench-epp').restartPolicy = 'OnFailure';
    });
    expectOnly(violations, JOB, 'spec.template.spec.restartPolicy', 7, 'is OnFailure, not Never');
  });

  it('flags a client that saves no result', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'Job', 'bench-epp');
      c.args = (c.args as string[]).filter(
        (arg) => arg !== '--save-result' && !arg.startsWith('--result-filename'),
      );
    });
    expect(violations).toEqual([
      expect.objectContaining({
        object: JOB,
        field: SERVER_ARGS,
        lesson: 7,
        message: expect.stringContaining('--save-result is not set'),
      }),
      expect.objectContaining({
        object: JOB,
        field: SERVER_ARGS,
        lesson: 7,
        message: expect.stringContaining('--result-filename is not set'),
      }),
    ]);
  });
});

describe('lesson 8: the working set overflows one replica but a partition fits', () => {
  const ENVOY_URL = 'http://envoy.vllm.svc.cluster.local:8081';

  it('flags a workload that fits in one replica, with the numbers', () => {
    const violations = violationsAfter((objects) => objects.push(benchJob('bench-small', ENVOY_URL, 8, 512)));
    expectOnly(
      violations,
      'Job vllm/bench-small',
      SERVER_ARGS,
      8,
      "working set 8 prefixes x 512 tokens = 4,096 tokens fits in one replica's KV cache (163,472 tokens)",
    );
  });

  it('flags a workload no partition can hold, using the given KV size and the StatefulSet replicas', () => {
    const violations = violationsAfter(() => {}, { kvCacheTokensPerReplica: 100_000 });
    expectOnly(
      violations,
      'Job vllm/bench-epp',
      SERVER_ARGS,
      8,
      'even a perfect partition over 2 replicas (StatefulSet vllm/qwen3) puts 131,072 tokens on one replica, more than its KV cache (100,000 tokens)',
    );
  });

  it('judges the partition by the replica count', () => {
    const violations = violationsAfter((objects) => {
      (find(objects, 'StatefulSet', 'qwen3').spec as Json).replicas = 1;
    });
    expectOnly(violations, 'Job vllm/bench-epp', SERVER_ARGS, 8, 'even a perfect partition over 1 replicas');
  });
});

describe('lesson 9: prefix caches can be reset between runs', () => {
  it('flags a replica without VLLM_SERVER_DEV_MODE=1', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'StatefulSet', 'qwen3');
      c.env = (c.env as Json[]).filter((entry) => entry.name !== 'VLLM_SERVER_DEV_MODE');
    });
    expectOnly(
      violations,
      STS,
      'spec.template.spec.containers[0].env',
      9,
      'VLLM_SERVER_DEV_MODE=1 is not set: POST /reset_prefix_cache answers 404',
    );
    expect(violations[0].message).toContain('the manifests show only this precondition');
  });

  it('accepts dev mode from a ConfigMap through envFrom', () => {
    const violations = violationsAfter((objects) => {
      const c = container(objects, 'StatefulSet', 'qwen3');
      c.env = [];
      c.envFrom = [{ configMapRef: { name: 'vllm-env' } }];
      objects.push({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'vllm-env', namespace: 'vllm' },
        data: { VLLM_SERVER_DEV_MODE: '1' },
      });
    });
    expect(violations).toEqual([]);
  });
});
