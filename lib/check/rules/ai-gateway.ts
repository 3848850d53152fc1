import { parse as parseYaml } from 'yaml';
import { eppFlags } from '../epp-config.ts';
import { goBool } from '../go-flags.ts';
import {
  isRecord,
  type Json,
  type KubeObject,
  list,
  nameOf,
  namespaceOf,
  objectRef,
  record,
  sameNamespace,
  selects,
  stringMap,
  text,
} from '../manifest.ts';
import { looksLikeEnvoyGatewayConfig } from '../schemas.ts';
import { findObject, mainInvocation, ofKind, type Testbed } from '../testbed.ts';
import { AI_GATEWAY, type Violation, violation } from '../violation.ts';

/**
 * The Envoy AI Gateway arm (docs/facts.md §3.6): Envoy Gateway v1.8.1 with the AI Gateway v1.1.0
 * controller as its extension server, routing to an InferencePool.
 */

/** The key of ConfigMap `envoy-gateway-config` that Envoy Gateway reads its EnvoyGateway document from. */
export const ENVOY_GATEWAY_CONFIG_KEY = 'envoy-gateway.yaml';
/** The AI Gateway controller's extension server (AI Gateway v1.1.0 manifests/envoy-gateway-values.yaml). */
export const AI_GATEWAY_EXTENSION_HOST = 'ai-gateway-controller.envoy-ai-gateway-system';
export const AI_GATEWAY_EXTENSION_PORT = 1063;
/** Post hooks and translation scopes the AI Gateway v1.1.0 values file enables. */
const AI_GATEWAY_POST_HOOKS = ['Translation', 'Cluster', 'Route'];
const AI_GATEWAY_TRANSLATION = ['listener', 'route', 'cluster', 'secret'];

const ROUTE_KINDS = ['HTTPRoute', 'AIGatewayRoute'];

/**
 * backendRef kinds Envoy Gateway v1.8.1 handles itself (internal/gatewayapi/validate.go
 * validateBackendRefGroup/validateBackendRefKind); any other is InvalidKind unless an extension
 * lists it (route.go isCustomBackendResource over the managers' backendResources).
 */
function isCoreBackend(group: string, kind: string): boolean {
  return (
    (group === '' && kind === 'Service') ||
    (group === 'multicluster.x-k8s.io' && kind === 'ServiceImport') ||
    (group === 'gateway.envoyproxy.io' && kind === 'Backend')
  );
}

export interface EnvoyGatewayDocument {
  readonly configMap: KubeObject;
  readonly key: string;
  readonly document: Json;
}

/** EnvoyGateway documents found in ConfigMaps (by content, so a renamed key is read too). */
export function envoyGatewayDocuments(testbed: Testbed): EnvoyGatewayDocument[] {
  return ofKind(testbed, 'ConfigMap').flatMap((configMap) =>
    Object.entries(record(configMap.data)).flatMap(([key, value]) => {
      const source = text(value);
      if (!source || !looksLikeEnvoyGatewayConfig(source)) return [];
      try {
        const document: unknown = parseYaml(source);
        return isRecord(document) ? [{ configMap, key, document }] : [];
      } catch {
        return [];
      }
    }),
  );
}

/** The extension managers of a document: `extensionManager`, or v1.8's `extensionManagers` list. */
function extensionManagers(document: Json): { manager: Json; path: string }[] {
  if (isRecord(document.extensionManager))
    return [{ manager: document.extensionManager, path: 'extensionManager' }];
  return list(document.extensionManagers).map((manager, i) => ({
    manager: record(manager),
    path: `extensionManagers[${i}]`,
  }));
}

interface BackendRef {
  readonly route: KubeObject;
  readonly field: string;
  readonly group: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string | undefined;
}

function routes(testbed: Testbed): KubeObject[] {
  return ROUTE_KINDS.flatMap((kind) => ofKind(testbed, kind));
}

function backendRefs(testbed: Testbed): BackendRef[] {
  return routes(testbed).flatMap((route) =>
    list(record(route.spec).rules).flatMap((rule, r) =>
      list(record(rule).backendRefs).map((value, b) => {
        const ref = record(value);
        return {
          route,
          field: `spec.rules[${r}].backendRefs[${b}]`,
          group: text(ref.group) ?? '',
          kind: text(ref.kind) ?? 'Service',
          name: text(ref.name) ?? '',
          namespace: text(ref.namespace) ?? namespaceOf(route),
        };
      }),
    ),
  );
}

const where = (doc: EnvoyGatewayDocument, path: string) => `data[${JSON.stringify(doc.key)}].${path}`;

/**
 * Every non-core backendRef kind of a route is listed in an extension manager's
 * `backendResources`; otherwise Envoy Gateway sets ResolvedRefs=False, reason InvalidKind.
 */
export function backendKindsListed(testbed: Testbed): Violation[] {
  const documents = envoyGatewayDocuments(testbed);
  const listed = documents.flatMap((doc) =>
    extensionManagers(doc.document).flatMap(({ manager }) =>
      list(manager.backendResources).map(
        (gvk) => `${text(record(gvk).group) ?? ''}/${text(record(gvk).kind) ?? ''}`,
      ),
    ),
  );
  return backendRefs(testbed)
    .filter((ref) => !isCoreBackend(ref.group, ref.kind) && !listed.includes(`${ref.group}/${ref.kind}`))
    .map((ref) => {
      const config =
        documents.length === 0
          ? `no EnvoyGateway configuration (ConfigMap envoy-gateway-config, key ${ENVOY_GATEWAY_CONFIG_KEY}) is among the manifests`
          : `${documents.map((d) => objectRef(d.configMap)).join(', ')} does not list it in extensionManager.backendResources`;
      return violation(
        ref.route,
        ref.field,
        AI_GATEWAY,
        `backendRef ${ref.group}/${ref.kind} ${ref.name}: ${config}; Envoy Gateway v1.8.1 accepts only Service, ServiceImport and Backend otherwise, so the route gets ResolvedRefs=False reason InvalidKind and no request reaches the pool`,
      );
    });
}

/**
 * Each extension manager has xdsTranslator hooks and exactly one service target (Envoy Gateway
 * v1.8.1 api/v1alpha1/validation validateEnvoyGatewayExtensionManager, else it refuses its
 * configuration); with InferencePool routes, the service is the AI Gateway controller on 1063
 * with the hooks its v1.1.0 values file sets.
 */
export function extensionManagerComplete(testbed: Testbed): Violation[] {
  const needsAiGateway =
    backendRefs(testbed).some((ref) => ref.kind === 'InferencePool') ||
    ofKind(testbed, 'AIGatewayRoute').length > 0;
  return envoyGatewayDocuments(testbed).flatMap((doc) => {
    const found: Violation[] = [];
    const add = (path: string, message: string) =>
      found.push(violation(doc.configMap, where(doc, path), AI_GATEWAY, message));
    const managers = extensionManagers(doc.document);
    if (isRecord(doc.document.extensionManager) && list(doc.document.extensionManagers).length > 0) {
      add(
        'extensionManagers',
        'is set together with extensionManager: Envoy Gateway v1.8.1 refuses its configuration (they are mutually exclusive)',
      );
    }
    if (managers.length === 0 && needsAiGateway) {
      add(
        'extensionManager',
        `is not set: the AI Gateway controller (${AI_GATEWAY_EXTENSION_HOST}:${AI_GATEWAY_EXTENSION_PORT}) never receives the InferencePool routes, so no ext_proc call to the EPP is added`,
      );
    }
    for (const { manager, path } of managers) {
      const xds = record(record(manager.hooks).xdsTranslator);
      const hooks = [...list(xds.pre), ...list(xds.post)];
      if (hooks.length === 0) {
        add(
          `${path}.hooks`,
          'has no xdsTranslator pre or post hooks: Envoy Gateway v1.8.1 refuses the configuration ("registered extension has no hooks specified") and does not start',
        );
      } else if (needsAiGateway) {
        const post = list(xds.post).map(String);
        const missing = AI_GATEWAY_POST_HOOKS.filter((hook) => !post.includes(hook));
        if (missing.length > 0) {
          add(
            `${path}.hooks.xdsTranslator.post`,
            `lacks ${missing.join(', ')}: the AI Gateway v1.1.0 extension adds the EPP's ext_proc filter and cluster in these hooks`,
          );
        }
        const translation = record(xds.translation);
        const off = AI_GATEWAY_TRANSLATION.filter((scope) => record(translation[scope]).includeAll !== true);
        if (off.length > 0) {
          add(
            `${path}.hooks.xdsTranslator.translation`,
            `does not set includeAll on ${off.join(', ')}: the AI Gateway v1.1.0 extension needs every ${off.join(', ')} in its Translation hook`,
          );
        }
      }
      const service = manager.service;
      if (!isRecord(service)) {
        add(
          `${path}.service`,
          'is not set: Envoy Gateway v1.8.1 refuses the configuration ("extension service config is empty")',
        );
        continue;
      }
      const targets = ['fqdn', 'ip', 'unix', 'host'].filter(
        (target) => service[target] !== undefined && service[target] !== '',
      );
      if (targets.length !== 1) {
        add(
          `${path}.service`,
          `has ${targets.length === 0 ? 'no target' : `${targets.join(' and ')}`}: Envoy Gateway v1.8.1 needs exactly one of fqdn, ip, unix or host`,
        );
        continue;
      }
      if (needsAiGateway) {
        const fqdn = record(service.fqdn);
        const host = text(fqdn.hostname) ?? text(service.host) ?? '';
        const port = fqdn.port ?? service.port;
        const hostOk =
          host === AI_GATEWAY_EXTENSION_HOST || host.startsWith(`${AI_GATEWAY_EXTENSION_HOST}.svc`);
        if (!hostOk || port !== AI_GATEWAY_EXTENSION_PORT) {
          add(
            `${path}.service`,
            `points at ${host || '(no host)'}:${String(port)}, not the AI Gateway controller ${AI_GATEWAY_EXTENSION_HOST}.svc.cluster.local:${AI_GATEWAY_EXTENSION_PORT}: Envoy Gateway's hook calls fail and the InferencePool routes never get their ext_proc`,
          );
        }
      }
    }
    return found;
  });
}

/**
 * The AI Gateway builds its own ext_proc cluster to an InferencePool's EPP with an
 * UpstreamTlsContext that accepts any certificate (AI Gateway v1.1.0 internal/extensionserver/
 * inferencepool.go buildExtProcClusterForInferencePoolEndpointPicker): it always dials TLS, so
 * the EPP needs secure serving on.
 */
export function aiGatewayEppServesTls(testbed: Testbed): Violation[] {
  const pools = backendRefs(testbed)
    .filter((ref) => ref.kind === 'InferencePool')
    .map((ref) => findObject(testbed, 'InferencePool', ref.name, ref.namespace))
    .filter((pool): pool is KubeObject => pool !== undefined);
  return [...new Set(pools)].flatMap((pool) => {
    const eppService = text(record(record(pool.spec).endpointPickerRef).name);
    const service = eppService ? findObject(testbed, 'Service', eppService, namespaceOf(pool)) : undefined;
    if (!service) return [];
    const selector = stringMap(record(service.spec).selector);
    return testbed.epps
      .filter(
        (ref) => sameNamespace(ref.pod.namespace, namespaceOf(service)) && selects(selector, ref.pod.labels),
      )
      .filter((ref) => !goBool(eppFlags(ref), 'secure-serving', true))
      .map((ref) =>
        violation(
          ref.pod.object,
          mainInvocation(ref)?.field ?? ref.path,
          AI_GATEWAY,
          `--secure-serving is off, but ${objectRef(pool)} is routed through the AI Gateway, which always dials its EPP with TLS (AI Gateway v1.1.0): every request fails its ext_proc handshake; drop --secure-serving=false`,
        ),
      );
  });
}

/** No dangling reference: route -> InferencePool and Gateway, Gateway -> GatewayClass -> EnvoyProxy. */
export function aiGatewayReferencesResolve(testbed: Testbed): Violation[] {
  const found: Violation[] = [];
  const missing = (object: KubeObject, field: string, what: string, why: string) =>
    found.push(
      violation(object, field, AI_GATEWAY, `names ${what}, which is not among the manifests: ${why}`),
    );
  for (const ref of backendRefs(testbed)) {
    if (ref.kind === 'InferencePool' && !findObject(testbed, 'InferencePool', ref.name, ref.namespace)) {
      missing(
        ref.route,
        `${ref.field}.name`,
        `InferencePool ${ref.name}`,
        'the route gets ResolvedRefs=False and answers 500',
      );
    }
  }
  for (const route of routes(testbed)) {
    list(record(route.spec).parentRefs).forEach((value, i) => {
      const parent = record(value);
      if ((text(parent.kind) ?? 'Gateway') !== 'Gateway') return;
      const name = text(parent.name) ?? '';
      const namespace = text(parent.namespace) ?? namespaceOf(route);
      if (!findObject(testbed, 'Gateway', name, namespace)) {
        missing(
          route,
          `spec.parentRefs[${i}].name`,
          `Gateway ${name}`,
          'the route is never Accepted and no listener serves it',
        );
      }
    });
  }
  for (const gateway of ofKind(testbed, 'Gateway')) {
    const className = text(record(gateway.spec).gatewayClassName) ?? '';
    if (!ofKind(testbed, 'GatewayClass').some((c) => nameOf(c) === className)) {
      missing(
        gateway,
        'spec.gatewayClassName',
        `GatewayClass ${className}`,
        'no controller claims the Gateway and it is never Programmed',
      );
    }
  }
  for (const gatewayClass of ofKind(testbed, 'GatewayClass')) {
    const ref = record(record(gatewayClass.spec).parametersRef);
    if (ref.kind !== 'EnvoyProxy') continue;
    const name = text(ref.name) ?? '';
    if (!findObject(testbed, 'EnvoyProxy', name, text(ref.namespace))) {
      missing(
        gatewayClass,
        'spec.parametersRef.name',
        `EnvoyProxy ${text(ref.namespace) ? `${text(ref.namespace)}/` : ''}${name}`,
        'Envoy Gateway marks the GatewayClass not Accepted (invalid parameters) and programs no proxy',
      );
    }
  }
  return found;
}
