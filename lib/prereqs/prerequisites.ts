import { stringify } from 'yaml';
import type { NetworkCell } from '../config/network.ts';
import type { LabConfig } from '../config/schema.ts';
import { ciliumValues, NODE_IP_PLACEHOLDER } from '../network/cilium-values.ts';

/**
 * Third-party manifests the lab needs on the cluster before its own charts. The lab vendors none
 * of them: each comes from its project's pinned release URL. Pure: the bootstrap applies this
 * list (dist/prerequisites.json) and `lab prereqs` prints it as commands.
 */

interface PrerequisiteBase {
  /** Stable id, e.g. `gaie-crds`. */
  readonly id: string;
  readonly title: string;
  /** Why the lab needs it. */
  readonly reason: string;
  /** Set when the source follows a documented pattern but was not fetched to confirm it. */
  readonly unconfirmed?: string;
}

/** A release asset applied with `kubectl apply --server-side -f <url>`. */
export interface ManifestPrerequisite extends PrerequisiteBase {
  readonly kind: 'manifest';
  readonly url: string;
}

/** A project that publishes Helm charts and no plain manifests. */
export interface HelmPrerequisite extends PrerequisiteBase {
  readonly kind: 'helm';
  readonly release: string;
  /** An OCI reference, or the chart's name in `repo`. */
  readonly chart: string;
  readonly version: string;
  readonly namespace: string;
  /** A classic Helm repository (`--repo`), for charts published that way (Cilium, Istio). */
  readonly repo?: string;
  /** Helm values, written beside the manifests as `valuesFile` by synth. */
  readonly values?: object;
  /** Where synth writes `values`, relative to the manifests folder (`--values`). */
  readonly valuesFile?: string;
  /** Placeholders in `values` the installer replaces first, with what to put there. */
  readonly placeholders?: Readonly<Record<string, string>>;
  /** Install with `--wait`: what comes next needs the release running (a CNI, istiod's injector). */
  readonly wait?: boolean;
}

export type Prerequisite = ManifestPrerequisite | HelmPrerequisite;

/**
 * A step to run right after one of the lab's own files is applied: a Deployment of a prerequisite
 * that must be running on what that file wrote before the lab goes on. Run it as
 * `kubectl -n <namespace> rollout restart deployment/<deployment>`, then wait for the rollout.
 */
export interface RolloutRestartStep {
  readonly kind: 'rollout-restart';
  /** Stable id, e.g. `restart-envoy-gateway`. */
  readonly id: string;
  readonly title: string;
  readonly reason: string;
  /** The synthesized file (chart id, without `.yaml`) after whose apply the step runs. */
  readonly after: string;
  readonly namespace: string;
  readonly deployment: string;
}

export type AfterApplyStep = RolloutRestartStep;

export interface PrerequisiteList {
  /** Third-party installs, in order, before the lab's files. */
  readonly prerequisites: readonly Prerequisite[];
  /**
   * Steps between the lab's files, each after the file it names (added after `prerequisites`;
   * empty when the configuration needs none, so readers of the older list are unaffected).
   */
  readonly afterApply: readonly AfterApplyStep[];
}

/** Chart (file) that writes Envoy Gateway's configuration for the AI Gateway arm. */
export const AI_GATEWAY_CONFIG_CHART = '70-ai-gateway-config';

/**
 * Envoy Gateway's release install writes `envoy-gateway-config` too, so the lab's version is applied
 * after the install. v1.8.1 reloads the file while running (internal/envoygateway/config/loader/
 * configloader.go, Loader.Start: an fsnotify watch that re-runs its hook), but the kubelet updates a
 * mounted ConfigMap only at its next sync, up to a minute or more later, and a reload that fails
 * validation is only logged. The restart makes the moment the new configuration takes effect
 * certain, and a rollout that becomes ready proves it loaded (docs/facts.md §3.6).
 */
export function envoyGatewayRestartStep(): RolloutRestartStep {
  return {
    kind: 'rollout-restart',
    id: 'restart-envoy-gateway',
    title: 'Restart Envoy Gateway',
    reason:
      'it must run on envoy-gateway-config (InferencePool backends, the AI Gateway extension) before the Gateway is created; its own reload waits for the kubelet to update the mounted file',
    after: AI_GATEWAY_CONFIG_CHART,
    namespace: 'envoy-gateway-system',
    deployment: 'envoy-gateway',
  };
}

/** Commands that run one after-apply step and wait for it. */
export function afterApplyCommands(step: AfterApplyStep): string[] {
  const target = `deployment/${step.deployment}`;
  return [
    `kubectl -n ${step.namespace} rollout restart ${target}`,
    `kubectl -n ${step.namespace} rollout status ${target} --timeout=5m`,
  ];
}

/** GAIE's release asset with its CRDs (InferencePool v1 and v1alpha2, InferenceObjective). */
export function gaieCrdsUrl(version: string): string {
  // `manifests.yaml` is the v1.0.x asset: at tag v1.0.1 `make release` builds
  // artifacts/manifests.yaml from config/crd (the three CRDs) and hack/release-quickstart.sh points
  // the install line at releases/download/<tag>/manifests.yaml (docs/facts.md §3.4). The upload
  // itself is the release manager's, not read here; later GAIE releases name their asset
  // `v1-manifests.yaml`. The bootstrap's preflight must check the URL resolves.
  return `https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/${version}/manifests.yaml`;
}

/**
 * Envoy Gateway's release install (Gateway API CRDs, its own CRDs, the controller in
 * envoy-gateway-system), applied server-side as its install guide for v1.8 does.
 */
export function envoyGatewayInstallUrl(version: string): string {
  return `https://github.com/envoyproxy/gateway/releases/download/${version}/install.yaml`;
}

/** Prerequisites of this configuration, in apply order. */
export function prerequisites(config: LabConfig): PrerequisiteList {
  const list: Prerequisite[] = [
    {
      kind: 'manifest',
      id: 'gaie-crds',
      title: `Gateway API Inference Extension ${config.gaie.version} CRDs`,
      url: gaieCrdsUrl(config.gaie.version),
      reason: 'InferencePool and InferenceObjective, which the Endpoint Pickers watch',
    },
  ];
  if (config.study.optionalArms.includes('ai-gateway')) {
    // GAIE's CRDs come first (above): the AI Gateway controller skips InferencePool support when
    // they are missing at its start.
    list.push(
      {
        kind: 'manifest',
        id: 'envoy-gateway',
        title: `Envoy Gateway ${config.aiGateway.envoyGatewayVersion}`,
        url: envoyGatewayInstallUrl(config.aiGateway.envoyGatewayVersion),
        reason: 'Gateway API CRDs and the Envoy Gateway controller under the AI Gateway',
      },
      aiGatewayChart(
        config,
        'ai-gateway-crds',
        'aieg-crd',
        'ai-gateway-crds-helm',
        'CRDs',
        'AIGatewayRoute and related kinds',
      ),
      aiGatewayChart(
        config,
        'ai-gateway',
        'aieg',
        'ai-gateway-helm',
        'controller',
        "the AI Gateway controller, Envoy Gateway's extension server",
      ),
    );
  }
  const afterApply = config.study.optionalArms.includes('ai-gateway') ? [envoyGatewayRestartStep()] : [];
  return { prerequisites: list, afterApply };
}

const AI_GATEWAY_NAMESPACE = 'envoy-ai-gateway-system';

function aiGatewayChart(
  config: LabConfig,
  id: string,
  release: string,
  chart: string,
  part: string,
  reason: string,
): HelmPrerequisite {
  const version = config.aiGateway.aiGatewayVersion;
  return {
    kind: 'helm',
    id,
    title: `Envoy AI Gateway ${version} ${part}`,
    reason,
    release,
    chart: `oci://docker.io/envoyproxy/${chart}`,
    version,
    namespace: AI_GATEWAY_NAMESPACE,
    // Its releases ship Helm charts, not manifests. Release names, OCI chart names, the `v` in the
    // version and the namespace are those of the project's installation guide for v1.1
    // (site/versioned_docs/version-1.1/getting-started/installation.md: `aieg-crd` from
    // ai-gateway-crds-helm first, then `aieg` from ai-gateway-helm). The release workflow at tag
    // v1.1.0 pushes both charts to oci://docker.io/envoyproxy, versioned with and without the `v`
    // (.github/workflows/release.yaml `make helm-push`; Makefile `OCI_REGISTRY ?= docker.io/envoyproxy`).
    // Still UNCONFIRMED: the published charts were not pulled here, so the bootstrap's preflight
    // must check they resolve.
    unconfirmed:
      'the release workflow pushes it to this OCI location, but the published chart was not pulled to confirm it',
  };
}

/**
 * The command that installs one prerequisite. Server-side apply for manifests: CRD bundles
 * exceed the annotation size limit of client-side apply.
 */
export function installCommand(prerequisite: Prerequisite): string {
  if (prerequisite.kind === 'manifest') return `kubectl apply --server-side -f ${prerequisite.url}`;
  const { release, chart, version, namespace, repo, valuesFile, wait } = prerequisite;
  return [
    `helm upgrade --install ${release} ${chart}`,
    ...(repo ? [`--repo ${repo}`] : []),
    `--version ${version} --namespace ${namespace} --create-namespace`,
    ...(valuesFile ? [`--values ${valuesFile}`] : []),
    ...(wait ? ['--wait'] : []),
  ].join(' ');
}

/** Cilium's Helm repository (the cilium/charts repository's index, served at helm.cilium.io). */
export const CILIUM_HELM_REPO = 'https://helm.cilium.io';
/** Istio's repository for release charts (istio/istio manifests/charts/README.md). */
export const ISTIO_HELM_REPO = 'https://istio-release.storage.googleapis.com/charts';
/** Folder (in a cell's manifests folder) where synth writes the Helm values files. */
export const HELM_VALUES_DIR = 'helm-values';
const ISTIO_NAMESPACE = 'istio-system';

/**
 * The Helm prerequisites of one network-lab cell, in install order (docs/facts.md §N2): Cilium
 * first on a Cilium cell (the node is not Ready without a CNI), then on a cell with a mesh Istio's
 * `base` and `istiod`, and for ambient `cni` and `ztunnel`. Each is pinned; they go through the same
 * install path as the LLM-gateway lab's Helm prerequisites (a checksum-verified Helm).
 */
export function networkPrerequisites(config: LabConfig, cell: NetworkCell): PrerequisiteList {
  const { network } = config;
  const list: HelmPrerequisite[] = [];
  const cilium = ciliumValues(network, cell);
  if (cilium) {
    list.push({
      kind: 'helm',
      id: 'cilium',
      title: `Cilium ${network.cilium.version}`,
      reason: 'the CNI and the eBPF kube-proxy replacement of this cell',
      release: 'cilium',
      chart: 'cilium',
      repo: CILIUM_HELM_REPO,
      version: network.cilium.version,
      namespace: 'kube-system',
      values: cilium,
      valuesFile: `${HELM_VALUES_DIR}/cilium.yaml`,
      placeholders: {
        [NODE_IP_PLACEHOLDER]:
          "the node's private IPv4 address (k8sServiceHost: without kube-proxy Cilium reaches the API server there)",
      },
      wait: true,
    });
  }
  if (cell.mesh !== 'none') {
    const version = network.istio.version;
    const istio = (id: string, chart: string, reason: string, values?: Record<string, unknown>) => {
      list.push({
        kind: 'helm',
        id,
        title: `Istio ${version} ${chart}`,
        reason,
        release: id,
        chart,
        repo: ISTIO_HELM_REPO,
        version,
        namespace: ISTIO_NAMESPACE,
        ...(values ? { values, valuesFile: `${HELM_VALUES_DIR}/${id}.yaml` } : {}),
        wait: true,
      });
    };
    const ambient = cell.mesh === 'ambient';
    istio('istio-base', 'base', "Istio's CRDs (PeerAuthentication, AuthorizationPolicy, DestinationRule)");
    istio(
      'istiod',
      'istiod',
      ambient ? 'the control plane, ambient profile' : 'the control plane and the sidecar injector',
      ambient ? { profile: 'ambient' } : undefined,
    );
    if (ambient) {
      // The k3s platform profile points the CNI at K3s's flannel CNI folders; with Cilium (flannel
      // off) containerd uses /etc/cni/net.d, the chart's default (istio-cni zzz_profile.yaml merges
      // files/profile-platform-<global.platform>.yaml).
      istio('istio-cni', 'cni', "ambient's node agent: redirects pod traffic to ztunnel", {
        profile: 'ambient',
        ...(cell.datapath === 'cilium' ? {} : { global: { platform: 'k3s' } }),
      });
      istio('ztunnel', 'ztunnel', "ambient's per-node L4 proxy (mTLS between pods)");
    }
  }
  return { prerequisites: list, afterApply: [] };
}

/**
 * The shell lines that install a list, for `lab prereqs`: each prerequisite with its reason, Helm
 * values written to the file the install reads (with a note on the placeholders to fill), then the
 * after-apply steps.
 */
export function prerequisiteScript(list: PrerequisiteList): string[] {
  const lines = list.prerequisites.flatMap((prerequisite) => [
    `# ${prerequisite.title}: ${prerequisite.reason}`,
    ...(prerequisite.unconfirmed ? [`# UNCONFIRMED: ${prerequisite.unconfirmed}`] : []),
    ...(prerequisite.kind === 'helm' ? valuesFileLines(prerequisite) : []),
    installCommand(prerequisite),
  ]);
  // Steps that belong between the lab's own files, e.g. Envoy Gateway's restart (docs/facts.md §3.6).
  const between = list.afterApply.flatMap((step) => [
    `# ${step.title}, right after applying ${step.after}.yaml: ${step.reason}`,
    ...afterApplyCommands(step),
  ]);
  return [...lines, ...between];
}

function valuesFileLines(prerequisite: HelmPrerequisite): string[] {
  if (!prerequisite.values || !prerequisite.valuesFile) return [];
  const placeholders = Object.entries(prerequisite.placeholders ?? {}).map(
    ([token, what]) => `# replace ${token} in ${prerequisite.valuesFile} with ${what}`,
  );
  const folder = prerequisite.valuesFile.includes('/')
    ? [`mkdir -p ${prerequisite.valuesFile.slice(0, prerequisite.valuesFile.lastIndexOf('/'))}`]
    : [];
  return [
    ...folder,
    `cat >${prerequisite.valuesFile} <<'VALUES'`,
    ...stringify(prerequisite.values).trimEnd().split('\n'),
    'VALUES',
    ...placeholders,
  ];
}
