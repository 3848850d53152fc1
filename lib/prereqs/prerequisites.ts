import type { LabConfig } from '../config/schema.ts';

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
  readonly chart: string;
  readonly version: string;
  readonly namespace: string;
}

export type Prerequisite = ManifestPrerequisite | HelmPrerequisite;

export interface PrerequisiteList {
  readonly prerequisites: readonly Prerequisite[];
}

/** GAIE's release asset with its CRDs (InferencePool v1 and v1alpha2, InferenceObjective). */
export function gaieCrdsUrl(version: string): string {
  // UNCONFIRMED (not fetched here): `manifests.yaml` is the v1.0.x asset that several published
  // install guides, Envoy AI Gateway's among them, apply for v1.0.1; later GAIE releases name
  // their asset `v1-manifests.yaml`. The bootstrap's preflight must check the URL resolves.
  return `https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/${version}/manifests.yaml`;
}

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
  return { prerequisites: list };
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
    // Its releases ship Helm chart archives, not manifests; the OCI chart names are from
    // third-party install notes and were not pulled.
    unconfirmed: 'chart location and name not pulled to confirm',
  };
}

/**
 * The command that installs one prerequisite. Server-side apply for manifests: CRD bundles
 * exceed the annotation size limit of client-side apply.
 */
export function installCommand(prerequisite: Prerequisite): string {
  if (prerequisite.kind === 'manifest') return `kubectl apply --server-side -f ${prerequisite.url}`;
  const { release, chart, version, namespace } = prerequisite;
  return `helm upgrade --install ${release} ${chart} --version ${version} --namespace ${namespace} --create-namespace`;
}
