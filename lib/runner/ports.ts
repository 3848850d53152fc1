import type { NetworkRunRecord, NetworkStudyRecord } from '../network/study/model.ts';
import type { Api } from '../study/arms.ts';
import type { ClientGate } from '../study/benchmark.ts';
import type { BenchmarkSpec } from '../study/plan.ts';
import type { RunRecord, StudyRecord } from '../study/results.ts';
import type { AnyChecklist, SmokeChecklist } from '../study/smoke-checklist.ts';
import type { JobCounts } from '../study/validity.ts';
import type { StudyStatus } from './status.ts';
import type { StopRequest } from './stop-signal.ts';
import type { StoredStudy } from './study-id.ts';

/**
 * The narrow interfaces behind which the runner does all its I/O. The real implementations
 * (`kube-cluster.ts`, `http-replicas.ts`, `file-store.ts`) are wired in `main.ts`; the rehearsal
 * test swaps in a fake cluster and loopback replicas.
 */

/** A Job manifest as plain JSON, exactly what `benchmarkJob(config, spec)` returns. */
export interface JobObject {
  readonly apiVersion: 'batch/v1';
  readonly kind: 'Job';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly spec: Readonly<Record<string, unknown>>;
}

/** A pod as the runner needs to see it. */
export interface PodState {
  readonly name: string;
  readonly uid: string;
  /** The pod's `Ready` condition is True. */
  readonly ready: boolean;
  /**
   * The scheduler's message while no node can take the pod (condition `PodScheduled` False with
   * reason `Unschedulable`); absent once scheduled or while it is still being considered.
   */
  readonly unschedulable?: string;
}

/** The fields of a Deployment that tell whether a rollout finished (as `kubectl rollout status`). */
export interface DeploymentState {
  readonly generation: number;
  readonly observedGeneration: number;
  /** spec.replicas */
  readonly desired: number;
  /** status.replicas: pods of every revision. */
  readonly total: number;
  readonly updated: number;
  readonly available: number;
}

/** The Kubernetes API, scoped to the lab namespace. Not-found on delete is success. */
export interface Cluster {
  createJob(job: JobObject): Promise<void>;
  /** A Job's counts, or undefined when it does not exist. */
  getJob(name: string): Promise<JobCounts | undefined>;
  /** Deletes a Job and its pods (foreground propagation); returns before they are gone. */
  deleteJob(name: string): Promise<void>;
  /** Names of the Jobs matching a label selector (every benchmark Job, of any study). */
  listJobNames(labelSelector: string): Promise<string[]>;
  listPods(labelSelector: string): Promise<PodState[]>;
  /**
   * Deletes a pod; with `uid`, only that pod (the API's delete precondition): a pod of the same
   * name with another uid is a replacement, left alone, and the call succeeds.
   */
  deletePod(name: string, uid?: string): Promise<void>;
  /**
   * A container's log; with `since`, only lines written at or after it (the API's `sinceTime`,
   * whole seconds).
   */
  podLog(name: string, container?: string, since?: Date): Promise<string>;
  /** The `status` of a namespaced custom resource, or undefined when the object does not exist. */
  resourceStatus(ref: ResourceRef): Promise<Readonly<Record<string, unknown>> | undefined>;
  /** Sets the pod template annotation `kubectl.kubernetes.io/restartedAt`, as `kubectl rollout restart`. */
  restartDeployment(name: string, at: Date): Promise<void>;
  getDeployment(name: string): Promise<DeploymentState | undefined>;
  /** The API server's `gitVersion` (e.g. `v1.33.4+k3s1`). */
  serverVersion(): Promise<string>;
  /** A Service's `spec`, or undefined when it does not exist (a gate copies its front end's). */
  getServiceSpec(name: string): Promise<Readonly<Record<string, unknown>> | undefined>;
  /** Creates a Service in the lab namespace (a closed gate: no selector). */
  createService(service: ServiceObject): Promise<void>;
  /** Replaces a Service's `spec.selector` (a JSON patch): the gate opens to these pods. */
  setServiceSelector(name: string, selector: Readonly<Record<string, string>>): Promise<void>;
  deleteService(name: string): Promise<void>;
  /** Names of the Services matching a label selector (leftover gates of a killed runner). */
  listServiceNames(labelSelector: string): Promise<string[]>;
}

/** A namespaced object of an API group, as the API server addresses it. */
export interface ResourceRef {
  readonly group: string;
  readonly version: string;
  /** Lower-case plural resource name (`httproutes`, `gateways`). */
  readonly plural: string;
  readonly namespace: string;
  readonly name: string;
}

/** The vLLM replicas' HTTP side, by base URL (`http://qwen3-0.qwen3-headless...:8000`). */
export interface Replicas {
  /** POST /reset_prefix_cache; the HTTP status (404 without dev mode). */
  resetPrefixCache(baseUrl: string): Promise<number>;
  /** GET /metrics; the text, or an error naming the HTTP status. */
  metrics(baseUrl: string): Promise<string>;
  /** GET /v1/models; the HTTP status (200 once the engine serves). */
  models(baseUrl: string): Promise<number>;
}

/** What a front end answered to one request. */
export interface FrontEndAnswer {
  readonly status: number;
  /** The start of the body, for the error message when the status is not 200. */
  readonly body: string;
}

/** The front ends' HTTP side (Service, router, Envoy, Gateway), by base URL. */
export interface FrontEnds {
  /** One tiny generation (`max_tokens` 1) over the arm's API, for the preflight. */
  complete(baseUrl: string, api: Api, model: string): Promise<FrontEndAnswer>;
}

/** The Endpoint Pickers' metrics port (9090), by base URL; the scrape carries a bearer token. */
export interface EndpointPickers {
  /** GET /metrics; the text, or an error naming the HTTP status (401/403 when RBAC is missing). */
  metrics(baseUrl: string): Promise<string>;
}

/** The results host folder (see `layout.ts`). Writes are atomic. */
export interface ResultStore {
  /** A client's saved JSON where its Job wrote it, or undefined when the file does not exist. */
  readClientResult(benchmarkId: string, resultFile: string): Promise<string | undefined>;
  /** Removes a Job's output file, so a failed client cannot pass for a finished one. */
  removeClientResult(benchmarkId: string, resultFile: string): Promise<void>;
  writeStatus(status: StudyStatus): Promise<void>;
  /** A file the host's bootstrap left in the results folder (`gpu-uuids.json`, ...). */
  readHostFile(name: string): Promise<string | undefined>;
  /** The studies in `studies/`, and the folders whose study.json could not be read (with why). */
  listStudies(): Promise<{ studies: StoredStudy[]; unreadable: string[] }>;
  /** Whether `lab run --new` asked for a fresh study; the request is removed. */
  takeNewStudyRequest(): Promise<boolean>;
  /** Whether `lab run --redo-invalid` asked to run the latest study's invalid runs again; the request is removed. */
  takeRedoInvalidRequest(): Promise<boolean>;
  /** Whether `lab run --smoke` asked for the smoke study; the request is removed. */
  takeSmokeRequest(): Promise<boolean>;
  /** The folder of one study (`studies/<id>/`). */
  study(studyId: string): StudyFiles;
}

/** One study's folder. Nothing here touches another study's files. */
export interface StudyFiles {
  readStudy(): Promise<StudyRecord | undefined>;
  /**
   * Every `runs/<run-id>.json`. The host syncs to S3 every few minutes, so a restored folder can
   * hold run files newer than its study.json; and with the unreadable ones, why.
   */
  readRuns(): Promise<{ runs: RunRecord[]; unreadable: string[] }>;
  writeStudy(study: StudyRecord): Promise<void>;
  writeRun(record: RunRecord): Promise<void>;
  /**
   * Claims the next attempt number of a run, at least `atLeast`: its folder
   * `attempts/<run-id>/<n>/` is created and no later claim, by this runner or another, gets the
   * same number (a killed runner's attempt keeps its files).
   */
  claimAttempt(runId: string, atLeast: number): Promise<number>;
  /**
   * Keeps one file of a run's attempt, write-once, in `attempts/<run-id>/<n>/<path>`, and copies
   * it to `<path>` in the study folder (the latest attempt's files, for the report). A file the
   * attempt already kept is not replaced: returns false.
   */
  saveAttemptFile(runId: string, attempt: number, path: string, text: string): Promise<boolean>;
  appendLog(line: string): Promise<void>;
  /** A smoke study's checklist, as JSON and as the text `lab status` prints (layout.ts). */
  writeChecklist(checklist: SmokeChecklist): Promise<void>;
}

/** Time, injected so tests run instantly. */
export interface Clock {
  now(): Date;
  sleep(ms: number): Promise<void>;
}

export interface RunnerDeps {
  readonly cluster: Cluster;
  readonly replicas: Replicas;
  readonly frontEnds: FrontEnds;
  readonly endpointPickers: EndpointPickers;
  readonly store: ResultStore;
  readonly clock: Clock;
  /**
   * The benchmark Job of a client: `benchmarkJob(config, spec, gate)` of charts/benchmark-job.ts;
   * with `gate`, a staged client aimed at its gate (lib/study/staging.ts).
   */
  readonly jobManifest: (spec: BenchmarkSpec, gate?: ClientGate) => JobObject;
  /** Progress lines (stdout in the cluster). */
  readonly log: (line: string) => void;
  /** SIGTERM or SIGINT (stop-signal.ts): the study stops as `interrupted`, its clients deleted. */
  readonly stop?: StopRequest;
}

export const systemClock: Clock = {
  now: () => new Date(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

// ---- The network lab's runner (lib/runner/network) -----------------------------------------

/** A pod of a network-lab cell as the network runner needs to see it (docs/facts.md §N5). */
export interface NetworkPodState extends PodState {
  readonly namespace: string;
  /** spec.nodeName; empty while unscheduled. */
  readonly node: string;
  /** metadata.creationTimestamp. */
  readonly createdAt: string;
  /** status.podIP; empty before it has one. */
  readonly podIp: string;
  /** `istio-proxy` among the init containers with `restartPolicy: Always` (Istio's native sidecar). */
  readonly hasSidecar: boolean;
  /** metadata.annotations (Istio's ambient redirection is one). */
  readonly annotations: Readonly<Record<string, string>>;
  /** status.phase (`Pending`, `Running`, `Succeeded`, `Failed`). */
  readonly phase: string;
}

/** A Service as the network runner creates and reads it (E9). */
export interface ServiceState {
  readonly name: string;
  readonly clusterIp: string;
  readonly createdAt: string;
}

/** A Service manifest as plain JSON (the E9 template with its name replaced; a gate). */
export interface ServiceObject {
  readonly apiVersion: 'v1';
  readonly kind: 'Service';
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly spec: Readonly<Record<string, unknown>>;
}

/**
 * The Kubernetes API of a network-lab cell: the runner works in several namespaces (`plain`,
 * `mesh`, and reads Cilium's agent in `kube-system`), so every call names its namespace; a Job's
 * namespace is its manifest's. Not-found on delete is success.
 */
export interface NetworkCluster {
  createJob(job: JobObject): Promise<void>;
  getJob(namespace: string, name: string): Promise<JobCounts | undefined>;
  /** Foreground propagation; returns before the Job and its pods are gone. */
  deleteJob(namespace: string, name: string): Promise<void>;
  /** Names of the Jobs of a namespace matching a label selector (an earlier runner's, at start). */
  listJobNames(namespace: string, labelSelector: string): Promise<string[]>;
  listPods(namespace: string, labelSelector?: string): Promise<NetworkPodState[]>;
  deletePod(namespace: string, name: string): Promise<void>;
  podLog(namespace: string, name: string, container?: string): Promise<string>;
  /** A namespace's labels, or undefined when it does not exist. */
  namespaceLabels(name: string): Promise<Readonly<Record<string, string>> | undefined>;
  createService(service: ServiceObject): Promise<void>;
  listServices(namespace: string, labelSelector: string): Promise<ServiceState[]>;
  deleteService(namespace: string, name: string): Promise<void>;
  /**
   * Names of the Services (by the EndpointSlice label `kubernetes.io/service-name`) whose
   * EndpointSlices matching `labelSelector` hold at least one ready endpoint.
   */
  servicesWithReadyEndpoints(namespace: string, labelSelector: string): Promise<Set<string>>;
  /** The API server's `gitVersion`. */
  serverVersion(): Promise<string>;
}

/** The Istio sidecar's merged Prometheus endpoint of a pod (`:15020/stats/prometheus`). */
export interface SidecarMetrics {
  /** The exposition text, or an error naming the HTTP status or the connection fault. */
  scrape(podIp: string): Promise<string>;
}

/** The results folder of a cell (layout.ts; the network study's files in `network/layout.ts`). */
export interface NetworkResultStore {
  /** A file a Job wrote into its output folder, or undefined when it does not exist. */
  readJobOutput(jobName: string, file: string): Promise<string | undefined>;
  /** Empties a Job's output folder, so a failed Job cannot pass for a finished one. */
  removeJobOutput(jobName: string): Promise<void>;
  writeStatus(status: StudyStatus): Promise<void>;
  /** A file the host's bootstrap left (`host/host.json`). */
  readHostFile(name: string): Promise<string | undefined>;
  /** The network studies in `studies/`, and the folders that could not be read (with why). */
  listStudies(): Promise<{ studies: NetworkStudyRecord[]; unreadable: string[] }>;
  /** Whether `lab run --new` asked for a fresh study; the request is removed. */
  takeNewStudyRequest(): Promise<boolean>;
  /** Whether `lab run --smoke` asked for the cell's smoke study; the request is removed. */
  takeSmokeRequest(): Promise<boolean>;
  study(studyId: string): NetworkStudyFiles;
}

/** One network study's folder. */
export interface NetworkStudyFiles {
  readStudy(): Promise<NetworkStudyRecord | undefined>;
  /** Every `runs/<run-id>.json`, and the unreadable ones with why. */
  readRuns(): Promise<{ runs: NetworkRunRecord[]; unreadable: string[] }>;
  writeStudy(study: NetworkStudyRecord): Promise<void>;
  writeRun(record: NetworkRunRecord): Promise<void>;
  /**
   * Claims the next attempt number of a run (or of the study's own Jobs, `study`), at least
   * `atLeast`, as `StudyFiles.claimAttempt`: its folder `attempts/<run-id>/<n>/` is created and no
   * later claim, by this runner or another, gets the same number.
   */
  claimAttempt(runId: string, atLeast: number): Promise<number>;
  /**
   * Keeps a Job's output (its result file or its log) write-once in
   * `attempts/<run-id>/<n>/<file>`; a file the attempt already kept is not replaced: returns false.
   */
  saveAttemptFile(runId: string, attempt: number, file: string, text: string): Promise<boolean>;
  /** The cell's smoke checklist, as JSON and as the text `lab status` prints (layout.ts). */
  writeChecklist(checklist: AnyChecklist): Promise<void>;
  appendLog(line: string): Promise<void>;
}
