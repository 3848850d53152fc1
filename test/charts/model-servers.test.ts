import { describe, expect, test } from 'vitest';
import { container, envOf, find, synthLab } from './synth.ts';

describe('ModelServers and the baseline', () => {
  const { objects, charts } = synthLab();
  const sts = find(objects, 'StatefulSet', 'qwen3');
  const vllm = container(sts, 'vllm');

  test('a StatefulSet of two replicas behind a headless Service', () => {
    expect(sts.spec.replicas).toBe(2);
    expect(sts.spec.serviceName).toBe('qwen3-headless');
    expect(sts.spec.selector.matchLabels).toEqual({ app: 'qwen3' });
    expect(sts.spec.template.metadata.labels.app).toBe('qwen3');
    const headless = find(objects, 'Service', 'qwen3-headless');
    expect(headless.spec.clusterIP).toBe('None');
    expect(headless.spec.selector).toEqual({ app: 'qwen3' });
    expect(headless.spec.ports).toEqual([{ name: 'http', port: 8000, targetPort: 8000 }]);
  });

  test('exact server arguments, never --disable-log-stats', () => {
    expect(vllm.image).toBe('vllm/vllm-openai:v0.11.0');
    expect(vllm.args).toEqual([
      '--model=Qwen/Qwen3-0.6B-FP8',
      '--served-model-name=qwen3',
      '--host=0.0.0.0',
      '--port=8000',
      '--max-model-len=8192',
      '--gpu-memory-utilization=0.85',
      '--enable-prefix-caching',
      '--block-size=16',
      '--max-num-batched-tokens=2048',
      '--max-num-seqs=256',
    ]);
    expect(vllm.args.join(' ')).not.toContain('disable-log-stats');
  });

  test('one GPU each, injected through the nvidia runtime class', () => {
    expect(sts.spec.template.spec.runtimeClassName).toBe('nvidia');
    expect(vllm.resources.limits['nvidia.com/gpu']).toBe(1);
  });

  test('dev mode, the shared HF cache and shm', () => {
    expect(envOf(vllm)).toEqual({ VLLM_SERVER_DEV_MODE: '1', HF_HOME: '/models' });
    const volumes = sts.spec.template.spec.volumes;
    expect(volumes).toContainEqual({
      name: 'model-cache',
      hostPath: { path: '/var/lib/lab/models', type: 'DirectoryOrCreate' },
    });
    expect(volumes).toContainEqual({ name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: '4Gi' } });
    expect(vllm.volumeMounts).toEqual([
      { name: 'model-cache', mountPath: '/models' },
      { name: 'dshm', mountPath: '/dev/shm' },
    ]);
  });

  test('readiness with the long failure budget', () => {
    expect(vllm.readinessProbe).toEqual({
      httpGet: { path: '/health', port: 8000 },
      initialDelaySeconds: 30,
      periodSeconds: 10,
      failureThreshold: 60,
    });
  });

  test('resources and security context are explicit, not library defaults', () => {
    expect(vllm.resources.limits.memory).toBe('32Gi');
    expect(vllm.securityContext).toEqual({
      runAsNonRoot: false,
      readOnlyRootFilesystem: false,
      allowPrivilegeEscalation: false,
    });
  });

  test('the baseline is a NodePort Service on 30800 over the standard replicas', () => {
    const [svc] = charts['30-baseline'];
    expect(svc.kind).toBe('Service');
    expect(svc.metadata.name).toBe('qwen3-nodeport');
    expect(svc.spec.type).toBe('NodePort');
    expect(svc.spec.selector).toEqual({ app: 'qwen3' });
    expect(svc.spec.ports).toEqual([{ name: 'http', port: 8000, targetPort: 8000, nodePort: 30800 }]);
  });

  test('the device plugin runs with the nvidia runtime class in kube-system', () => {
    const [ds] = charts['10-gpu'];
    expect(ds.kind).toBe('DaemonSet');
    expect(ds.metadata.namespace).toBe('kube-system');
    const pod = ds.spec.template.spec;
    expect(pod.runtimeClassName).toBe('nvidia');
    expect(pod.tolerations).toContainEqual({
      key: 'nvidia.com/gpu',
      operator: 'Exists',
      effect: 'NoSchedule',
    });
    expect(pod.containers[0].image).toBe('nvcr.io/nvidia/k8s-device-plugin:v0.17.1');
    expect(pod.volumes[0].hostPath.path).toBe('/var/lib/kubelet/device-plugins');
    expect(pod.containers[0].volumeMounts[0].mountPath).toBe('/var/lib/kubelet/device-plugins');
  });
});

describe("llm-d's KV-events replicas", () => {
  test('absent unless llmd-precise is enabled', () => {
    expect(synthLab().objects.filter((o) => o.kind === 'StatefulSet')).toHaveLength(1);
  });

  test('publish KV events to the llm-d EPP with a matching block size and hash seed', () => {
    const { objects } = synthLab({ study: { optionalArms: ['llmd-precise'] } });
    const sts = find(objects, 'StatefulSet', 'qwen3-kv');
    const vllm = container(sts, 'vllm');
    expect(sts.spec.serviceName).toBe('qwen3-kv-headless');
    expect(sts.spec.selector.matchLabels).toEqual({ app: 'qwen3-kv' });
    expect(vllm.args).toContain('--block-size=64');
    expect(vllm.args).toContain('--prefix-caching-hash-algo=sha256_cbor');
    const kvArg: string = vllm.args.find((a: string) => a.startsWith('--kv-events-config='));
    expect(JSON.parse(kvArg.slice('--kv-events-config='.length))).toEqual({
      enable_kv_cache_events: true,
      publisher: 'zmq',
      endpoint: 'tcp://qwen3-llmd-precise.vllm.svc.cluster.local:5557',
      // The served name requests carry, so index keys match the scorer's look-ups (docs/facts.md §3.7).
      topic: 'kv@$(POD_IP)@qwen3',
    });
    expect(vllm.env).toContainEqual({ name: 'PYTHONHASHSEED', value: '42' });
    expect(vllm.env).toContainEqual({
      name: 'POD_IP',
      valueFrom: { fieldRef: { fieldPath: 'status.podIP' } },
    });
    // The standard replicas keep their own block size and no events.
    const standard = container(find(objects, 'StatefulSet', 'qwen3'), 'vllm');
    expect(standard.args).toContain('--block-size=16');
    expect(standard.args.some((a: string) => a.startsWith('--kv-events-config'))).toBe(false);
  });
});
