import type { NetworkCell } from '../../config/network.ts';
import type { LabConfig } from '../../config/schema.ts';
import { fortioLoadArgs } from '../../network/fortio.ts';
import type { ProbeName } from '../../network/probes/bundle.ts';
import { NETWORK_REQUESTS } from '../../network/resources.ts';
import type { DownloadRunSpec, FortioRunSpec, NetworkRun, SseRunSpec } from '../../network/study/model.ts';
import { type MtlsClientGroup, mtlsClientGroups } from '../../network/study/mtls-groups.ts';
import { NETWORK_SMOKE_PREFIX } from '../../network/study/smoke.ts';
import { CELL_LABEL, GOOD_SERVICE_ACCOUNT, MESH_NAMESPACE, PLAIN_NAMESPACE } from '../../network/topology.ts';
import type { ContainerRequests } from '../../study/resources.ts';
import { RESULTS_HOST_PATH } from '../../study/topology.ts';
import type { JobObject } from '../ports.ts';
import { JOB_OUTPUT_MOUNT, jobOutputDir, networkJobName } from './layout.ts';

/**
 * The Jobs of the network study as plain JSON (the runner bundles no cdk8s): fortio load, curl
 * downloads and mTLS cases, the lab's Node probes, and short privileged host-network commands
 * (rule counts, conntrack), each writing its output file into its own folder of the results host
 * folder (`jobs/<name>/`, mounted at /out). Every Job has `backoffLimit: 0`: a failed client is
 * recorded, never silently retried. The runner's chart (charts/network/study-runner.ts) renders
 * the static ones per run into the runner's ConfigMap; the runner builds the rest (prober
 * targets, limits) from the same functions at run time.
 */

/**
 * Where the lab's Node probes are in a pod: the ConfigMap with their bundles in `plain` and `mesh`
 * (charts/network/node-probes.ts), its mount path and each probe's command
 * (lib/network/probes/bundle.ts). Passed in, not imported: that module bundles with esbuild at
 * synth, which the runner's own bundle must not carry.
 */
export interface ProbesInPod {
  readonly configMap: string;
  readonly mount: string;
  readonly commands: Readonly<Record<ProbeName, readonly string[]>>;
}

/** What every Job builder needs: the configuration, the cell, and where the probes are. */
export interface NetworkJobContext {
  readonly config: LabConfig;
  readonly cell: NetworkCell;
  readonly probes: ProbesInPod;
}

/** Label on every network Job: the run (or study step) it belongs to. */
export const NETWORK_RUN_LABEL = 'network-lab/run';
const COMPONENT_LABEL = 'app.kubernetes.io/component';

/** Output files of the Jobs, in their /out folder. */
export const OUTPUT_FILES = {
  fortio: 'fortio.json',
  curl: 'curl.json',
  sse: 'sse.json',
  prober: 'prober.json',
  proberReady: 'probing.json',
  conntrackDriver: 'conntrack-driver.json',
  host: 'host.txt',
} as const;

/**
 * Istio's per-pod injection switch. A pod label: "the label is the new API; if both are present we
 * prefer the label" (istio pkg/kube/inject/inject.go, injectRequired), and the injector webhook's
 * object selector skips pods labelled `false`.
 */
export const SIDECAR_INJECT_LABEL = 'sidecar.istio.io/inject';

function resources(r: ContainerRequests): Record<string, unknown> {
  return {
    requests: { cpu: r.cpu, memory: r.memory },
    ...(r.memoryLimit ? { limits: { memory: r.memoryLimit } } : {}),
  };
}

interface PodParts {
  readonly containers: readonly Record<string, unknown>[];
  readonly serviceAccountName?: string;
  readonly hostNetwork?: boolean;
  /** Labels of the pod only (not of the Job). */
  readonly podLabels?: Readonly<Record<string, string>>;
  readonly extraVolumes?: readonly Record<string, unknown>[];
}

/** A Job pinned to the cell's node with its output folder mounted at /out. */
export function networkJob(
  ctx: NetworkJobContext,
  name: string,
  namespace: string,
  runId: string,
  component: string,
  pod: PodParts,
): JobObject {
  const labels = {
    'app.kubernetes.io/part-of': 'llm-gateway-lab',
    [CELL_LABEL]: ctx.cell.name,
    [NETWORK_RUN_LABEL]: runId,
    [COMPONENT_LABEL]: component,
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { labels: { ...labels, ...pod.podLabels } },
        spec: {
          restartPolicy: 'Never',
          nodeSelector: { [CELL_LABEL]: ctx.cell.name },
          ...(pod.serviceAccountName ? { serviceAccountName: pod.serviceAccountName } : {}),
          ...(pod.hostNetwork ? { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' } : {}),
          terminationGracePeriodSeconds: 1,
          containers: pod.containers,
          volumes: [
            {
              name: 'out',
              hostPath: { path: `${RESULTS_HOST_PATH}/${jobOutputDir(name)}`, type: 'DirectoryOrCreate' },
            },
            ...(pod.extraVolumes ?? []),
          ],
        },
      },
    },
  };
}

const outMount = { name: 'out', mountPath: JOB_OUTPUT_MOUNT };
const unprivileged = { allowPrivilegeEscalation: false, runAsNonRoot: false, readOnlyRootFilesystem: false };
const privileged = { privileged: true, runAsNonRoot: false, readOnlyRootFilesystem: false };

/** The service account of a client in a namespace: `good` in the mesh (the allowed principal). */
function clientServiceAccount(namespace: string): string | undefined {
  return namespace === MESH_NAMESPACE ? GOOD_SERVICE_ACCOUNT : undefined;
}

/**
 * A fortio load run (E1, E1s, E3, E4, E5, C, E9's new-connection run): `fortioLoadArgs` with the
 * run's connections and resolution, the JSON written to /out (fortio v1.75.2 cli/fortio_main.go:
 * `-json path`, "Json output to provided file path or '-' for stdout"). Arguments only: the image
 * is FROM scratch with `/usr/bin/fortio` as its entrypoint and no shell (docs/facts.md §N2).
 */
export function fortioJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  spec: FortioRunSpec,
): JobObject {
  const network = {
    ...ctx.config.network,
    fortio: {
      ...ctx.config.network.fortio,
      connections: spec.connections,
      resolutionSeconds: spec.resolutionSeconds,
    },
  };
  const args = fortioLoadArgs(network, {
    url: spec.url,
    qps: spec.qps,
    seconds: spec.seconds,
    grpc: spec.mode === 'grpc',
    keepalive: spec.mode !== 'new-connection',
  });
  const json = args.indexOf('-json');
  const withFile = args.map((arg, i) =>
    i === json + 1 ? `${JOB_OUTPUT_MOUNT}/${OUTPUT_FILES.fortio}` : arg,
  );
  const serviceAccountName = clientServiceAccount(spec.clientNamespace);
  return networkJob(ctx, name, spec.clientNamespace, runId, 'fortio-client', {
    ...(serviceAccountName ? { serviceAccountName } : {}),
    containers: [
      {
        name: 'fortio',
        image: ctx.config.network.fortio.image,
        imagePullPolicy: 'IfNotPresent',
        args: withFile,
        // A smoke run's load is tiny, and up to 3 run at once beside the servers.
        resources: resources(
          runId.startsWith(NETWORK_SMOKE_PREFIX)
            ? NETWORK_REQUESTS.smokeFortioClient
            : NETWORK_REQUESTS.fortioClient,
        ),
        securityContext: unprivileged,
        volumeMounts: [outMount],
      },
    ],
  });
}

/**
 * curl's `-w` template of the fields the runner records (DownloadResult, CurlOutcome). `exitcode`
 * exists since curl 7.75.0, and the write-out is printed even when the transfer failed (curl
 * src/tool_operate.c post_per_transfer calls ourWriteOut with the result), so a dropped
 * connection still leaves its exit code and HTTP code `000`.
 */
export const CURL_WRITE_OUT =
  '{"httpCode":"%{http_code}","curlExit":%{exitcode},"sizeDownloadBytes":%{size_download},"speedDownloadBytesPerSecond":%{speed_download},"timeTotalSeconds":%{time_total}}';

/** A shell line running curl on `$URL`, its write-out into /out/curl.json; the Job fails when curl does. */
function curlScript(maxSeconds: number): string {
  const out = `${JOB_OUTPUT_MOUNT}/${OUTPUT_FILES.curl}`;
  return [
    `curl -sS -o /dev/null --max-time ${maxSeconds} -w '${CURL_WRITE_OUT}' "$URL" > ${out}.tmp`,
    'code=$?',
    `mv ${out}.tmp ${out}`,
    'exit $code',
  ].join('; ');
}

function curlContainer(ctx: NetworkJobContext, url: string, maxSeconds: number) {
  return {
    name: 'curl',
    image: ctx.config.network.probeImage,
    imagePullPolicy: 'IfNotPresent',
    command: ['sh', '-c', curlScript(maxSeconds)],
    env: [{ name: 'URL', value: url }],
    resources: resources(NETWORK_REQUESTS.nodeProbe),
    securityContext: unprivileged,
    volumeMounts: [outMount],
  };
}

/** E6: one download through the arm's path; curl's speed and time. */
export function downloadJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  spec: DownloadRunSpec,
): JobObject {
  const serviceAccountName = clientServiceAccount(spec.clientNamespace);
  return networkJob(ctx, name, spec.clientNamespace, runId, 'download-client', {
    ...(serviceAccountName ? { serviceAccountName } : {}),
    containers: [curlContainer(ctx, spec.url, 600)],
  });
}

/** Where a grouped mTLS Job writes one case's curl write-out, in its /out folder. */
export function mtlsCaseFile(caseId: string): string {
  return `curl-${caseId}.json`;
}

/** How long one curl of the matrix may take: a dropped connection fails at once, a hang ends here. */
export const MTLS_CURL_MAX_SECONDS = 10;

/**
 * The shell of a grouped mTLS Job: for each `<case id> <url>` pair of its arguments, one curl
 * whose write-out becomes /out/curl-<case id>.json (`mtlsCaseFile`). curl's failure is the
 * measurement (a dropped connection, exit 56), so a failed curl never stops the next one, and the
 * Job succeeds once every case had its turn; a case whose file is missing is that case's problem
 * alone.
 */
export function mtlsCurlsScript(maxSeconds = MTLS_CURL_MAX_SECONDS): string {
  const out = `"${JOB_OUTPUT_MOUNT}/${mtlsCaseFile('$1')}"`;
  const tmp = `"${JOB_OUTPUT_MOUNT}/${mtlsCaseFile('$1')}.tmp"`;
  return [
    'while [ $# -ge 2 ]; do',
    `curl -sS -o /dev/null --max-time ${maxSeconds} -w '${CURL_WRITE_OUT}' "$2" > ${tmp};`,
    `mv ${tmp} ${out};`,
    'shift 2;',
    'done;',
    'exit 0',
  ].join(' ');
}

/**
 * The curls of one source of the mTLS matrix (E2, E8; lib/network/study/mtls-groups.ts): one pod
 * in or out of the mesh under the source's service account runs each case's curl in plan order.
 * Out of the mesh in an injected namespace, the pod opts out of injection.
 */
export function mtlsClientJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  group: MtlsClientGroup,
): JobObject {
  return networkJob(ctx, name, group.clientNamespace, runId, 'mtls-client', {
    ...(group.serviceAccount !== 'default' ? { serviceAccountName: group.serviceAccount } : {}),
    podLabels: { [SIDECAR_INJECT_LABEL]: group.inMesh ? 'true' : 'false' },
    containers: [
      {
        name: 'curl',
        image: ctx.config.network.probeImage,
        imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c', mtlsCurlsScript(), 'mtls-curls', ...group.cases.flatMap((c) => [c.id, c.url])],
        resources: resources(NETWORK_REQUESTS.nodeProbe),
        securityContext: unprivileged,
        volumeMounts: [outMount],
      },
    ],
  });
}

/** A container running one of the lab's Node probes, its one JSON line redirected into /out. */
function probeContainer(
  ctx: NetworkJobContext,
  probe: ProbeName,
  flags: readonly string[],
  file: string,
  requests: ContainerRequests,
) {
  const out = `${JOB_OUTPUT_MOUNT}/${file}`;
  return {
    name: probe,
    image: ctx.config.runner.image,
    imagePullPolicy: 'IfNotPresent',
    // The probe prints one JSON line on stdout and exits 0 (lib/network/probes/probe-main.ts).
    command: [
      'sh',
      '-c',
      `"$@" > ${out}.tmp && mv ${out}.tmp ${out}`,
      probe,
      ...ctx.probes.commands[probe],
      ...flags,
    ],
    resources: resources(requests),
    securityContext: unprivileged,
    volumeMounts: [outMount, { name: 'probes', mountPath: ctx.probes.mount, readOnly: true }],
  };
}

const probesVolume = (ctx: NetworkJobContext) => ({
  name: 'probes',
  configMap: { name: ctx.probes.configMap },
});

/** E7: the sse-client probe reading one stream. */
export function sseJob(ctx: NetworkJobContext, name: string, runId: string, spec: SseRunSpec): JobObject {
  const serviceAccountName = clientServiceAccount(spec.clientNamespace);
  return networkJob(ctx, name, spec.clientNamespace, runId, 'sse-client', {
    ...(serviceAccountName ? { serviceAccountName } : {}),
    containers: [
      probeContainer(
        ctx,
        'sse-client',
        ['--url', spec.url, '--expect-events', String(spec.events)],
        OUTPUT_FILES.sse,
        NETWORK_REQUESTS.nodeProbe,
      ),
    ],
    extraVolumes: [probesVolume(ctx)],
  });
}

/**
 * E9: the service prober in watch mode, started before the Services it measures exist: it probes
 * every address (`ip:port`) until it connects or `giveUpMs` after it began, and writes
 * `OUTPUT_FILES.proberReady` once every address had its first attempt (the runner's go signal).
 */
export function proberJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  targets: readonly string[],
  attemptTimeoutMs: number,
  giveUpMs: number,
): JobObject {
  const flags = [
    ...targets.flatMap((t) => ['--target', t]),
    '--attempt-timeout-ms',
    String(attemptTimeoutMs),
    '--give-up-ms',
    String(giveUpMs),
    '--ready-file',
    `${JOB_OUTPUT_MOUNT}/${OUTPUT_FILES.proberReady}`,
  ];
  return networkJob(ctx, name, PLAIN_NAMESPACE, runId, 'service-prober', {
    containers: [
      probeContainer(ctx, 'service-prober', flags, OUTPUT_FILES.prober, NETWORK_REQUESTS.nodeProbe),
    ],
    extraVolumes: [probesVolume(ctx)],
  });
}

/** E10: the conntrack driver on the host's loopback (host network namespace). */
export function conntrackDriverJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  connections: number,
  connectTimeoutSeconds: number,
): JobObject {
  const flags = [
    '--host',
    '127.0.0.1',
    '--connections',
    String(connections),
    '--connect-timeout-ms',
    String(connectTimeoutSeconds * 1000),
  ];
  return networkJob(ctx, name, PLAIN_NAMESPACE, runId, 'conntrack-driver', {
    hostNetwork: true,
    containers: [
      probeContainer(
        ctx,
        'conntrack-driver',
        flags,
        OUTPUT_FILES.conntrackDriver,
        NETWORK_REQUESTS.conntrackDriver,
      ),
    ],
    extraVolumes: [probesVolume(ctx)],
  });
}

/** A node folder mounted into a privileged host Job. */
interface HostMount {
  readonly name: string;
  readonly path: string;
}

/**
 * A short privileged Job in the host's network namespace running `script` in `image`; the
 * script's stdout becomes /out/host.txt, and the Job fails when the script does.
 */
function privilegedHostJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  component: string,
  image: string,
  script: string,
  mounts: readonly HostMount[] = [],
): JobObject {
  const out = `${JOB_OUTPUT_MOUNT}/${OUTPUT_FILES.host}`;
  return networkJob(ctx, name, PLAIN_NAMESPACE, runId, component, {
    hostNetwork: true,
    containers: [
      {
        name: 'host',
        image,
        imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c', `{ ${script}; } > ${out}.tmp && mv ${out}.tmp ${out}`],
        resources: resources(NETWORK_REQUESTS.hostProbe),
        securityContext: privileged,
        volumeMounts: [outMount, ...mounts.map((m) => ({ name: m.name, mountPath: m.path }))],
      },
    ],
    extraVolumes: mounts.map((m) => ({ name: m.name, hostPath: { path: m.path, type: 'Directory' } })),
  });
}

/**
 * A host command in the probe image (netshoot: iptables, nft, ipvsadm, conntrack).
 * `/proc/sys/net/netfilter` is writable only from the host network namespace (docs/facts.md §N3),
 * hence hostNetwork and privileged.
 */
export function hostCommandJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  script: string,
): JobObject {
  return privilegedHostJob(ctx, name, runId, 'host-command', ctx.config.network.probeImage, script);
}

/** The Cilium agent image of the cell's pinned release (docs/facts.md §N2). */
export function ciliumImage(config: LabConfig): string {
  return `quay.io/cilium/cilium:v${config.network.cilium.version}`;
}

/**
 * `cilium-dbg` on the host without the exec API: the agent's image with the BPF filesystem
 * (pinned maps, for `bpf lb list`) and the agent's socket folder (for `status`) mounted.
 */
export function ciliumCommandJob(
  ctx: NetworkJobContext,
  name: string,
  runId: string,
  script: string,
): JobObject {
  return privilegedHostJob(ctx, name, runId, 'cilium-command', ciliumImage(ctx.config), script, [
    { name: 'bpf', path: '/sys/fs/bpf' },
    { name: 'cilium-run', path: '/var/run/cilium' },
  ]);
}

/** The Jobs of one run that the plan fixes (fortio, download, SSE, the mTLS cases), by name. */
export function runJobs(ctx: NetworkJobContext, run: NetworkRun): Record<string, JobObject> {
  const { spec } = run;
  const name = networkJobName(run.id);
  switch (spec.kind) {
    case 'fortio':
      return { [name]: fortioJob(ctx, name, run.id, spec) };
    case 'download':
      return { [name]: downloadJob(ctx, name, run.id, spec) };
    case 'sse':
      return { [name]: sseJob(ctx, name, run.id, spec) };
    case 'mtls':
      return Object.fromEntries(
        mtlsClientGroups(spec.cases).map((group) => {
          const groupName = mtlsGroupJobName(run.id, group.id);
          return [groupName, mtlsClientJob(ctx, groupName, run.id, group)];
        }),
      );
    case 'service-scale':
    case 'conntrack':
      // Built at run time: their targets and limits are known only then.
      return {};
  }
}

/** The Job of one source of an mTLS run (`net-e2-matrix-mesh-good-in-mesh`). */
export function mtlsGroupJobName(runId: string, groupId: string): string {
  return networkJobName(runId, groupId);
}

/** Every static Job of a plan, by name: what the runner's ConfigMap carries (`jobs.json`). */
export function planJobs(ctx: NetworkJobContext, runs: readonly NetworkRun[]): Record<string, JobObject> {
  return Object.assign({}, ...runs.map((run) => runJobs(ctx, run)));
}
